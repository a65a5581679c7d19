# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The schedule choices, pinned: a change here changes the generated kernels."""

from __future__ import annotations

import pytest

from tirx_kernels.basic._gemm_schedule import (
    CANDIDATES,
    EFFICIENCY,
    EPI_BYTES,
    MIN_SPLIT_KBLOCKS,
    SPLIT_COST,
    TileConfig,
    estimate,
    pick_config,
    pick_stages,
    splits,
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
    "M, N, K, expected",
    [
        (1, 4096, 4096, (64, 128, 4)),  # decode: 32 tiles, split 4 -> 128 CTAs stream B
        (16, 8192, 4096, (64, 256, 4)),
        (40, 1024, 512, (64, 128, 1)),  # 8 K-blocks: too few to split
        (128, 8192, 8192, (128, 64, 1)),  # 128 tiles: one wave without splitting
        (256, 8192, 8192, (128, 128, 1)),  # one wave of 128 tiles (was two of 128 x 64)
        (1024, 1024, 1024, (128, 64, 1)),  # one wave of n64 tiles beats split n128 tiles
        (2048, 2048, 2048, (128, 256, 1)),  # 128 tiles: one wave of the widest tile
        (3000, 5120, 5120, (128, 192, 1)),  # 648 tiles = 4.9 waves beats n256's 3.6 -> 4
        (8192, 8192, 8192, (128, 256, 1)),
    ],
)
def test_gemm_config_by_shape(M, N, K, expected):
    assert pick_config(M, N, K, 132) == expected


def test_gemm_model_counts_a_partial_wave_as_whole_and_charges_splits():
    # 256 x 8192 in 128 x 64 tiles: 256 tiles on 132 SMs are 2 waves
    assert estimate(TileConfig(128, 64), 256, 8192, 132) == 2 * 128 * 64 / EFFICIENCY[64]
    assert estimate(TileConfig(128, 64), 256, 8192, 256) == 128 * 64 / EFFICIENCY[64]
    two = estimate(TileConfig(128, 128, 2), 1024, 1024, 132)
    assert two == 128 * 128 / EFFICIENCY[128] / 2 * (1 + SPLIT_COST)


def test_gemm_splits_stay_under_one_wave_with_enough_k_blocks():
    assert [c.split for c in splits(TileConfig(128, 128), 1024, 1024, 1024, 132)] == [1, 2]
    assert [c.split for c in splits(TileConfig(128, 256), 8192, 8192, 8192, 132)] == [1]
    k_blocks = [c.split for c in splits(TileConfig(64, 128), 1, 4096, 64 * MIN_SPLIT_KBLOCKS, 132)]
    assert k_blocks == [1]


def test_gemm_small_m_uses_only_bm64_and_every_candidate_has_an_efficiency():
    assert all(pick_config(m, 8192, 8192, 132).bm == 64 for m in (1, 17, 64))
    assert all(c.wgmma_n in EFFICIENCY for c in CANDIDATES)


def test_gemm_ring_depth_fits_shared_memory():
    tma = 4 * EPI_BYTES  # two staging tiles for each of two consumer warpgroups
    assert [pick_stages(128, bn, tma) for bn in (256, 192, 128, 64)] == [4, 4, 6, 8]
    assert [pick_stages(64, bn, tma) for bn in (256, 128)] == [4, 8]
    assert [pick_stages(128, bn, 0) for bn in (256, 128, 64)] == [4, 7, 8]
