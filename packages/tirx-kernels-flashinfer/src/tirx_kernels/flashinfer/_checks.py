# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Output checks shared by the family's run_test functions."""

from __future__ import annotations

import torch


def assert_within(got, want, atol, rtol, what) -> float:
    """Max abs error of ``got`` vs ``want``; AssertionError naming the first element outside
    ``atol + rtol * |want|`` and how many are."""
    got, want = got.float(), want.float()
    err = (got - want).abs()
    bad = err > atol + rtol * want.abs()
    if bool(bad.any()):
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} mismatched; max abs err "
            f"{float(err.max()):.4g}; first at {idx}: got {float(got[idx]):.6g}, "
            f"want {float(want[idx]):.6g} (atol={atol}, rtol={rtol})"
        )
    return float(err.max()) if err.numel() else 0.0
