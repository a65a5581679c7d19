# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Persistent grouped tile scheduler: model coverage and the TIR emitter vs the model."""

import pytest

from tirx_kernels.core.sm90.scheduler import (
    cta_tiles,
    grouped_tile,
    num_tiles,
    persistent_grid,
)

SHAPES = [
    (1, 1, 8),
    (8, 4, 8),
    (9, 5, 8),
    (64, 32, 8),
    (5, 7, 2),
    (3, 16, 4),
    (17, 3, 1),
    (1, 128, 8),
]


@pytest.mark.parametrize("num_m, num_n, group_m", SHAPES)
def test_grouped_covers_every_tile_once(num_m, num_n, group_m):
    total = num_m * num_n
    tiles = [grouped_tile(t, num_m, num_n, group_m) for t in range(total)]
    assert sorted(tiles) == [(m, n) for m in range(num_m) for n in range(num_n)]


def test_grouped_order_is_column_major_within_groups():
    # 4 x 3 tiles, groups of 2 rows: down the group's rows first, then the next column
    order = [grouped_tile(t, 4, 3, 2) for t in range(12)]
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert order[6:] == [(2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2)]


@pytest.mark.parametrize("total, sms", [(1, 132), (131, 132), (512, 132), (2048, 132), (7, 3)])
def test_persistent_ctas_partition_tiles(total, sms):
    grid = persistent_grid(total, sms)
    assert grid == min(total, sms)
    seen = [t for c in range(grid) for t in cta_tiles(c, grid, total)]
    assert sorted(seen) == list(range(total))
    counts = [len(cta_tiles(c, grid, total)) for c in range(grid)]
    assert max(counts) - min(counts) <= 1  # balanced to one tile


def test_num_tiles_rounds_up():
    assert num_tiles(1000, 1000, 128, 256) == (8, 4)
    assert num_tiles(1, 4096, 128, 64) == (1, 64)


@pytest.mark.parametrize("num_m, num_n, group_m", SHAPES)
def test_tir_grouped_tile_matches_model(num_m, num_n, group_m):
    """The TIR emitter, with a symbolic tile index, evaluates to the model for every tile."""
    import tvm_ffi
    from tvm_tirx.ir import IntImm, Var
    from tvm_tirx.sym import Analyzer

    from tirx_kernels.core.sm90 import dsl

    t = Var("t", "int32")
    em, en = dsl.grouped_tile(t, num_m, num_n, group_m)
    ana = Analyzer()
    for tile in range(num_m * num_n):

        def at(e, tile=tile):
            e = tvm_ffi.structural_map(
                e, (Var, lambda v: IntImm("int32", tile) if v.same_as(t) else v), order="post"
            )
            return int(ana.simplify(e))

        assert (at(em), at(en)) == grouped_tile(tile, num_m, num_n, group_m)


def test_num_sms_is_the_devices_or_the_h200s(monkeypatch):
    """Persistent grids compile in device 0's SM count, the H200's 132 without a GPU."""
    import torch

    from tirx_kernels.core import toolchain

    toolchain.num_sms.cache_clear()
    try:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        assert toolchain.num_sms() == toolchain.H200_SMS == 132
        toolchain.num_sms.cache_clear()
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(toolchain, "sm_count", lambda device_index=0: 114)
        assert toolchain.num_sms() == 114
    finally:
        toolchain.num_sms.cache_clear()
