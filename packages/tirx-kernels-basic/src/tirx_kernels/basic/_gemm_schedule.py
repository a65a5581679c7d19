# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The GEMM's schedule: which tile config a shape runs, and the pipeline depth of a config.

A config is a :class:`TileConfig` ``(bm, bn)``: the CTA's output tile is bm x bn. The two
consumer warpgroups split it by rows when ``bm == 128`` (each 64 x bn) and by columns when
``bm == 64`` (each 64 x bn/2, the skinny-M path: half the A rows per tile, so small M wastes
less of the tensor cores and more tiles cover the SMs). BK = 64 is one 128-byte swizzle atom
of 16-bit K. The grid is persistent, one CTA per SM. A kernel is compiled per
(N, K, dtype, config) and serves every M: the config only changes with M through
:func:`pick_config`, whose model is the table below.

Split-K (``split`` = S > 1): each tile's K-blocks are cut into S even ranges computed by S
CTAs; each publishes an fp32 partial tile in a workspace and the last to finish sums them
in split order and stores the tile (``_gemm_tirx``), so shapes with fewer tiles than SMs
still occupy every SM.

Dispatch model (``pick_config``): for every candidate config and split, the estimated time
is ``waves * bm * bn / EFFICIENCY[w] / S * (1 + SPLIT_COST if S > 1)`` where
``waves = ceil(tiles * S / SMs)`` (a partial last wave costs a whole one: wave
quantization) and ``w`` is the wgmma width of one warpgroup; the cheapest wins, ties going
to the earlier candidate and the smaller split.

==================  ======  ============================================================
constant            value   rationale
==================  ======  ============================================================
CANDIDATES order    below   ties prefer bm=128 (A read once per 128 rows) and wide tiles
EFFICIENCY[256]     1.00    m64n256: B read from smem once per 256 columns; the reference
EFFICIENCY[192]     0.97    n192: 3/4 of the n256 reuse, still tensor-core bound
EFFICIENCY[128]     0.90    n128: the A slice is re-read per 128 columns
EFFICIENCY[64]      0.70    n64: shared-memory bandwidth bound (A + B per 64 x 64)
SMALL_M             64      at or below, only bm=64 tiles (one tile row holds every row)
SPLITS              1..4    more splits than 4 cost more in partials than they gain
SPLIT_COST          1.0     a split 2 at 1024^3 ran 1.8x the unsplit n64 tiles (docs/gemm.md)
MIN_SPLIT_KBLOCKS   8       K-blocks per split: fewer cannot fill the 4-8 stage ring
split only if       units   tiles * S <= SMs: split-K is for shapes under one wave
==================  ======  ============================================================

The efficiencies are first estimates, to be refit from the H200 sweep (docs/gemm.md).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

BK = 64
SMEM_BUDGET = 227 * 1024 - 2048  # opt-in dynamic smem minus barriers and slack
EPI_BYTES = 64 * 64 * 2  # one 64 x 64 staging tile of the TMA epilogue
MAX_STAGES = 8  # ring depth cap: deeper only holds more shared memory

EFFICIENCY = {256: 1.00, 192: 0.97, 128: 0.90, 64: 0.70}
SMALL_M = 64
SPLITS = (1, 2, 3, 4)
SPLIT_COST = 1.0
MIN_SPLIT_KBLOCKS = 8


class TileConfig(NamedTuple):
    """The CTA tile: ``bm`` rows (64 or 128) by ``bn`` columns, its K cut into ``split``
    ranges computed by separate CTAs (split-K: fp32 partials reduced in a workspace)."""

    bm: int
    bn: int
    split: int = 1

    @property
    def wgmma_n(self) -> int:
        """Columns of one consumer warpgroup's wgmma (the whole tile width at bm=128)."""
        return self.bn if self.bm == 128 else self.bn // 2


CANDIDATES = (
    TileConfig(128, 256),
    TileConfig(128, 192),
    TileConfig(128, 128),
    TileConfig(64, 256),
    TileConfig(128, 64),
    TileConfig(64, 128),
)


def num_sms() -> int:
    """SMs of device 0 (132, the H200's, without a GPU): :func:`toolchain.num_sms`."""
    from tirx_kernels.core import toolchain

    return toolchain.num_sms()


def estimate(config: TileConfig, M: int, N: int, num_sms: int) -> float:
    """Relative time of ``config`` for an M x N output (the model of the module docstring)."""
    split = config.split
    tiles = -(-M // config.bm) * -(-N // config.bn)
    waves = -(-(tiles * split) // num_sms)
    cost = waves * config.bm * config.bn / EFFICIENCY[config.wgmma_n] / split
    return cost * (1 + SPLIT_COST) if split > 1 else cost


def splits(config: TileConfig, M: int, N: int, K: int, num_sms: int):
    """``config`` at every split the model allows for M x N x K (split 1 always)."""
    tiles = -(-M // config.bm) * -(-N // config.bn)
    ktiles = -(-K // BK)
    for s in SPLITS:
        if s == 1 or (ktiles // s >= MIN_SPLIT_KBLOCKS and tiles * s <= num_sms):
            yield config._replace(split=s)


@functools.lru_cache(maxsize=4096)
def pick_config(M: int, N: int, K: int, num_sms: int) -> TileConfig:
    """The candidate (and split) with the lowest :func:`estimate` (bm=64 only when
    M <= SMALL_M)."""
    cands = [c for c in CANDIDATES if c.bm == 64] if M <= SMALL_M else CANDIDATES
    options = [s for c in cands for s in splits(c, M, N, K, num_sms)]
    return min(options, key=lambda c: estimate(c, M, N, num_sms))


def pick_stages(bm, bn, staging_bytes):
    """The deepest ring of (A, B) K-block stages that fits beside the epilogue staging."""
    return min(MAX_STAGES, (SMEM_BUDGET - staging_bytes) // ((bm + bn) * BK * 2))
