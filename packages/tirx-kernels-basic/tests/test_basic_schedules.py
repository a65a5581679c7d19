# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The schedule choices, pinned: a change here changes the generated kernels."""

from __future__ import annotations

import pytest

from tirx_kernels.basic._gemm_schedule import (
    CANDIDATES,
    EFFICIENCY,
    EPI_BYTES,
    TileConfig,
    estimate,
    pick_config,
    pick_stages,
)
from tirx_kernels.basic._rmsnorm_schedule import default_schedule


@pytest.mark.parametrize(
    "hidden, expected",
    [
        (128, (16, 16, 8)),  # short rows share a warp
        (1000, (64, 1, 1)),  # ragged: masked vectors, ptxas chooses the registers
        (2048, (128, 1, 16)),  # 2 vectors a thread, full occupancy
        (4096, (128, 1, 8)),  # 4 vectors a thread, half occupancy
        (8192, (256, 1, 4)),
        (16384, (1024, 1, 2)),
        (32768, (1024, 1, 1)),  # 4 vectors a thread of 1024 threads
    ],
)
def test_rmsnorm_default_schedule(hidden, expected):
    assert default_schedule(hidden) == expected


@pytest.mark.parametrize(
    "M, N, expected",
    [
        (1, 4096, (64, 128)),  # decode: bm=64, the most CTAs pulling B
        (64, 8192, (64, 128)),
        (128, 8192, (128, 64)),  # one wave of 128 tiles
        (256, 8192, (128, 128)),  # one wave of 128 tiles, not two of 128x64 (the 0.77 case)
        (1024, 1024, (128, 64)),
        (2048, 2048, (128, 256)),  # 128 tiles: one wave of the widest tile
        (3000, 5120, (128, 192)),  # 648 tiles = 4.9 waves beats 480 n256 tiles = 3.6 -> 4
        (8192, 8192, (128, 256)),
    ],
)
def test_gemm_config_by_shape(M, N, expected):
    assert pick_config(M, N, 132) == expected


def test_gemm_model_counts_a_partial_wave_as_whole():
    # 256 x 8192 in 128 x 64 tiles: 256 tiles on 132 SMs are 2 waves
    assert estimate(TileConfig(128, 64), 256, 8192, 132) == 2 * 128 * 64 / EFFICIENCY[64]
    assert estimate(TileConfig(128, 64), 256, 8192, 256) == 128 * 64 / EFFICIENCY[64]


def test_gemm_small_m_uses_only_bm64_and_every_candidate_has_an_efficiency():
    assert all(pick_config(m, 8192, 132).bm == 64 for m in (1, 17, 64))
    assert all(c.wgmma_n in EFFICIENCY for c in CANDIDATES)


def test_gemm_ring_depth_fits_shared_memory():
    tma = 4 * EPI_BYTES  # two staging tiles for each of two consumer warpgroups
    assert [pick_stages(128, bn, tma) for bn in (256, 192, 128, 64)] == [4, 4, 6, 8]
    assert [pick_stages(64, bn, tma) for bn in (256, 128)] == [4, 8]
    assert [pick_stages(128, bn, 0) for bn in (256, 128, 64)] == [4, 7, 8]
