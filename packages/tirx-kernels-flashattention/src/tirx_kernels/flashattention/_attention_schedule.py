# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Tile sizes of the forward kernel per head dim (after ``hopper/tile_size.h``).

FlashAttention-3 (``tile_size_fwd_sm90``) picks (kBlockM, kBlockN) per head dim: 192 x 192
(causal 192 x 128) for d 64, 128 x 176 (causal 128 x 128) for d 128, 128 x 128 for d 192 with
dv 128, 128 x 80 for d 256. This kernel uses kBlockM = 128 (two consumer warpgroups of 64
rows) and kBlockN = 128 (64 for d 256), with a K/V ring of ``stages`` slots plus the Q tile in
shared memory.
Pure Python (no compiler import).
"""

from __future__ import annotations

BM = 128  # Q rows per CTA: 2 consumer warpgroups x 64
SMEM_LIMIT = 227 * 1024  # sm_90a dynamic shared memory per block
BARRIER_SLACK = 1024

HEAD_DIMS = ((64, 64), (128, 128), (256, 256), (192, 128))  # supported (d_qk, d_v)


def pick_tiles(d: int, dv: int) -> tuple[int, int]:
    """(kBlockN, stages) for head dims ``d`` (Q/K) and ``dv`` (V/out)."""
    if (d, dv) not in HEAD_DIMS:
        raise ValueError(f"head dims (d={d}, dv={dv}) must be one of {list(HEAD_DIMS)}")
    bn = 128 if d + dv <= 320 else 64
    q_bytes = BM * d * 2
    stage_bytes = bn * (d + dv) * 2
    stages = min(4, (SMEM_LIMIT - BARRIER_SLACK - q_bytes) // stage_bytes)
    if stages < 2:
        raise ValueError(f"head dims (d={d}, dv={dv}) do not fit shared memory")
    return bn, stages


def num_kv_blocks(m_block: int, seqlen_q: int, seqlen_k: int, bn: int, causal: bool) -> int:
    """K/V blocks that Q tile ``m_block`` reads (the pure model of the kernel's bound).

    Causal masking is bottom-right aligned (``hopper/mask.h``): query row ``i`` sees keys
    ``j <= i + seqlen_k - seqlen_q``, so rows of a tile below ``(m_block + 1) * BM`` see keys
    below ``(m_block + 1) * BM + seqlen_k - seqlen_q``.
    """
    total = -(-seqlen_k // bn)
    if not causal:
        return total
    hi = max((m_block + 1) * BM + seqlen_k - seqlen_q, 0)
    return min(total, -(-hi // bn))
