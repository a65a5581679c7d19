# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The GEMM's schedule choices for a shape: the N tile width and the pipeline depth.

The output tile is BM x BN with K-blocks of BK: BM = 128 is two consumer warpgroups of 64
rows, BK = 64 is one 128-byte swizzle atom of 16-bit K. The grid is persistent, one CTA
per SM, so the SM count sizes both the grid and the choice of BN.
"""

from __future__ import annotations

import functools

BM, BK = 128, 64
SMEM_BUDGET = 227 * 1024 - 2048  # opt-in dynamic smem minus barriers and slack
EPI_BYTES = 64 * 64 * 2  # one 64 x 64 staging tile of the TMA epilogue
MAX_STAGES = 8  # ring depth cap: deeper only holds more shared memory


@functools.cache
def num_sms():
    """SMs of device 0; 132 (H200) without a GPU, where only codegen runs."""
    import torch

    from tirx_kernels.core import toolchain

    if torch.cuda.is_available():
        return toolchain.sm_count(0)
    return 132  # H200; only sizes the persistent grid and BN choice, never correctness


def pick_bn(M, N, num_sms):
    """Widest N tile that still gives every SM a tile (skinny M needs narrow tiles)."""
    num_m = -(-M // BM)
    for bn in (256, 128):
        if num_m * -(-N // bn) >= num_sms:
            return bn
    return 64


def pick_stages(bn, staging_bytes):
    """The deepest ring of (A, B) K-block stages that fits beside the epilogue staging."""
    return min(MAX_STAGES, (SMEM_BUDGET - staging_bytes) // ((BM + bn) * BK * 2))
