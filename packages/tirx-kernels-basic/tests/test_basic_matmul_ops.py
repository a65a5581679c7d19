# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op ``torch.ops.tirx_kernels.basic_matmul`` and ``tirx_kernels.basic.matmul``
(``a @ b`` with torch.matmul semantics for 2-D operands).

CPU: the package export, registration, argument checks naming the argument, the fake,
Dynamo tracing, and which kernel layout each of the four contiguous/transposed operand
combinations reaches, without a copy. GPU (sm_90a; skipped elsewhere): against
``torch.matmul`` in every layout, empty shapes, a CUDA graph, ``torch.compile``, opcheck.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tirx_kernels.basic
from tirx_kernels.basic import gemm as gemm_module
from tirx_kernels.basic import mm
from tirx_kernels.basic.gemm import gemm_layout
from tirx_kernels.basic.kernels import gemm as gemm_kernel
from tirx_kernels.core import testing
from tirx_kernels.core.ops import is_registered

BF16, FP16 = torch.bfloat16, torch.float16
needs_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90a GPU",
)


def test_matmul_is_exported_by_the_package_and_registered():
    assert tirx_kernels.basic.matmul is mm.matmul
    assert "matmul" in dir(tirx_kernels.basic)
    assert is_registered("basic_matmul")


def _operands(M, K, N, layout, dtype=BF16, device="cpu"):
    """a (M, K), b (K, N) of ``layout`` (A "T": a = x.t(); B "T": b = w.t() of (N, K))."""
    a = torch.zeros(M, K, dtype=dtype, device=device)
    a = a if layout[0] == "N" else torch.zeros(K, M, dtype=dtype, device=device).t()
    b = torch.zeros(K, N, dtype=dtype, device=device)
    b = b if layout[1] == "N" else torch.zeros(N, K, dtype=dtype, device=device).t()
    return a, b


@pytest.mark.parametrize("layout", ["NT", "NN", "TN", "TT"])
def test_each_operand_combination_reaches_its_layout_without_a_copy(layout, monkeypatch):
    """The op hands the launch views of the caller's storage (same data pointers) whose
    strides give ``layout``; memory checks are stubbed (CPU tensors)."""
    calls = []
    monkeypatch.setattr(gemm_module, "check_memory", lambda *args, **kwargs: None)
    monkeypatch.setattr(mm, "_PLANS", {})

    def launcher(a, bt, config, ops):
        return lambda out, a, bt, bias, alpha, beta: calls.append((a, bt))

    monkeypatch.setattr(mm, "gemm_launcher", launcher)
    a, b = _operands(40, 64, 32, layout)
    out = torch.empty(40, 32, dtype=BF16)
    torch.ops.tirx_kernels.basic_matmul(out, a, b)
    ((got_a, got_bt),) = calls
    assert got_a.data_ptr() == a.data_ptr() and got_bt.data_ptr() == b.data_ptr()
    assert gemm_layout(got_a, got_bt) == layout


def _bad(**kw):
    a, b = _operands(kw.pop("M", 16), kw.pop("K", 64), kw.pop("N", 32), kw.pop("layout", "NN"))
    a = kw.pop("a", a)
    b = kw.pop("b", b)
    out = kw.pop("out", torch.empty(a.shape[0], b.shape[-1], dtype=a.dtype))
    return out, a, b


BAD = {
    "a_dtype": (
        lambda: _bad(a=torch.zeros(16, 64)),
        r"matmul: a must be bfloat16 or float16.*a\.to\(",
    ),
    "b_dtype": (
        lambda: _bad(b=torch.zeros(64, 32, dtype=FP16)),
        r"matmul: b must have a's dtype torch\.bfloat16.*b\.to\(a\.dtype\)",
    ),
    "a_dim": (
        lambda: _bad(a=torch.zeros(2, 16, 64, dtype=BF16), out=torch.empty(2, 16, 32)),
        r"matmul: a must be 2-D \(M, K\)",
    ),
    "b_k": (
        lambda: _bad(b=torch.zeros(32, 64, dtype=BF16)),
        r"matmul: b must be 2-D \(K, N\) with a's K = 64 \(matmul computes a @ b\), got shape "
        r"\(32, 64\); for an \(N, K\) weight pass w\.t\(\)",
    ),
    "b_strided": (
        lambda: _bad(b=torch.zeros(64, 64, dtype=BF16)[:, :32]),
        r"matmul: b must be contiguous or the transpose.*strides \(64, 1\); pass b\.contiguous",
    ),
    "a_strided": (
        lambda: _bad(a=torch.zeros(16, 128, dtype=BF16)[:, ::2]),
        r"matmul: a must be contiguous or the transpose.*pass a\.contiguous",
    ),
    "n_ragged": (
        lambda: _bad(N=30),
        r"matmul: N = b\.shape\[1\] must be a multiple of 8, got 30; zero-pad b",
    ),
    "k_ragged": (
        lambda: _bad(K=60, layout="NT"),
        r"matmul: K = a\.shape\[1\] must be a multiple of 8.*got 60",
    ),
    "m_ragged_transposed_a": (
        lambda: _bad(M=12, layout="TN"),
        r"matmul: a is the transpose of a contiguous \(K, M\).*got 12; pass a\.contiguous\(\)",
    ),
    "out_shape": (
        lambda: _bad(out=torch.empty(16, 16, dtype=BF16)),
        r"matmul: out must be \(16, 32\) of a's dtype",
    ),
    "a_cpu": (lambda: _bad(), r"matmul: a must be a CUDA tensor, got cpu"),
}


@pytest.mark.parametrize("make, message", BAD.values(), ids=BAD.keys())
def test_bad_arguments_raise_value_error_naming_them(make, message):
    out, a, b = make()
    with pytest.raises(ValueError, match=message):
        torch.ops.tirx_kernels.basic_matmul(out, a, b)
    with pytest.raises(ValueError, match=message):
        mm.matmul(a, b, out=out)


def test_transposed_operands_need_no_k_alignment():
    """a and b both stored (K, *) ("TN"): past the K rule to the device check."""
    out, a, b = _bad(M=16, K=60, N=32, layout="TN")
    with pytest.raises(ValueError, match="a must be a CUDA tensor"):
        mm.matmul(a, b, out=out)


def test_the_fake_gives_metadata_without_running():
    with FakeTensorMode():
        a, b = _operands(5, 256, 48, "TT", dtype=FP16)
        c = mm.matmul(a, b)
        assert (c.shape, c.dtype) == ((5, 48), FP16)
        assert torch.ops.tirx_kernels.basic_matmul(c, a, b) is None


def test_fullgraph_compile_traces_the_wrapper_into_one_graph_with_the_op():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    model = torch.compile(lambda a, b: mm.matmul(a * 2, b) + 1, fullgraph=True, backend=backend)
    a, b = _operands(16, 64, 32, "NN")
    with pytest.raises(ValueError, match="a must be a CUDA tensor"):  # the op ran on CPU
        model(a, b)
    ops = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    packet = torch.ops.tirx_kernels.basic_matmul
    assert packet in ops or packet.default in ops


# ---- GPU ------------------------------------------------------------------------------


def _data(M, K, N, layout, dtype=BF16, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*((M, K) if layout[0] == "N" else (K, M)), generator=g).to(dtype).cuda()
    b = torch.randn(*((K, N) if layout[1] == "N" else (N, K)), generator=g).to(dtype).cuda()
    return (a if layout[0] == "N" else a.t()), (b if layout[1] == "N" else b.t())


def _check(c, a, b):
    dtype = "bfloat16" if a.dtype == BF16 else "float16"
    tol = gemm_kernel.tolerance(a.shape[1], dtype)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=0.0, atol=tol)


@needs_sm90
@pytest.mark.parametrize("layout", ["NT", "NN", "TN", "TT"])
@pytest.mark.parametrize(
    "M, K, N, dtype", [(1, 4096, 4096, BF16), (200, 264, 520, FP16), (1024, 1024, 1024, BF16)]
)
def test_matches_torch_matmul_in_every_layout(layout, M, K, N, dtype):
    if layout[0] == "T" and M % 8:
        M = 8  # a transposed a needs M % 8 == 0 (TMA strides)
    a, b = _data(M, K, N, layout, dtype, seed=M)
    _check(mm.matmul(a, b), a, b)
    out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
    assert tirx_kernels.basic.matmul(a, b, out=out) is out
    _check(out, a, b)
    tol = gemm_kernel.tolerance(K, "bfloat16" if dtype == BF16 else "float16")
    torch.testing.assert_close(out, torch.matmul(a, b), rtol=0.0, atol=2 * tol)  # vs cuBLAS


@needs_sm90
def test_empty_shapes_and_bad_memory_on_gpu():
    a, b = _data(0, 128, 64, "NN")
    assert mm.matmul(a, b).shape == (0, 64)
    a, b = _data(16, 0, 64, "NN")
    assert torch.equal(mm.matmul(a, b), torch.zeros(16, 64, dtype=BF16, device="cuda"))
    a, b = _data(16, 128, 64, "NN")
    with pytest.raises(ValueError, match="b must be a CUDA tensor"):
        mm.matmul(a, b.cpu())
    flat = torch.empty(128 * 64 + 8, dtype=BF16, device="cuda")
    with pytest.raises(ValueError, match="b must be 16-byte aligned"):
        mm.matmul(a, flat[1 : 1 + 128 * 64].view(128, 64))


@needs_sm90
def test_opcheck():
    a, b = _data(128, 128, 256, "TN")
    out = torch.empty(128, 256, dtype=BF16, device="cuda")
    torch.library.opcheck(torch.ops.tirx_kernels.basic_matmul.default, (out, a, b))


@needs_sm90
def test_cuda_graph_capture_and_replay():
    a, b = _data(256, 256, 512, "NN")
    out = torch.empty(256, 512, dtype=BF16, device="cuda")
    a2, _ = _data(256, 256, 512, "NN", seed=1)
    _check(testing.replayed(lambda: mm.matmul(a, b, out=out), out, (a, a2)), a2, b)


@needs_sm90
def test_torch_compile_fullgraph():
    def model(a, b):
        return mm.matmul(a * 2, b) + 1

    a, b = _data(128, 256, 256, "NN")
    got = torch.compile(model, fullgraph=True)(a, b)
    torch.testing.assert_close(got, model(a, b))
