# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op: ``add(a, b, out=None)``, also ``torch.ops.tirx_kernels.hello_add``."""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from ._add_tirx import ELEMENT_BYTES, make_add

DTYPES = {getattr(torch, name): name for name in ELEMENT_BYTES}


@functools.cache
def compiled(dtype: str):
    """One executable per dtype serves every length (n is dynamic)."""
    return toolchain.compile(make_add(dtype))


@public_op("hello_add", mutates_args=("out",))
def _add(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    compiled(DTYPES[a.dtype])(a, b, out)


def add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a + b`` for contiguous 1D CUDA tensors of one dtype (bfloat16, float16, float32)."""
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in DTYPES:
            raise ValueError(
                f"{name}: dtype {t.dtype} is not supported; use one of {', '.join(ELEMENT_BYTES)}"
            )
        if t.dim() != 1 or not t.is_contiguous():
            raise ValueError(f"{name}: must be a contiguous 1D tensor; call .flatten() first")
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError("a and b: must match in shape, dtype and device")
    if out is None:
        out = torch.empty_like(a)
    elif out.shape != a.shape or out.dtype != a.dtype or not out.is_contiguous():
        raise ValueError("out: must be a contiguous tensor of a's shape and dtype")
    torch.ops.tirx_kernels.hello_add(out, a, b)
    return out
