# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Which implementations in a bench result are ours, and the ratio that summarises them."""

from __future__ import annotations

import re
import unittest
from collections.abc import Callable, Mapping

_OURS = re.compile(r"^(tirx|tir)(_\w+)?$")


def is_ours(name: str) -> bool:
    """``tirx`` / ``tirx_<variant>`` (and legacy ``tir`` / ``tir_<variant>``) are ours."""
    return bool(_OURS.match(name))


def split(impls: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    ours = {k: v for k, v in impls.items() if is_ours(k)}
    refs = {k: v for k, v in impls.items() if not is_ours(k)}
    return ours, refs


def ratio(impls: dict[str, float]) -> float | None:
    """Fastest reference time / our fastest time: > 1 means ours is faster."""
    ours, refs = split({k: v for k, v in impls.items() if v and v > 0})
    if not ours or not refs:
        return None
    return min(refs.values()) / min(ours.values())


def guard_references(references: Mapping[str, Callable]) -> tuple[dict[str, Callable], dict]:
    """Wrap reference builders so a missing optional package skips that reference.

    A builder raising ``unittest.SkipTest`` or ``ImportError`` returns None instead (the
    timer leaves such a reference untimed) and its reason lands in the returned ``skipped``
    dict, filled as the builders run. Other failures propagate (BASELINE_ERROR).
    """
    skipped: dict[str, str] = {}

    def guarded(name, builder):
        def build():
            try:
                return builder()
            except (unittest.SkipTest, ImportError) as e:
                skipped[name] = f"{type(e).__name__}: {e}"
                return None

        return build

    return {name: guarded(name, b) for name, b in references.items()}, skipped
