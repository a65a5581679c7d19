# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Persistent tile scheduling with grouped rasterization (pure Python model).

A persistent kernel launches ``grid = min(num_sms, tiles)`` CTAs; CTA ``c`` works on linear
tiles ``c, c + grid, c + 2 * grid, ...``. Linear tile ``t`` maps to an output tile (m, n) in
"grouped" order: the M tiles are cut into groups of ``group_m`` rows; a group is walked
column by column (down its rows first), groups one after another. CTAs in flight at one
time then share ``group_m`` A row-panels and a few B column-panels in L2, instead of one
A panel and every B panel (plain row-major order). The last group may be shorter.

:mod:`.dsl` emits the same arithmetic in TIR (``grouped_tile``); the tests check both.
"""

from __future__ import annotations


def num_tiles(m: int, n: int, bm: int, bn: int) -> tuple[int, int]:
    return -(-m // bm), -(-n // bn)


def grouped_tile(t: int, num_m: int, num_n: int, group_m: int) -> tuple[int, int]:
    """(m tile, n tile) of linear tile ``t`` in grouped order (0 <= t < num_m * num_n)."""
    span = group_m * num_n
    first_m = (t // span) * group_m
    rows = min(num_m - first_m, group_m)
    within = t % span
    return first_m + within % rows, within // rows


def cta_tiles(cta: int, grid: int, total: int) -> list[int]:
    """Linear tiles that persistent CTA ``cta`` of ``grid`` processes, in order."""
    return list(range(cta, total, grid))


def persistent_grid(total: int, num_sms: int) -> int:
    return max(1, min(total, num_sms))
