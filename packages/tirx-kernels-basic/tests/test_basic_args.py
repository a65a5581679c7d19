# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The shared argument checks, on stand-ins for CUDA tensors (runs without a GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tirx_kernels.basic._args import check_memory, check_tensors, dtype_name


def cuda_like(device=0, contiguous=True, ptr=4096):
    """What check_memory reads of a tensor, for a tensor on CUDA device ``device``."""
    return SimpleNamespace(
        get_device=lambda: device,
        is_contiguous=lambda: contiguous,
        data_ptr=lambda: ptr,
        device=f"cuda:{device}",
    )


def test_dtype_name():
    assert dtype_name("f", "x", torch.empty(0, dtype=torch.float16)) == "float16"
    with pytest.raises(ValueError, match=r"f: x must be bfloat16 or float16, got torch\.int8"):
        dtype_name("f", "x", torch.empty(0, dtype=torch.int8))


def test_a_good_tensor_passes():
    check_memory("f", "x", cuda_like(1), 1)


@pytest.mark.parametrize(
    "tensor, device, message",
    [
        (
            cuda_like(1),
            0,
            r"f: x must be on the first argument's device cuda:0, got cuda:1; "
            r"move it with x\.to\('cuda:0'\)",
        ),
        (cuda_like(contiguous=False), 0, r"f: x must be contiguous; pass x\.contiguous\(\)"),
        (cuda_like(ptr=4098), 0, r"f: x must be 16-byte aligned .*pass x\.clone\(\)"),
    ],
)
def test_bad_memory_names_the_argument_and_the_fix(tensor, device, message):
    with pytest.raises(ValueError, match=message):
        check_memory("f", "x", tensor, device)


def test_check_tensors_checks_each_on_the_first_ones_device():
    check_tensors("f", a=cuda_like(1), b=cuda_like(1))
    with pytest.raises(ValueError, match=r"f: b must be on the first argument's device cuda:1"):
        check_tensors("f", a=cuda_like(1), b=cuda_like(0))
    with pytest.raises(ValueError, match=r"f: a must be contiguous"):
        check_tensors("f", a=cuda_like(contiguous=False), b=cuda_like())
