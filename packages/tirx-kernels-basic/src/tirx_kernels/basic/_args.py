# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Argument checks the public ops share: dtype, device, contiguity, alignment.

Each raises ValueError naming the function, the argument and the fix. They read only
tensor attributes (no allocation), since they run on every eager call.
"""

from __future__ import annotations

import torch

# the dtypes the kernels take, by their TIRx/config name
DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


def dtype_name(fn: str, name: str, t: torch.Tensor) -> str:
    """The dtype name of ``t`` (bf16 or fp16)."""
    dtype = DTYPE_NAMES.get(t.dtype)
    if dtype is None:
        raise ValueError(
            f"{fn}: {name} must be bfloat16 or float16, got {t.dtype}; "
            f"cast it with {name}.to(torch.bfloat16)"
        )
    return dtype


def check_memory(fn: str, name: str, t: torch.Tensor, device: int) -> None:
    """``t`` is a contiguous, 16-byte aligned tensor on CUDA device ``device`` (the first
    tensor argument's: pass its ``get_device()``, -1 when it is on the CPU)."""
    on = t.get_device()
    if on < 0:
        raise ValueError(
            f"{fn}: {name} must be a CUDA tensor, got {t.device}; move it with {name}.cuda()"
        )
    if on != device:
        raise ValueError(
            f"{fn}: {name} must be on the first argument's device cuda:{device}, "
            f"got {t.device}; move it with {name}.to('cuda:{device}')"
        )
    if not t.is_contiguous():
        raise ValueError(f"{fn}: {name} must be contiguous; pass {name}.contiguous()")
    if t.data_ptr() % 16:
        raise ValueError(
            f"{fn}: {name} must be 16-byte aligned (a view at an offset is not); "
            f"pass {name}.clone()"
        )


def check_tensors(fn: str, **tensors: torch.Tensor) -> None:
    """:func:`check_memory` of each named tensor, on the device of the first one."""
    device = next(iter(tensors.values())).get_device()
    for name, t in tensors.items():
        check_memory(fn, name, t, device)
