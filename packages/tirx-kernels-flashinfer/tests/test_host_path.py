# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The eager host path on the CPU: each compiled kernel replaced by a torch function of the
same arguments (and every tensor taken as on cuda:0), so the plans' views, contiguous copies
and copies back, and the per-signature cache, are checked without a GPU."""

import pytest
import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.flashinfer import _host, activation, norm, rope
from tirx_kernels.flashinfer._activation_tirx import get_act_and_mul_kernel
from tirx_kernels.flashinfer._norm_tirx import make as make_norm
from tirx_kernels.flashinfer._rope_tirx import get_grid_kernel, get_walk_kernel
from tirx_kernels.flashinfer.kernels import _rms_common as rms
from tirx_kernels.flashinfer.kernels import activation as act_contract
from tirx_kernels.flashinfer.kernels import layernorm as ln_contract
from tirx_kernels.flashinfer.kernels import rope as rope_contract

BF16 = torch.bfloat16


def _contiguous(*tensors):
    for t in tensors:  # what the kernels' tensor parameters demand
        assert t.is_contiguous() and t.data_ptr() % 16 == 0, (t.shape, t.stride())


def _norm_kernel(kind, dtype, hidden, batch, weight_bias):
    if kind == "rmsnorm":

        def run(x, w, y, eps):
            _contiguous(x, y)
            assert x.dim() == 2
            y.copy_(rms.rmsnorm_reference(x, w, eps, weight_bias))

    elif kind == "fused_add_rmsnorm":

        def run(i, r, w, eps):
            _contiguous(i, r)
            res, out = rms.fused_add_reference(i, r, w, eps, weight_bias)
            r.copy_(res)
            i.copy_(out)

    else:

        def run(x, g, b, y, eps):
            _contiguous(x, y)
            y.copy_(ln_contract.reference(x, g, b, eps))

    return run


def _act_kernel(act, dtype, d, schedule):
    def run(x, y, *ctas):
        _contiguous(x, y)
        assert x.dim() == 2 and len(ctas) == (schedule == "stream")
        y.copy_(act_contract.reference(x, act))

    return run


def _rope_kernel(
    dtype, head_dim, hq, hk, interleave, pos_dtype, walk, rotary_dim, outs=False, strided=False
):
    """The kernels' effect in torch: q and k (token-strided ones with ``strided``) rotated in
    place, or (``outs``) into q_rope and k_rope."""

    def rotated(x, pos, rcp_scale, rcp_theta):
        scales = (1 / rcp_scale, 1 / rcp_theta)
        return rope_contract.reference(x, pos, interleave, *scales, rotary_dim=rotary_dim)

    if outs:

        def run_out_of_place(q, k, q_rope, k_rope, pos, grid, rcp_scale, rcp_theta):
            _contiguous(q, k, q_rope, k_rope)
            for x, y in ((q, q_rope), (k, k_rope)):
                y.copy_(rotated(x, pos, rcp_scale, rcp_theta))

        return run_out_of_place

    def run(q, k, pos, grid, rcp_scale, rcp_theta):
        if strided:
            assert all(rope._token_strided(x) for x in (q, k))
        else:
            _contiguous(q, k)
        for x in (q, k):
            x.copy_(rotated(x, pos, rcp_scale, rcp_theta))

    return run


def _norm_func(kind, dtype, hidden, batch, weight_bias):
    return make_norm(kind, dtype, hidden, weight_bias, **norm.schedule(kind, hidden, batch))


def _act_func(act, dtype, d, schedule):
    return get_act_and_mul_kernel(act, dtype, d, schedule=schedule)


def _rope_func(
    dtype, d, hq, hk, interleave, pos_dtype, walk, rotary_dim, outs=False, strided=False
):
    build = get_walk_kernel if walk else get_grid_kernel
    options = dict(rotary_dim=rotary_dim, out_of_place=outs, strided=strided)
    return build(dtype, d, hq, hk, interleave, pos_dtype, **options)


@pytest.fixture
def stand_ins(monkeypatch):
    """Each kernel: its effect in torch, behind what its generated host function refuses
    (ValueError, as on the GPU), so the plans' fallbacks run as they do there."""
    launched: list = []
    monkeypatch.setattr(_host, "cuda_index", lambda where, named: 0)
    monkeypatch.setattr(_host, "main_of", lambda kernel: kernel)
    stand_in = testing.checked_launches(_norm_func, launched, _norm_kernel)
    monkeypatch.setattr(norm, "_host_kernel", stand_in)
    monkeypatch.setattr(
        activation, "_compiled", testing.checked_launches(_act_func, launched, _act_kernel)
    )
    monkeypatch.setattr(activation, "_stream_ctas", lambda d, tokens, device: 1)
    monkeypatch.setattr(
        rope, "_compiled", testing.checked_launches(_rope_func, launched, _rope_kernel)
    )
    monkeypatch.setattr(toolchain, "sm_count", lambda index=0: 132)
    for module in (norm, activation, rope):
        monkeypatch.setattr(module, "_PLANS", {})
        monkeypatch.setattr(module, "_FAST", {})
    return launched


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(BF16)


TOLS = {"atol": 2e-2, "rtol": 2e-2}


def test_norms_take_2d_3d_and_strided_rows(stand_ins):
    qkv, w = randn(5, 3 * 4 * 64), randn(64, seed=1)
    q = qkv[:, :256].view(5, 4, 64)  # a head slice: rows with a stride
    want = rms.rmsnorm_reference(q, w, 1e-6, 0.0)
    for x in (q.contiguous(), q, q.contiguous().view(20, 64)):
        torch.testing.assert_close(norm.rmsnorm(x, w).float().view(5, 4, 64), want, **TOLS)
    out = torch.zeros(5, 2, 4, 64, dtype=BF16)[:, 1]  # a strided out
    assert norm.gemma_rmsnorm(q, w, out=out) is out
    torch.testing.assert_close(out.float(), rms.rmsnorm_reference(q, w, 1e-6, 1.0), **TOLS)
    x, r, w4 = qkv[:, :256], qkv[:, 256:512], w.repeat(4)
    want_r, want = rms.fused_add_reference(x, r, w4, 1e-6, 0.0)
    v_before = qkv[:, 512:].clone()
    norm.fused_add_rmsnorm(x, r, w4)
    assert torch.equal(r, want_r)
    torch.testing.assert_close(x.float(), want, **TOLS)
    assert torch.equal(qkv[:, 512:], v_before)
    g, b = torch.randn(256), torch.randn(256)
    got = norm.layernorm(qkv[:, 512:768], g, b)
    torch.testing.assert_close(got.float(), ln_contract.reference(v_before[:, :256], g, b), **TOLS)


def test_a_plan_is_resolved_once_per_signature(stand_ins, monkeypatch):
    calls = []
    resolve = norm._resolve_rmsnorm
    monkeypatch.setattr(norm, "_resolve_rmsnorm", lambda *a: calls.append(a) or resolve(*a))
    x, w = randn(4, 128), randn(128, seed=1)
    for _ in range(3):
        norm.rmsnorm(x, w)
        torch.ops.tirx_kernels.flashinfer_rmsnorm(torch.empty_like(x), x, w, 1e-6)
    assert len(calls) == 1  # the wrapper's direct launch and the op share the plan
    norm.rmsnorm(randn(5, 128), w)  # another shape
    norm.gemma_rmsnorm(x, w)  # another op
    norm.rmsnorm(x[:, :120], randn(120))  # strides
    assert len(calls) == 4
    with pytest.raises(ValueError, match="weight must be 1D"):  # a failed check caches nothing
        norm.rmsnorm(x, randn(64))
    with pytest.raises(ValueError, match="weight must be 1D"):
        norm.rmsnorm(x, randn(64))


def test_activations_take_strided_and_unaligned_rows(stand_ins):
    wide = randn(6, 3, 3 * 64)
    x = wide[..., : 2 * 64]  # 3D, rows with a stride
    for act, fn in (("silu", activation.silu_and_mul), ("gelu", activation.gelu_and_mul)):
        want = act_contract.reference(x.contiguous(), act)
        torch.testing.assert_close(fn(x).float(), want.float(), **TOLS)
        shifted = randn(2 * 64 + 4).view(-1)[4:].view(1, -1)  # 8 bytes off 16
        want = act_contract.reference(shifted.clone(), act)
        torch.testing.assert_close(fn(shifted).float(), want.float(), **TOLS)


def test_rope_rotates_partial_and_strided_heads(stand_ins):
    nnz, hq, hk, d = 6, 4, 2, 128
    qkv = randn(nnz, hq + 2 * hk, d)
    pos = torch.arange(nnz, dtype=torch.int64) * 100
    q, k = qkv[:, :hq], qkv[:, hq : hq + hk]
    q0, k0, v0 = q.clone(), k.clone(), qkv[:, hq + hk :].clone()
    q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, rotary_dim=64, interleave=True)
    assert torch.equal(q, q0) and torch.equal(k, k0)
    for got, x in ((q_rope, q0), (k_rope, k0)):
        want = rope_contract.reference(x, pos, True, rotary_dim=64)
        torch.testing.assert_close(got.float(), want, **TOLS)
        assert torch.equal(got[..., 64:], x[..., 64:])
    rope.apply_rope_pos_ids_inplace(q, k, pos, rotary_dim=64, interleave=True)
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)
    assert torch.equal(qkv[:, hq + hk :], v0)


def test_inputs_past_int32_indexing_run_in_row_chunks(stand_ins, monkeypatch):
    monkeypatch.setattr(norm, "INDEX_LIMIT", 64 * 10)  # 2**31 elements, scaled down
    launched = []
    kernel = norm._host_kernel
    monkeypatch.setattr(norm, "_host_kernel", lambda *key: launched.append(key) or kernel(*key))
    x, w, r = randn(25, 64), randn(64, seed=1), randn(25, 64, seed=2)
    torch.testing.assert_close(
        norm.rmsnorm(x, w).float(), rms.rmsnorm_reference(x, w, 1e-6, 0.0), **TOLS
    )
    assert len(launched) == 2  # chunks of 9 rows (the last 7): two kernels' plans
    want_r, want = rms.fused_add_reference(x, r, w, 1e-6, 1.0)
    norm.gemma_fused_add_rmsnorm(x, r, w)
    assert torch.equal(r, want_r)
    torch.testing.assert_close(x.float(), want, **TOLS)
    q = randn(5, 5, 64)  # 3D: 25 rows of heads
    got = norm.rmsnorm(q, w)
    torch.testing.assert_close(got.float(), rms.rmsnorm_reference(q, w, 1e-6, 0.0), **TOLS)


def test_meta_and_cpu_tensors_take_the_op_not_the_direct_path():
    meta = {"dtype": BF16, "device": "meta"}
    out = norm.rmsnorm(torch.empty(3, 4, 64, **meta), torch.empty(64, **meta))
    assert out.shape == (3, 4, 64) and out.device.type == "meta"  # the op's fake
    assert _host.direct(torch.empty(1)) is False  # a CPU tensor: the op's checks answer
    with pytest.raises(ValueError, match="input must be a CUDA tensor"):
        activation.silu_and_mul(torch.empty(2, 64, dtype=BF16))


def test_the_switch_sends_eager_calls_through_the_op(hopper, monkeypatch):
    x, w = randn(7, 4096).cuda(), randn(4096, seed=1).cuda()
    assert _host.direct(x)
    direct = norm.rmsnorm(x, w)
    monkeypatch.setattr(_host, "DIRECT", False)  # TIRX_KERNELS_FLASHINFER_DIRECT=0
    assert not _host.direct(x)
    assert torch.equal(norm.rmsnorm(x, w), direct)


def test_a_repeated_call_builds_no_signature_key(stand_ins, monkeypatch):
    """Once a shape's kernel-checked plan is known, a call of that shape only looks it up
    by (op, shape, dtype, device): the five attribute reads per tensor of the per-signature
    key are what the fast path saves."""
    keys = []
    for module in (norm, activation, rope):
        monkeypatch.setattr(module, "_sig", lambda t: keys.append(t.shape) or _host.signature(t))
    x, w, r = randn(4, 128), randn(128, seed=1), randn(4, 128, seed=2)
    pair = randn(4, 2 * 64)
    q, k, pos = randn(4, 4, 64), randn(4, 2, 64, seed=1), torch.arange(4)
    calls = (
        lambda: norm.rmsnorm(x, w),
        lambda: norm.fused_add_rmsnorm(x, r, w),
        lambda: norm.layernorm(x, torch.ones(128), torch.zeros(128)),
        lambda: activation.silu_and_mul(pair),
        lambda: rope.apply_rope_pos_ids_inplace(q, k, pos),
        lambda: rope.apply_rope_pos_ids(q, k, pos),
    )
    for call in calls:
        call()
    first = len(keys)
    assert first == 3 + 3 + 4 + 2 + 3 + 5  # every tensor of each call, once
    for call in calls:
        call()
    assert len(keys) == first


def test_a_call_the_fast_plan_refuses_takes_the_full_checks(stand_ins):
    """Same shape as a cached kernel-checked plan but strided, or with a bad weight: the
    stand-in refuses as the host function does, and the per-signature path answers."""
    x, w = randn(5, 128), randn(128, seed=1)
    want = rms.rmsnorm_reference(x, w, 1e-6, 0.0)
    torch.testing.assert_close(norm.rmsnorm(x, w).float(), want, **TOLS)
    wide = torch.zeros(5, 256, dtype=BF16)
    wide[:, :128] = x
    strided = wide[:, :128]  # same shape, rows with a stride
    torch.testing.assert_close(norm.rmsnorm(strided, w).float(), want, **TOLS)
    with pytest.raises(ValueError, match="rmsnorm: weight must be 1D of shape \\(128,\\)"):
        norm.rmsnorm(x, w.float())
    with pytest.raises(ValueError, match="out must have input's shape"):
        norm.rmsnorm(x, w, out=torch.empty(4, 128, dtype=BF16))
    out = torch.empty(5, 128, dtype=BF16)
    torch.testing.assert_close(norm.rmsnorm(x, w, out=out).float(), want, **TOLS)
