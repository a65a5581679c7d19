# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Argument checks the public ops share: dtype, device, contiguity, alignment
(device and memory checks are core's :func:`~tirx_kernels.core.args.check_memory`).

Each raises ValueError naming the function, the argument and the fix. They read only
tensor attributes (no allocation), since they run on every eager call.
"""

from __future__ import annotations

import torch

from tirx_kernels.core.args import check_memory

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


def matrix_dtype_name(fn: str, a: torch.Tensor, b: torch.Tensor) -> str:
    """The dtype name of the 2-D ``a`` (M, K) of a matrix product whose ``b`` has a's dtype
    (``b``'s shape is the caller's check)."""
    dtype = dtype_name(fn, "a", a)
    if b.dtype != a.dtype:
        raise ValueError(
            f"{fn}: b must have a's dtype {a.dtype}, got {b.dtype}; cast it with b.to(a.dtype)"
        )
    if a.dim() != 2:
        raise ValueError(
            f"{fn}: a must be 2-D (M, K), got shape {tuple(a.shape)}; "
            "flatten it with a.view(-1, a.shape[-1])"
        )
    return dtype


def check_tensors(fn: str, **tensors: torch.Tensor) -> None:
    """:func:`check_memory` of each named tensor, on the device of the first one."""
    device = next(iter(tensors.values())).get_device()
    for name, t in tensors.items():
        check_memory(fn, name, t, device)
