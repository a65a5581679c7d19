# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The gemm's kernel arguments against the kernel's parameters, on the CPU, for every layout,
split-K and epilogue: ``launch_gemm`` runs on CPU tensors and hands its arguments to a
stand-in for the compiled kernel, which compares them with the kernel's (uncompiled)
parameters as the launch on the GPU does."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.basic import gemm
from tirx_kernels.basic._gemm_schedule import TileConfig
from tirx_kernels.basic._gemm_tirx import make_gemm
from tirx_kernels.core import host, testing


@pytest.fixture
def launched(monkeypatch):
    funcs: list = []

    def make(N, K, dtype, config, ops="", layout="NT"):
        return make_gemm(N, K, dtype, TileConfig(*config), ops=ops, layout=layout)

    def scratch(device, floats, tiles):
        return torch.empty(floats, dtype=torch.float32), torch.zeros(tiles, dtype=torch.int32)

    monkeypatch.setattr(gemm, "compiled_gemm", testing.checked_launches(make, funcs))
    monkeypatch.setattr(gemm, "split_scratch", scratch)
    monkeypatch.setattr(host, "main_of", lambda executable: executable)
    monkeypatch.setattr(gemm, "_PLANS", {})
    return funcs


def _operand(rows, cols, transposed):
    """A (rows, cols) bf16 operand, stored as given or as the transpose of a contiguous one."""
    if transposed:
        return torch.zeros(cols, rows, dtype=torch.bfloat16).t()
    return torch.zeros(rows, cols, dtype=torch.bfloat16)


@pytest.mark.parametrize("layout", ["NT", "NN", "TN", "TT"])
@pytest.mark.parametrize("config", [TileConfig(128, 128, 1), TileConfig(64, 128, 4)])
@pytest.mark.parametrize("epilogue", ["plain", "scale", "bias"])
def test_launch_matches_the_kernel(launched, layout, config, epilogue):
    M, N, K = 200, 256, 384
    a = _operand(M, K, layout[0] == "T")
    b = _operand(N, K, layout[1] == "N")
    assert gemm.gemm_layout(a, b) == layout
    out = torch.empty(M, N, dtype=torch.bfloat16)
    bias = torch.zeros(N, dtype=torch.bfloat16) if epilogue == "bias" else None
    alpha = 2.0 if epilogue != "plain" else 1.0
    gemm.launch_gemm(a, b, out, config, bias=bias, alpha=alpha)
    assert len(launched) == 1


@pytest.mark.parametrize("offset", [16, 32, 48])
def test_rmsnorm_takes_the_16_byte_aligned_tensors_its_op_accepts(offset):
    """The op accepts any contiguous 16-byte aligned tensor (a slice of a larger one); the
    kernel's parameters must not ask for TIRx's default of 64 bytes."""
    from tirx_kernels.basic._rmsnorm_tirx import make_rmsnorm

    shapes = ((3, 4096), (4096,), (3, 4096))  # input, weight, out
    args = tuple(testing.offset_copy(torch.zeros(s, dtype=torch.bfloat16), offset) for s in shapes)
    assert testing.launch_mismatches(make_rmsnorm(4096, "bfloat16", 1e-6), args) == []


@pytest.fixture
def on_the_cpu(launched, monkeypatch):
    """The op's CUDA-only memory check off, so its checks and plans run on CPU tensors."""
    monkeypatch.setattr(gemm, "check_memory", lambda *args, **kwargs: None)
    return launched


def test_the_op_checks_a_call_signature_once_then_only_launches(on_the_cpu, monkeypatch):
    resolved = []
    resolve = gemm._resolve
    monkeypatch.setattr(gemm, "_resolve", lambda *args: resolved.append(args) or resolve(*args))
    a, b = _operand(40, 64, False), _operand(32, 64, False)
    out = torch.empty(40, 32, dtype=torch.bfloat16)
    for _ in range(3):
        torch.ops.tirx_kernels.basic_gemm(out, a, b)
    assert len(resolved) == 1 and len(on_the_cpu) == 3
    torch.ops.tirx_kernels.basic_gemm(out, a, b, None, 2.0)  # another epilogue
    # another layout of the same shapes: the NT plan's kernel refuses it first (the stand-in
    # records that attempt), then its own plan runs
    torch.ops.tirx_kernels.basic_gemm(out, a, b.t().contiguous().t())
    assert len(resolved) == 3 and len(on_the_cpu) == 6
    with pytest.raises(ValueError, match="out must be"):  # a failed check caches nothing
        torch.ops.tirx_kernels.basic_gemm(torch.empty(40, 31, dtype=torch.bfloat16), a, b)
    assert len(resolved) == 4


def test_empty_and_k0_calls_launch_nothing(on_the_cpu):
    a, b = _operand(0, 64, False), _operand(32, 64, False)
    assert gemm.gemm(a, b).shape == (0, 32)
    a, b, bias = _operand(4, 0, False), _operand(32, 0, False), torch.ones(32, dtype=torch.bfloat16)
    out = torch.full((4, 32), 3.0, dtype=torch.bfloat16)
    gemm.gemm(a, b, out, bias=bias, beta=2.0)
    assert torch.equal(out, torch.full((4, 32), 7.0, dtype=torch.bfloat16))
    assert on_the_cpu == []


def test_eager_calls_on_plain_cuda_tensors_skip_the_dispatcher(on_the_cpu, monkeypatch):
    """What ``gemm`` does for plain CUDA tensors, on CPU ones taken as CUDA: the plan, no op;
    anything else (here a FakeTensor-like subclass) goes through the op."""
    monkeypatch.setattr(host, "plain_cuda", lambda t: type(t) is torch.Tensor)
    ops = []
    monkeypatch.setattr(gemm, "_gemm", lambda *args: ops.append(args))
    a, b = _operand(40, 64, False), _operand(32, 64, True)
    gemm.gemm(a, b)
    assert ops == [] and len(on_the_cpu) == 1
    gemm.gemm(a, b, bias=torch.nn.Parameter(torch.zeros(32, dtype=torch.bfloat16)))
    assert len(ops) == 1 and len(on_the_cpu) == 1


@pytest.mark.parametrize("a_t, b_t", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_plans_launch_what_the_kernel_takes(on_the_cpu, monkeypatch, a_t, b_t):
    from tirx_kernels.basic import mm

    monkeypatch.setattr(mm, "_PLANS", {})
    a, b = _operand(40, 64, a_t), _operand(64, 32, b_t)  # (M, K) and (K, N)
    out = torch.empty(40, 32, dtype=torch.bfloat16)
    for _ in range(2):
        torch.ops.tirx_kernels.basic_matmul(out, a, b)
    assert len(on_the_cpu) == 2
    out.fill_(1.0)
    torch.ops.tirx_kernels.basic_matmul(out, _operand(40, 0, a_t), _operand(0, 32, b_t))
    assert len(on_the_cpu) == 2 and not out.any()  # K = 0: zeros, nothing launched


def test_rmsnorm_plans_reuse_the_kernel_checked_launch(monkeypatch):
    """The op on CPU tensors (memory checks off) against a stand-in that refuses what the
    kernel's host function refuses: one resolution for repeated calls of a shape; a strided
    input of that shape or a bad weight gets the op's own ValueError."""
    from tirx_kernels.basic import norm
    from tirx_kernels.basic._rmsnorm_tirx import make_rmsnorm

    launched, resolved = [], []
    monkeypatch.setattr(norm, "compiled_rmsnorm", testing.checked_launches(make_rmsnorm, launched))
    monkeypatch.setattr(host, "main_of", lambda executable: executable)
    monkeypatch.setattr(norm, "check_memory", _contiguous_only)
    monkeypatch.setattr(norm, "_PLANS", {})
    monkeypatch.setattr(norm, "_FAST", {})
    resolve = norm._resolve
    monkeypatch.setattr(norm, "_resolve", lambda *args: resolved.append(args) or resolve(*args))
    x, w = torch.zeros(3, 4096, dtype=torch.bfloat16), torch.ones(4096, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    for _ in range(3):
        torch.ops.tirx_kernels.basic_rmsnorm(out, x, w, 1e-6)
    assert len(resolved) == 1 and len(launched) == 3
    strided = torch.zeros(3, 8192, dtype=torch.bfloat16)[:, :4096]
    with pytest.raises(ValueError, match="rmsnorm: input must be contiguous"):
        torch.ops.tirx_kernels.basic_rmsnorm(out, strided, w, 1e-6)
    with pytest.raises(ValueError, match="rmsnorm: weight must have input's dtype"):
        torch.ops.tirx_kernels.basic_rmsnorm(out, x, w.half(), 1e-6)
    torch.ops.tirx_kernels.basic_rmsnorm(out, x, w, 1e-5)  # eps is compiled in: a new plan
    assert len(resolved) == 4


def _contiguous_only(fn, name, t, device, *, contiguous=True):
    """check_memory without its CUDA check (CPU tensors)."""
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{fn}: {name} must be contiguous; pass {name}.contiguous()")


def test_a_repeated_plain_gemm_builds_no_signature_key(on_the_cpu, monkeypatch):
    """a @ b.T in the NT layout without an epilogue hands the kernel the caller's tensors, so
    a repeated call finds its plan by shapes, dtype and device alone (the kernel checks the
    rest); an epilogue call keeps its per-signature key."""
    keys = []
    monkeypatch.setattr(gemm, "_sig", lambda t: keys.append(t.shape) or host.signature(t))
    monkeypatch.setattr(gemm, "_FAST", {})
    a, b = _operand(16, 64, False), _operand(32, 64, False)
    out = torch.empty(16, 32, dtype=torch.bfloat16)
    for _ in range(3):
        torch.ops.tirx_kernels.basic_gemm(out, a, b)
    assert len(keys) == 3 and len(on_the_cpu) == 3
    for _ in range(2):
        torch.ops.tirx_kernels.basic_gemm(out, a, b, None, 2.0)
    assert len(keys) == 9 and len(on_the_cpu) == 5
