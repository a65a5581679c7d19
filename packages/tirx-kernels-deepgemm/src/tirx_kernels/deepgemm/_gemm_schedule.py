# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Schedule choices of the sm90 FP8 1D2D GEMM (upstream: csrc/jit_kernels/heuristics/sm90.hpp).

Upstream picks BLOCK_M in {64, 128, 256}, BLOCK_N in 16..256 and a TMA multicast per shape;
this port fixes BLOCK_M = BLOCK_K = 128 (BLOCK_K = 128 is the scale granularity, which
upstream requires too), picks BLOCK_N 128 or 64 at run time from M (two compiled kernels per
(N, K) at most, each serving every M) and sizes the ring by shared memory.
"""

from __future__ import annotations

import functools

BM, BK = 128, 128
BNS = (128, 64)  # BLOCK_N choices: a 128-column scale block holds whole tiles of either
A_BYTES = BM * BK  # one e4m3 K-block of A
SMEM_BUDGET = 227 * 1024 - 2048  # opt-in dynamic smem minus barriers and slack
MAX_STAGES = 8
GROUP_M = 8  # M tiles per raster group (L2 reuse of B)


@functools.cache
def num_sms() -> int:
    """SMs of device 0; 132 (H200) without a GPU, where only codegen runs."""
    import torch

    from tirx_kernels.core import toolchain

    if torch.cuda.is_available():
        return toolchain.sm_count(0)
    return 132


def pick_bn(M: int, N: int, num_sms: int) -> int:
    """128 when 128 x 128 tiles give every SM one, else 64 (skinny M: twice the CTAs
    stream B, which bounds these shapes)."""
    return 128 if -(-M // BM) * (N // 128) >= num_sms else 64


def pick_stages(bn: int) -> int:
    """The deepest (A, B) K-block ring that fits shared memory (capped)."""
    return min(MAX_STAGES, SMEM_BUDGET // (A_BYTES + bn * BK))
