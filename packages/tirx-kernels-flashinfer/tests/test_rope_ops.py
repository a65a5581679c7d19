# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The RoPE public ops: registration, argument checks and fakes on the CPU; on a GPU, results
against the torch fp32 reference, under CUDA-graph capture and under torch.compile."""

import re

import pytest
import torch

from tirx_kernels.core.ops import is_registered
from tirx_kernels.flashinfer import rope
from tirx_kernels.flashinfer.kernels import rope as contract

OPS = ("flashinfer_apply_rope_pos_ids_inplace", "flashinfer_apply_rope_pos_ids")


def qkp(nnz=5, hq=4, hk=2, d=64, dtype=torch.bfloat16, pos_dtype=torch.int32, device="cpu"):
    q = torch.randn(nnz, hq, d, device=device).to(dtype)
    k = torch.randn(nnz, hk, d, device=device).to(dtype)
    return q, k, torch.arange(nnz, dtype=pos_dtype, device=device)


def test_the_ops_are_registered_and_named_by_the_kernel_module():
    assert contract.PUBLIC_OPS == OPS
    assert all(is_registered(name) for name in OPS)


def test_the_ops_declare_what_they_write():
    ops = torch.ops.tirx_kernels
    inplace = ops.flashinfer_apply_rope_pos_ids_inplace.default._schema
    assert [a.name for a in inplace.arguments if a.alias_info and a.alias_info.is_write] == [
        "q",
        "k",
    ]
    out = ops.flashinfer_apply_rope_pos_ids.default._schema
    assert [a.name for a in out.arguments if a.alias_info and a.alias_info.is_write] == [
        "q_rope",
        "k_rope",
    ]


def test_the_wrappers_keep_flashinfers_signature():
    import inspect

    for fn in (rope.apply_rope_pos_ids, rope.apply_rope_pos_ids_inplace):
        params = inspect.signature(fn).parameters
        assert list(params) == [
            "q",
            "k",
            "pos_ids",
            "rotary_dim",
            "interleave",
            "rope_scale",
            "rope_theta",
        ]
        defaults = [params[n].default for n in ("rotary_dim", "interleave", "rope_scale")]
        assert defaults == [None, False, 1] and params["rope_theta"].default == 1e4


def _bad(change):
    """(q, k, pos_ids, keywords) of a valid CPU call with one thing changed."""
    q, k, pos = qkp()
    args = {"q": q, "k": k, "pos_ids": pos}
    kwargs = {}
    change(args, kwargs)
    return args["q"], args["k"], args["pos_ids"], kwargs


BAD = {
    "q must be \\(nnz, num_q_heads, head_dim\\)": lambda a, kw: a.update(q=a["q"][0]),
    "k must be \\(nnz, num_kv_heads, head_dim\\)": lambda a, kw: a.update(k=a["k"][:3]),
    "pos_ids must be \\(5,\\)": lambda a, kw: a.update(pos_ids=a["pos_ids"][:4]),
    "q and k need at least one head": lambda a, kw: a.update(k=a["k"][:, :0]),
    "q must be bfloat16 or float16": lambda a, kw: a.update(q=a["q"].float(), k=a["k"].float()),
    "k must have q's dtype": lambda a, kw: a.update(k=a["k"].half()),
    "pos_ids must be int32 or int64": lambda a, kw: a.update(pos_ids=a["pos_ids"].float()),
    "head_dim \\(q.shape\\[-1\\]\\) must be one of": lambda a, kw: a.update(
        q=a["q"][..., :32].contiguous(), k=a["k"][..., :32].contiguous()
    ),
    "rotary_dim must be a multiple of 16 in \\[16, head_dim=64\\], got 24": lambda a, kw: kw.update(
        rotary_dim=24
    ),
    "rotary_dim must be a multiple of 16 in \\[16, head_dim=64\\], got 80": lambda a, kw: kw.update(
        rotary_dim=80
    ),
    "rope_scale must be finite and nonzero": lambda a, kw: kw.update(rope_scale=0.0),
    "rope_theta must be finite and nonzero": lambda a, kw: kw.update(rope_theta=float("inf")),
    "q's last dimension must be contiguous": lambda a, kw: a.update(
        q=a["q"].transpose(1, 2).contiguous().transpose(1, 2)
    ),
    "pos_ids must be contiguous": lambda a, kw: a.update(
        pos_ids=torch.arange(10, dtype=torch.int32)[::2]
    ),
    "q must be a CUDA tensor": lambda a, kw: None,
}


@pytest.mark.parametrize("wrapper", ["apply_rope_pos_ids", "apply_rope_pos_ids_inplace"])
@pytest.mark.parametrize("message", list(BAD))
def test_bad_arguments_raise_value_errors_naming_them(wrapper, message):
    q, k, pos, kwargs = _bad(BAD[message])
    with pytest.raises(ValueError, match=f"^{wrapper}: {message}"):
        getattr(rope, wrapper)(q, k, pos, **kwargs)


def test_out_of_place_outputs_must_match_q_and_k():
    q, k, pos = qkp()
    op = torch.ops.tirx_kernels.flashinfer_apply_rope_pos_ids
    with pytest.raises(ValueError, match="k_rope must match k"):
        op(q, k, torch.empty_like(q), torch.empty_like(q), pos, 64, False, 1.0, 1e4)
    with pytest.raises(ValueError, match="q_rope's last dimension must be contiguous"):
        q_rope = torch.empty(5, 64, 4, dtype=q.dtype).transpose(1, 2)
        op(q, k, q_rope, torch.empty_like(k), pos, 64, False, 1.0, 1e4)


def test_the_fakes_run_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k, pos = qkp(nnz=7, hq=8, hk=1, d=128, dtype=torch.float16, pos_dtype=torch.int64)
        q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, interleave=True)
        rope.apply_rope_pos_ids_inplace(q, k, pos, rope_scale=2.0, rope_theta=1e6)
    assert q_rope.shape == (7, 8, 128) and k_rope.shape == (7, 1, 128)
    assert q_rope.dtype == k_rope.dtype == torch.float16


def test_fullgraph_tracing_sees_the_ops_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def model(q, k, pos):
        q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos)
        rope.apply_rope_pos_ids_inplace(q_rope, k_rope, pos)
        return q_rope, k_rope

    with FakeTensorMode():
        graph = make_fx(model)(*qkp())
    called = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert {f"tirx_kernels.{name}.default" for name in OPS} <= called


@pytest.fixture
def launched(monkeypatch):
    """The kernels the ops launch on CPU tensors: a stand-in checks each launch's arguments
    against the kernel's parameters (plans made here are dropped with the test)."""
    from tirx_kernels.core import testing, toolchain
    from tirx_kernels.flashinfer import _host
    from tirx_kernels.flashinfer._rope_tirx import get_grid_kernel, get_walk_kernel

    funcs: list = []

    def make(dtype, d, hq, hk, interleave, pos_dtype, walk, rotary_dim, outs=False, strided=False):
        build = get_walk_kernel if walk else get_grid_kernel
        options = dict(rotary_dim=rotary_dim, out_of_place=outs, strided=strided)
        return build(dtype, d, hq, hk, interleave, pos_dtype, **options)

    monkeypatch.setattr(rope, "_compiled", testing.checked_launches(make, funcs))
    monkeypatch.setattr(rope, "_PLANS", {})
    monkeypatch.setattr(rope, "_FAST", {})
    monkeypatch.setattr(_host, "main_of", lambda executable: executable)
    monkeypatch.setattr(_host, "cuda_index", lambda where, named: 0)
    monkeypatch.setattr(toolchain, "sm_count", lambda device: 132)
    return funcs


def _symbols(funcs):
    return [str(f.attrs["global_symbol"]) for f in funcs]


# (nnz, hq, hk, d, rotary_dim): grid and walk kernels, whole and partial rotation
LAUNCH_SHAPES = [(3, 32, 8, 128, 128), (1031, 16, 16, 256, 256), (7, 4, 2, 128, 64)]
LAUNCH_SHAPES += [(600, 32, 8, 128, 96), (2048, 8, 8, 256, 16)]


@pytest.mark.parametrize("nnz, hq, hk, d, rotary_dim", LAUNCH_SHAPES)
def test_out_of_place_is_one_kernel_reading_q_and_k(launched, nnz, hq, hk, d, rotary_dim):
    q, k, pos = qkp(nnz, hq, hk, d)
    rope.apply_rope_pos_ids(q, k, pos, rotary_dim=rotary_dim)
    rope.apply_rope_pos_ids_inplace(q, k, pos, rotary_dim=rotary_dim)
    walk = "_walk" if nnz >= 1000 else ""
    assert _symbols(launched) == [f"rope{walk}_out_of_place", f"rope{walk}"]


@pytest.mark.parametrize("nnz", [5, 700])  # the grid and the walk kernel
def test_head_slices_of_a_fused_qkv(launched, nnz):
    """In place they are rotated where they lie (token-strided kernels); out of place through
    the copying plan (copies of q and k rotated in place)."""
    qkv, _, pos = qkp(nnz, 8, 1, 64)
    q, k = qkv[:, :4], qkv[:, 4:6]  # strided rows
    walk = "_walk" if nnz >= 512 else ""
    rope.apply_rope_pos_ids_inplace(q, k, pos)
    assert _symbols(launched) == [f"rope{walk}_strided"]
    q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos)
    assert _symbols(launched)[1:] == [f"rope{walk}"]
    assert torch.equal(q_rope, q) and torch.equal(k_rope, k)  # the stand-in writes nothing


def test_token_strides_the_kernels_cannot_take_use_copies(launched):
    qkv, _, pos = qkp(5, 9, 1, 64)
    q, k = qkv[:, :4, :], qkv[:, 4:6, :]
    rope.apply_rope_pos_ids_inplace(q[:, ::2], k, pos)  # heads not contiguous
    odd = torch.zeros(5, 4 * 64 + 4, dtype=q.dtype)[:, :256].view(5, 4, 64)  # stride 260 % 8
    rope.apply_rope_pos_ids_inplace(odd, k, pos)
    assert _symbols(launched) == ["rope", "rope"]


@pytest.mark.parametrize("nnz", [5, 700])  # the grid and the walk kernel
@pytest.mark.parametrize("pos_dtype", [torch.int32, torch.int64])
def test_tensors_at_any_legal_offset_launch_as_they_are(launched, nnz, pos_dtype):
    """Positions are read one at a time (any element offset, as upstream: a slice of a
    longer positions tensor), q and k by 16-byte vectors (16 bytes past a 64-byte boundary,
    as a slice of a larger tensor may be): the kernels take them without copies."""
    from tirx_kernels.core.testing import offset_copy

    q, k, pos = qkp(nnz, 4, 2, 64, pos_dtype=pos_dtype)
    q, k = offset_copy(q, 16), offset_copy(k, 48)
    pos = offset_copy(pos, pos.element_size())
    rope.apply_rope_pos_ids_inplace(q, k, pos)
    rope.apply_rope_pos_ids(q, k, pos)
    walk = "_walk" if nnz >= 512 else ""
    assert _symbols(launched) == [f"rope{walk}", f"rope{walk}_out_of_place"]


@pytest.mark.parametrize("walk", [False, True])
@pytest.mark.parametrize("d, rotary_dim", [(128, 128), (128, 64), (256, 16)])
def test_out_of_place_kernels_compile_for_sm90a(walk, d, rotary_dim):
    from tirx_kernels.core import toolchain
    from tirx_kernels.flashinfer._rope_tirx import get_grid_kernel, get_walk_kernel

    build = get_walk_kernel if walk else get_grid_kernel
    kernel = build("bfloat16", d, 8, 2, False, "int64", rotary_dim=rotary_dim, out_of_place=True)
    src = toolchain.cuda_source(toolchain.compile(kernel))
    # the pass-through columns (q read straight into q_rope) are copied only where some exist
    copies = re.search(r"\(QO_ptr \+ [^;]*\) = \*\(uint4\*\)\(Q_ptr \+ ", src)
    assert bool(copies) == (rotary_dim < d)
    assert toolchain.compile_cubin(kernel)


@pytest.mark.parametrize("walk", [False, True])
@pytest.mark.parametrize("d, rotary_dim", [(128, 128), (64, 32)])
def test_token_strided_kernels_compile_for_sm90a(walk, d, rotary_dim):
    """The strides bind from the tensors (heads contiguous) and index 16-byte vectors."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.flashinfer._rope_tirx import get_grid_kernel, get_walk_kernel

    build = get_walk_kernel if walk else get_grid_kernel
    kernel = build("float16", d, 8, 2, True, "int32", rotary_dim=rotary_dim, strided=True)
    src = toolchain.cuda_source(toolchain.compile(kernel))
    assert "(sq >> 3)) * 8)" in src and "(sk >> 3)) * 8)" in src
    assert toolchain.compile_cubin(kernel)
    with pytest.raises(ValueError, match="token-strided kernels rotate in place"):
        build("float16", d, 8, 2, True, "int32", strided=True, out_of_place=True)


# ---- GPU (the hopper fixture of conftest.py skips without an sm_90a GPU)


# (nnz, hq, hk, d, dtype, pos dtype, interleave): grid kernel, walk kernel, fp16 + int64
SHAPES = [
    (3, 32, 8, 128, torch.bfloat16, torch.int32, False),
    (1031, 16, 16, 256, torch.bfloat16, torch.int32, True),
    (777, 16, 4, 64, torch.float16, torch.int64, True),
]


def _data(nnz, hq, hk, d, dtype, pos_dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed + nnz)
    q = torch.randn(nnz, hq, d, generator=g, device="cuda").to(dtype)
    k = torch.randn(nnz, hk, d, generator=g, device="cuda").to(dtype)
    pos = torch.randint(0, 4096, (nnz,), generator=g, device="cuda", dtype=pos_dtype)
    return q, k, pos


def _check_against_reference(q0, k0, pos, q_rope, k_rope, interleave):
    from tirx_kernels.core.testing import assert_close

    ulp = 2**-7 if q0.dtype == torch.bfloat16 else 2**-10
    for name, got, x in (("q", q_rope, q0), ("k", k_rope, k0)):
        want = contract.reference(x, pos, interleave)
        assert_close(f"{name} vs torch fp32", got, want, atol=1.5e-2, rtol=ulp)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_ops_match_the_fp32_reference(hopper, shape):
    *dims, il = shape
    q, k, pos = _data(*dims)
    q0, k0 = q.clone(), k.clone()
    q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, interleave=il)
    assert torch.equal(q, q0) and torch.equal(k, k0)  # out of place leaves q and k alone
    _check_against_reference(q0, k0, pos, q_rope, k_rope, il)
    rope.apply_rope_pos_ids_inplace(q, k, pos, interleave=il)
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_the_ops_replay_in_a_cuda_graph(hopper, shape):
    *dims, il = shape
    q, k, pos = _data(*dims)
    rope.apply_rope_pos_ids(q, k, pos, interleave=il)  # compile outside the capture
    rope.apply_rope_pos_ids_inplace(q.clone(), k.clone(), pos, interleave=il)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, interleave=il)
        rope.apply_rope_pos_ids_inplace(q, k, pos, interleave=il)
    for seed in (1, 2):  # new inputs in the captured buffers
        qn, kn, pn = _data(*dims, seed=seed)
        q.copy_(qn), k.copy_(kn), pos.copy_(pn)
        graph.replay()
        torch.cuda.synchronize()
        _check_against_reference(qn, kn, pn, q_rope, k_rope, il)
        assert torch.equal(q, q_rope) and torch.equal(k, k_rope)


def test_the_ops_compile_fullgraph(hopper, backend):
    def model(q, k, pos):
        q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, interleave=True)
        rope.apply_rope_pos_ids_inplace(q, k, pos, interleave=True)
        return q_rope * 1, k_rope, q + 0

    compiled = torch.compile(model, fullgraph=True, backend=backend)
    q, k, pos = _data(1031, 16, 16, 256, torch.bfloat16, torch.int32)
    want = model(q.clone(), k.clone(), pos)
    qc, kc = q.clone(), k.clone()
    got = compiled(qc, kc, pos)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    assert torch.equal(kc, want[1])  # the in-place op's write reached the caller's k


@pytest.mark.parametrize(
    "nnz, hq, hk, d, rotary_dim, il",
    [
        (33, 8, 2, 512, 512, False),  # head_dim 512, the grid kernel
        (1024, 16, 4, 512, 512, True),  # head_dim 512, the walk kernel
        (7, 32, 8, 128, 64, False),  # partial rotary
        (600, 32, 8, 128, 96, True),  # partial, 6 threads a head: the grid kernel only
        (2048, 8, 8, 256, 16, False),  # one thread a head, the walk kernel
    ],
)
def test_head_dim_512_and_partial_rotary_match_the_reference(
    hopper, nnz, hq, hk, d, rotary_dim, il
):
    q, k, pos = _data(nnz, hq, hk, d, torch.bfloat16, torch.int64)
    q0, k0 = q.clone(), k.clone()
    q_rope, k_rope = rope.apply_rope_pos_ids(q, k, pos, rotary_dim=rotary_dim, interleave=il)
    for got, x in ((q_rope, q0), (k_rope, k0)):
        want = contract.reference(x, pos, il, rotary_dim=rotary_dim)
        torch.testing.assert_close(got.float(), want, atol=1.5e-2, rtol=2**-7)
        assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])  # passed through
    rope.apply_rope_pos_ids_inplace(q, k, pos, rotary_dim=rotary_dim, interleave=il)
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)


@pytest.mark.parametrize("nnz", [19, 700])  # the grid and the walk kernel, token-strided
def test_head_slices_of_a_fused_qkv_rotate_in_place(hopper, nnz):
    hq, hk, d = 8, 2, 128
    qkv = _data(nnz, hq + 2 * hk, 1, d, torch.bfloat16, torch.int32)[0]
    pos = torch.arange(nnz, device="cuda", dtype=torch.int32) * 37
    q, k = qkv[:, :hq], qkv[:, hq : hq + hk]  # strided: rows of (hq + 2 hk) heads
    v_before = qkv[:, hq + hk :].clone()
    want_q, want_k = rope.apply_rope_pos_ids(q.contiguous(), k.contiguous(), pos)
    assert torch.equal(rope.apply_rope_pos_ids(q, k, pos)[0], want_q)
    rope.apply_rope_pos_ids_inplace(q, k, pos)
    assert torch.equal(q, want_q) and torch.equal(k, want_k)
    assert torch.equal(qkv[:, hq + hk :], v_before)  # v untouched
