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
from tirx_kernels.core import testing


@pytest.fixture
def launched(monkeypatch):
    funcs: list = []

    def make(N, K, dtype, config, ops="", layout="NT"):
        return make_gemm(N, K, dtype, TileConfig(*config), ops=ops, layout=layout)

    def scratch(device, floats, tiles):
        return torch.empty(floats, dtype=torch.float32), torch.zeros(tiles, dtype=torch.int32)

    monkeypatch.setattr(gemm, "compiled_gemm", testing.checked_launches(make, funcs))
    monkeypatch.setattr(gemm, "split_scratch", scratch)
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
