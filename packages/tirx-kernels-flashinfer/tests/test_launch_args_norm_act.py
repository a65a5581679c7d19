# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The norm and activation ops' kernel arguments against the kernels' parameters, on the CPU:
each op runs on CPU tensors (taken as on cuda:0) and hands its launch arguments, through
whichever plan its shape gets (direct, strided copies, 3D rows), to stand-ins for the
compiled kernels, which compare them with the kernels' (uncompiled) parameters."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.flashinfer import _host, activation, norm
from tirx_kernels.flashinfer._activation_tirx import get_act_and_mul_kernel
from tirx_kernels.flashinfer._norm_tirx import make

BF, F32 = torch.bfloat16, torch.float32


@pytest.fixture
def launched(monkeypatch):
    funcs: list = []

    def norm_kernel(kind, dtype, hidden, weight_bias, sched):
        return make(kind, dtype, hidden, weight_bias, **dict(sched))

    def act_kernel(act, dtype, d, schedule):
        return get_act_and_mul_kernel(act, dtype, d, schedule=schedule)

    monkeypatch.setattr(norm, "_compiled", testing.checked_launches(norm_kernel, funcs))
    monkeypatch.setattr(norm, "_host_kernel", norm.launcher)  # uncached: no stand-in outlives us
    monkeypatch.setattr(activation, "_compiled", testing.checked_launches(act_kernel, funcs))
    for module in (norm, activation):
        monkeypatch.setattr(module, "_PLANS", {})
        monkeypatch.setattr(module, "_FAST", {})
    monkeypatch.setattr(_host, "main_of", lambda executable: executable)
    monkeypatch.setattr(_host, "cuda_index", lambda where, named: 0)
    monkeypatch.setattr(toolchain, "sm_count", lambda device=0: 132)
    return funcs


# (shape of input, what the plan does with it)
SHAPES = [
    ((1, 4096), "one row"),
    ((4113, 4096), "many rows"),
    ((7, 111), "a hidden size that is not a multiple of 8"),
    ((3, 8, 128), "3D QK-norm rows"),
]


@pytest.mark.parametrize("shape", [s for s, _ in SHAPES], ids=[why for _, why in SHAPES])
def test_norm_launches_match_the_kernels(launched, shape):
    hidden = shape[-1]
    x, w = torch.zeros(shape, dtype=BF), torch.ones(hidden, dtype=BF)
    norm.rmsnorm(x, w)
    norm.gemma_rmsnorm(x, w)
    if len(shape) == 2:
        norm.fused_add_rmsnorm(x, torch.zeros_like(x), w)
        norm.layernorm(x, torch.ones(hidden, dtype=F32), torch.zeros(hidden, dtype=F32))
    assert len(launched) == (2 if len(shape) == 3 else 4)


def test_strided_rows_launch_on_contiguous_copies(launched):
    wide = torch.zeros(5, 2 * 4096, dtype=BF)
    x, w = wide[:, :4096], torch.ones(4096, dtype=BF)  # rows with a stride
    norm.rmsnorm(x, w)
    norm.fused_add_rmsnorm(x, torch.zeros(5, 4096, dtype=BF), w)
    assert len(launched) == 2


@pytest.mark.parametrize("tokens, d", [(1, 14336), (4113, 4096), (3, 500)])
@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
def test_activation_launches_match_the_kernels(launched, op, tokens, d):
    getattr(activation, op)(torch.zeros(tokens, 2 * d, dtype=BF))
    assert len(launched) == 1


@pytest.mark.parametrize("offset", [16, 32, 48])
def test_tensors_16_bytes_aligned_launch_as_they_are(launched, offset):
    """FlashInfer takes any contiguous 16-byte aligned tensor (a slice of a larger one); the
    kernels take them without copies, so their parameters declare that alignment, not TIRx's
    default of 64 bytes."""
    x = testing.offset_copy(torch.zeros(3, 4096, dtype=BF), offset)
    w = testing.offset_copy(torch.ones(4096, dtype=BF), offset)
    out = testing.offset_copy(torch.zeros(3, 4096, dtype=BF), offset)
    norm.rmsnorm(x, w, out=out)
    norm.fused_add_rmsnorm(x, out, w)
    gb = testing.offset_copy(torch.ones(4096, dtype=F32), offset)
    norm.layernorm(x, gb, gb)
    for d in (4096, 500):  # 16- and 8-byte vectors
        pair = testing.offset_copy(torch.zeros(3, 2 * d, dtype=BF), offset)
        activation.silu_and_mul(pair, out=testing.offset_copy(torch.zeros(3, d, dtype=BF), offset))
    assert len(launched) == 5
