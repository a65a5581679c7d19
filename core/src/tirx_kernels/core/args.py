# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Argument checks public ops share; each raises ValueError naming the function, the
argument and the fix, reading only tensor attributes (they run on every eager call)."""

from __future__ import annotations

import torch


def check_memory(
    fn: str, name: str, t: torch.Tensor, device: int, *, contiguous: bool = True
) -> None:
    """``t`` is on CUDA device ``device`` (the first tensor argument's ``get_device()``) and,
    with ``contiguous``, contiguous and 16-byte aligned (what TMA and vector loads need)."""
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
    if not contiguous:
        return
    if not t.is_contiguous():
        raise ValueError(f"{fn}: {name} must be contiguous; pass {name}.contiguous()")
    if t.data_ptr() % 16:
        raise ValueError(
            f"{fn}: {name} must be 16-byte aligned (a view at an offset is not); "
            f"pass {name}.clone()"
        )
