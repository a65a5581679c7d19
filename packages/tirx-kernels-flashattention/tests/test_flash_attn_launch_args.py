# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The ops' kernel arguments against the kernels' parameters, on the CPU: each op runs on
CPU tensors and hands its launch arguments to a stand-in for the compiled kernel, which
compares them with the kernel's (uncompiled) parameters as the launch on the GPU does."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import host, testing
from tirx_kernels.flashattention import attention, flash_attn_func, flash_attn_varlen_func
from tirx_kernels.flashattention._attention_schedule import HEAD_DIMS, override_text
from tirx_kernels.flashattention._attention_tirx import make_flash_fwd, make_flash_fwd_varlen


def _stand_in(monkeypatch, compiled):
    """``compiled`` in place of the kernel factory, its launchers as the kernels' ``main``,
    and no plan of another test's stand-in (the op caches one per call signature)."""
    monkeypatch.setattr(attention, "compiled", compiled)
    monkeypatch.setattr(host, "main_of", lambda kernel: kernel)
    monkeypatch.setattr(attention, "_PLANS", {})


@pytest.fixture
def launched(monkeypatch):
    funcs: list = []

    def make(varlen, *key):
        return (make_flash_fwd_varlen if varlen else make_flash_fwd)(*key)

    _stand_in(monkeypatch, testing.checked_launches(make, funcs))
    return funcs


@pytest.mark.parametrize("d, dv", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_launch_matches_the_kernel(launched, d, dv, causal):
    q = torch.zeros(2, 131, 8, d, dtype=torch.float16)
    k = torch.zeros(2, 77, 2, d, dtype=torch.float16)
    v = torch.zeros(2, 77, 2, dv, dtype=torch.float16)
    out, lse = flash_attn_func(q, k, v, causal=causal)
    assert len(launched) == 1 and out.shape == (2, 131, 8, dv) and lse.shape == (2, 8, 131)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_varlen_func_launch_matches_the_kernel(launched, causal):
    lens_q, lens_k = [5, 300, 1], [9, 260, 70]
    cu_q = torch.tensor([0, 5, 305, 306], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 269, 339], dtype=torch.int32)
    q = torch.zeros(sum(lens_q), 4, 128, dtype=torch.bfloat16)
    k = torch.zeros(sum(lens_k), 1, 128, dtype=torch.bfloat16)
    out, lse = flash_attn_varlen_func(q, k, k, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal)
    assert len(launched) == 1 and out.shape == q.shape and lse.shape == (4, sum(lens_q))


def test_one_kernel_serves_every_size_and_scale(launched, monkeypatch):
    keys: list = []
    stand_in = attention.compiled
    _stand_in(monkeypatch, lambda *key: keys.append(key) or stand_in(*key))
    for b, sq, sk, scale in ((1, 1, 1, 0.1), (3, 200, 77, 0.2), (2, 1000, 4000, None)):
        q = torch.zeros(b, sq, 4, 64, dtype=torch.bfloat16)
        k = torch.zeros(b, sk, 1, 64, dtype=torch.bfloat16)
        flash_attn_func(q, k, k, softmax_scale=scale, causal=True)
    assert len(keys) == len(launched) == 3 and len(set(keys)) == 1


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "tile",
    [{"bm": 192, "bn": 128}, {"bm": 192, "bn": 192, "pv_smem": True}, {"persistent": True}],
    ids=["rs", "ss", "persistent"],
)
def test_the_bench_variants_launch_matches_the_kernel(launched, causal, tile):
    from tirx_kernels.flashattention.kernels import flash_attn_fwd as fa

    data = {name: torch.zeros(2, 200, 4, 64, dtype=torch.bfloat16) for name in "qkv"}
    run = fa._launch_with(data, 0.125, causal, tile)
    run()
    assert len(launched) == 2


@pytest.mark.parametrize("causal", [False, True])
def test_every_persistent_launch_starts_its_tile_counter_at_zero(monkeypatch, causal):
    """The causal walk takes tiles from a counter the kernel advances: the op allocates a
    zeroed one per call, and the bench's direct launch zeroes it before each launch (a
    reused counter would hand every CTA its first tile only)."""
    from tirx_kernels.flashattention.kernels import flash_attn_fwd as fa

    seen: list = []

    def kernel(*args):  # Q, K, V, Out, LSE[, counter], sizes, scale: the kernel advances it
        counters = [a for a in args[5:6] if isinstance(a, torch.Tensor)]
        seen.append([int(c.item()) for c in counters])
        for c in counters:
            c.fill_(99)

    _stand_in(monkeypatch, lambda *key: kernel)
    monkeypatch.setenv("TIRX_FLASH_ATTN_SCHEDULE", "persistent=1")
    data = {name: torch.zeros(2, 200, 4, 64, dtype=torch.bfloat16) for name in "qkv"}
    flash_attn_func(data["q"], data["k"], data["v"], causal=causal)
    flash_attn_func(data["q"], data["k"], data["v"], causal=causal)
    run = fa._launch_with(data, 0.125, causal, {"persistent": True})
    run()
    run()
    assert seen == ([[0]] if causal else [[]]) * 5


def test_a_call_signature_is_checked_and_resolved_once(launched, monkeypatch):
    keys: list = []
    stand_in = attention.compiled
    _stand_in(monkeypatch, lambda *key: keys.append(key) or stand_in(*key))
    q = torch.zeros(2, 50, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(2, 70, 2, 64, dtype=torch.bfloat16)
    for _ in range(3):
        flash_attn_func(q, k, k, causal=True)
    assert len(launched) == 3 and len(keys) == 1
    flash_attn_func(q[:, :49].contiguous(), k, k, causal=True)  # a new signature
    monkeypatch.setenv("TIRX_FLASH_ATTN_SCHEDULE", "pingpong=0")
    override_text.cache_clear()  # read at the next call
    flash_attn_func(q, k, k, causal=True)
    assert len(keys) == 3 and keys[2][-1] != keys[0][-1] and keys[1] == keys[0]


def test_eager_calls_on_plain_cuda_tensors_skip_the_op(launched, monkeypatch):
    def no_op(*args):
        raise AssertionError("the dispatcher path was taken")

    monkeypatch.setattr(attention, "_direct", lambda q, k, v: True)  # as for plain CUDA ones
    monkeypatch.setattr(attention, "_FWD", no_op)
    q = torch.zeros(1, 9, 2, 128, dtype=torch.float16)
    out, lse = flash_attn_func(q, q, q, softmax_scale=0.3)
    assert len(launched) == 1 and out.shape == q.shape and lse.shape == (1, 2, 9)
    with pytest.raises(ValueError, match="k, v: dtype must equal"):  # checked on this path too
        flash_attn_func(q, q.bfloat16(), q.bfloat16())


def test_a_plan_binds_the_direct_launcher_to_its_signature(launched, monkeypatch):
    """Bound once per call signature, to the kernel's 2D views and taking the caller's
    tensors as they are (``as_called``): a call makes no view."""
    binds, calls = [], []

    def direct_launcher(kernel, *args, as_called=()):
        binds.append((args, as_called))
        return lambda *args: calls.append(args)

    monkeypatch.setattr(host, "direct_launcher", direct_launcher)
    monkeypatch.setattr(attention, "_direct", lambda q, k, v: True)  # as for plain CUDA ones
    q = torch.zeros(2, 131, 8, 128, dtype=torch.float16)
    k = torch.zeros(2, 77, 2, 128, dtype=torch.float16)
    for scale in (0.1, 0.2):
        flash_attn_func(q, k, k, softmax_scale=scale)
    ((args, as_called),) = binds  # once per call signature
    assert args[5:] == as_called[5:] == (2, 131, 77, 1.0)  # batch, seqlens, an example scale
    assert args[0].shape == (2 * 131, 8 * 128) and as_called[0] is q
    assert [c[5:] for c in calls] == [(2, 131, 77, 0.1), (2, 131, 77, 0.2)]
    assert calls[0][0] is q and calls[0][3].shape == (2, 131, 8, 128) and not launched


@pytest.mark.parametrize(
    "name, shape, dtype",
    [("out", (1, 9, 2, 64), torch.float16), ("lse", (1, 2, 8), torch.float32)]
    + [("lse", (1, 2, 9), torch.float16), ("out", (1, 9, 2, 128), torch.bfloat16)],
)
def test_the_op_refuses_outputs_the_kernel_would_overrun(launched, name, shape, dtype):
    q = torch.zeros(1, 9, 2, 128, dtype=torch.float16)
    outputs = {"out": torch.empty_like(q), "lse": torch.empty(1, 2, 9)}
    outputs[name] = torch.empty(shape, dtype=dtype)
    with pytest.raises(ValueError, match=f"{name}: must be a contiguous"):
        torch.ops.tirx_kernels.flashattention_fwd(
            outputs["out"], outputs["lse"], q, q, q, 0.1, False
        )
    assert not launched


def test_varlen_eager_calls_skip_the_op_and_resolve_once(launched, monkeypatch):
    def no_op(*args):
        raise AssertionError("the dispatcher path was taken")

    monkeypatch.setattr(attention, "_direct", lambda q, k, v: True)  # as for plain CUDA ones
    monkeypatch.setattr(attention, "_VARLEN_FWD", no_op)
    cu_q = torch.tensor([0, 3, 10], dtype=torch.int32)
    cu_k = torch.tensor([0, 8, 20], dtype=torch.int32)
    q, k = (
        torch.zeros(10, 4, 64, dtype=torch.bfloat16),
        torch.zeros(20, 2, 64, dtype=torch.bfloat16),
    )
    for max_seqlen_q in (7, 7, 0):  # 0: nothing to launch
        out, lse = flash_attn_varlen_func(q, k, k, cu_q, cu_k, max_seqlen_q, 12, causal=True)
    assert len(launched) == 2 and out.shape == q.shape and lse.shape == (4, 10)
    assert len(attention._PLANS) == 1
    with pytest.raises(ValueError, match="cu_seqlens_k: must be a 1D int32"):
        flash_attn_varlen_func(q, k, k, cu_q, cu_k.long(), 7, 12)


@pytest.mark.parametrize("name, shape", [("out", (9, 4, 64)), ("lse", (4, 9))])
def test_the_varlen_op_refuses_outputs_the_kernel_would_overrun(launched, name, shape):
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    q = torch.zeros(10, 4, 64, dtype=torch.bfloat16)
    outputs = {"out": torch.empty_like(q), "lse": torch.empty(4, 10)}
    outputs[name] = torch.empty(shape, dtype=outputs[name].dtype)
    with pytest.raises(ValueError, match=f"{name}: must be a contiguous"):
        torch.ops.tirx_kernels.flashattention_varlen_fwd(
            outputs["out"], outputs["lse"], q, q, q, 6, cu, cu, 0.1, False
        )
    assert not launched


def test_tensors_at_any_legal_offset_launch_and_others_are_named(launched):
    """q at 16 bytes past a 64-byte boundary and cu_seqlens at an element offset (slices of
    larger tensors) launch as they are; q off 16 bytes is the op's ValueError naming it,
    not a refusal from the kernel's host function."""
    q, kv = torch.zeros(2, 33, 4, 128, dtype=torch.bfloat16), torch.zeros(2, 20, 2, 128)
    kv = kv.to(torch.bfloat16)
    flash_attn_func(testing.offset_copy(q, 16), kv, kv)
    cu_q = testing.offset_copy(torch.tensor([0, 4, 10], dtype=torch.int32), 4)
    cu_k = torch.tensor([0, 5, 12], dtype=torch.int32)
    packed = torch.zeros(12, 1, 128, dtype=torch.bfloat16)
    flash_attn_varlen_func(q.view(-1, 4, 128)[:10], packed, packed, cu_q, cu_k, 6, 7)
    assert len(launched) == 2
    with pytest.raises(ValueError, match=r"q: must be 16-byte aligned.*pass q\.clone\(\)"):
        flash_attn_func(testing.misaligned_like(q).zero_(), kv, kv)


@pytest.mark.parametrize("causal", [False, True])  # causal: the walk's tile counter too
def test_the_direct_launcher_takes_the_callers_tensors_unviewed(causal, monkeypatch):
    """Dry (CPU tensors): bound ``as_called`` with q, k, v, out and lse as the op holds them,
    the launcher accepts them and passes the kernel exactly the words the 2D views
    (``_tensor_args``) give, and refuses the views."""
    from tirx_kernels.core import direct_launch, launch_spec

    monkeypatch.setattr(launch_spec, "TMA", True)
    q = torch.zeros(2, 131, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(2, 77, 2, 64, dtype=torch.bfloat16)
    out, lse = torch.zeros_like(q), torch.zeros(2, 4, 131)
    kernel, schedule = attention._kernel(False, q, k, causal)
    counted = attention.needs_counter(schedule, causal, False)
    assert counted == causal  # d 64 walks persistently; a causal walk counts its tiles
    columns = attention._columns(q, k, k)
    viewed = (*attention._tensor_args(columns, counted, q, k, k, out, lse), 2, 131, 77, 0.5)
    unviewed = (*attention._unviewed_args(counted, q, k, k, out, lse), 2, 131, 77, 0.5)
    launch = direct_launch.bound(kernel, *viewed, as_called=unviewed, dry=True)
    plain = direct_launch.bound(kernel, *viewed, dry=True)
    words, plain_words = list(launch(*unviewed)), list(plain(*viewed))
    if counted:  # each call's counter is a fresh tensor: its own address
        pointers = {unviewed[5].data_ptr(): viewed[5].data_ptr()}
        words = [pointers.get(w, w) for w in words]
    assert words == plain_words
    with pytest.raises(ValueError):
        launch(*viewed)
