# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Schedule choices of the sm90 FP8 1D2D GEMM (upstream: csrc/jit_kernels/heuristics/sm90.hpp).

Upstream picks BLOCK_M in {64, 128, 256}, BLOCK_N in 16..256 and a TMA multicast per shape;
this first port fixes BLOCK_M = BLOCK_N = BLOCK_K = 128 (BLOCK_K = 128 is the scale
granularity, which upstream requires too) and sizes the ring by shared memory, so one
compiled kernel serves every M of an (N, K).
"""

from __future__ import annotations

import functools

BM, BN, BK = 128, 128, 128
GRAN_K = 128  # 1x128 (A) and 128x128 (B) scale blocks
TILE_BYTES = BM * BK  # one e4m3 K-block of A (or B, BN == BM)
SMEM_BUDGET = 227 * 1024 - 2048  # opt-in dynamic smem minus barriers and slack
MAX_STAGES = 6
GROUP_M = 8  # M tiles per raster group (L2 reuse of B)


@functools.cache
def num_sms() -> int:
    """SMs of device 0; 132 (H200) without a GPU, where only codegen runs."""
    import torch

    from tirx_kernels.core import toolchain

    if torch.cuda.is_available():
        return toolchain.sm_count(0)
    return 132


def pick_stages() -> int:
    """The deepest (A, B) K-block ring that fits shared memory (capped)."""
    return min(MAX_STAGES, SMEM_BUDGET // (2 * TILE_BYTES))
