# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The schedule choices, pinned: a change here changes the generated kernels."""

from __future__ import annotations

import pytest

from tirx_kernels.basic._gemm_schedule import EPI_BYTES, pick_bn, pick_stages
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
        (8192, 8192, 256),
        (1024, 4096, 128),
        (1024, 1024, 64),
        (16, 8192, 64),
        (1, 4096, 64),
    ],
)
def test_gemm_tile_width_gives_every_sm_a_tile(M, N, expected):
    assert pick_bn(M, N, 132) == expected


def test_gemm_ring_depth_fits_shared_memory():
    tma = 4 * EPI_BYTES  # two staging tiles for each of two consumer warpgroups
    assert [pick_stages(bn, tma) for bn in (256, 128, 64)] == [4, 6, 8]
    assert [pick_stages(bn, 0) for bn in (256, 128, 64)] == [4, 7, 8]
