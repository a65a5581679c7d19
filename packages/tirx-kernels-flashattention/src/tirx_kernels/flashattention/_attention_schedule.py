# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Schedule of the forward kernel per head dim (after ``hopper/tile_size.h``).

FlashAttention-3 (``tile_size_fwd_sm90``) picks (kBlockM, kBlockN) per head dim: 192 x 192
(causal 192 x 128) for d 64, 128 x 176 (causal 128 x 128) for d 128, 128 x 128 for d 192 with
dv 128, 128 x 80 for d 256. This kernel's default kBlockM is 128 (two consumer warpgroups
of 64 rows; ``bm=192``, three, is upstream's d 64 tile), with
upstream's kBlockN and a K/V ring of ``stages`` slots plus the Q tile in shared memory.

The environment variable ``TIRX_FLASH_ATTN_SCHEDULE`` overrides the default, e.g.
``overlap=0`` or ``bn=128,split_kv=0,pingpong=0,regs=40`` (keys: ``bm``, ``bn``,
``stages``, ``overlap``, ``pingpong``, ``split_kv``, ``regs``; flags 0/1); it is read at each
call, so the compiled kernel follows it. Pure Python (no compiler import).
"""

from __future__ import annotations

import dataclasses
import functools
import os

BM = 128  # Q rows per CTA by default: 2 consumer warpgroups x 64
BMS = (128, 192)  # 64 rows per consumer warpgroup: two or three of them
REGS = (24, 32, 40)  # the producer warpgroup's setmaxnreg choices
SMEM_LIMIT = 227 * 1024  # sm_90a dynamic shared memory per block
BARRIER_SLACK = 1024
MAX_STAGES = 4
ENV = "TIRX_FLASH_ATTN_SCHEDULE"

HEAD_DIMS = ((64, 64), (128, 128), (256, 256), (192, 128))  # supported (d_qk, d_v)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How the kernel runs one problem.

    ``bn``: kBlockN; ``stages``: K/V ring slots; ``overlap``: FA3's intra-warpgroup overlap
    (S of block it with P V of block it - 1); ``pingpong``: FA3's inter-warpgroup schedule
    (named barriers order one consumer's GEMMs against the other's softmax; needs
    ``overlap``); ``split_kv``: separate K and V barriers, so S starts before V lands;
    ``regs``: the producer warpgroup's ``setmaxnreg`` (the consumers get the rest: 24 -> 240
    as upstream's two-consumer kernel, 40 -> 232 as the first schedule, 32 -> 160 with three
    consumers as upstream's); ``bm``: kBlockM, 64 Q rows per consumer warpgroup;
    ``pv_smem``: P through shared memory for an SS P V (upstream's MmaPV_is_RS false, its d 64
    192 x 192 tile), each consumer a 64 x kBlockN tile, instead of the registers' A operand.
    """

    bn: int
    stages: int
    overlap: bool = True
    pingpong: bool = True
    split_kv: bool = True
    regs: int = 24
    bm: int = BM
    pv_smem: bool = False

    @property
    def consumers(self) -> int:
        return self.bm // 64


def _check_dims(d: int, dv: int) -> None:
    if (d, dv) not in HEAD_DIMS:
        raise ValueError(f"head dims (d={d}, dv={dv}) must be one of {list(HEAD_DIMS)}")


def default_bn(d: int, dv: int, causal: bool) -> int:
    """kBlockN of ``hopper/tile_size.h`` (``tile_size_fwd_sm90``, 16-bit inputs)."""
    _check_dims(d, dv)
    if d == 64:
        return 128 if causal else 192
    if d == 128:
        return 128 if causal else 176
    if d == 192:
        return 128
    return 80


def max_stages(d: int, dv: int, bn: int, bm: int = BM, pv_smem: bool = False) -> int:
    """Most K/V ring slots (up to 4) that fit shared memory beside the ``bm``-row Q tile
    (and the consumers' P tiles with ``pv_smem``)."""
    q_bytes = bm * d * 2 + (bm * bn * 2 if pv_smem else 0)
    stage_bytes = bn * (d + dv) * 2
    return min(MAX_STAGES, (SMEM_LIMIT - BARRIER_SLACK - q_bytes) // stage_bytes)


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> tuple:
    return tuple(sorted(parse_override(text).items()))


def parse_override(text: str) -> dict:
    """``"bn=128,overlap=0"`` -> ``{"bn": 128, "overlap": False}``; ValueError naming ENV."""
    out: dict = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in {f.name for f in dataclasses.fields(Schedule)}:
            raise ValueError(
                f"{ENV}: {item!r} must be key=value with key one of bm, bn, stages, overlap, "
                "pingpong, split_kv, regs, pv_smem"
            )
        if key in ("bm", "bn", "stages", "regs"):
            if not value.isdigit():
                raise ValueError(f"{ENV}: {key} must be a positive integer, got {value!r}")
            out[key] = int(value)
        else:
            if value not in ("0", "1"):
                raise ValueError(f"{ENV}: {key} must be 0 or 1, got {value!r}")
            out[key] = value == "1"
    return out


def pick_schedule(d: int, dv: int, causal: bool, override: dict | None = None) -> Schedule:
    """The default schedule for head dims (``d``, ``dv``), with ``override`` applied (None:
    the one of ``TIRX_FLASH_ATTN_SCHEDULE``)."""
    if override is None:
        override = dict(_parsed(os.environ.get(ENV, "")))
    bn = override.get("bn", default_bn(d, dv, causal))
    if bn % 16 or not 16 <= bn <= 256:
        raise ValueError(f"kBlockN {bn} must be a multiple of 16 in 16..256")
    bm = override.get("bm", BM)
    if bm not in BMS:
        raise ValueError(f"kBlockM {bm} must be one of {BMS}")
    pv_smem = override.get("pv_smem", False)
    if pv_smem and bn % 64:
        raise ValueError(
            f"pv_smem stores P in 64-column blocks: kBlockN {bn} must be a multiple of 64"
        )
    fit = max_stages(d, dv, bn, bm, pv_smem)
    stages = override.get("stages", fit)
    if fit < 2 or not 2 <= stages <= fit:
        raise ValueError(
            f"head dims (d={d}, dv={dv}) with kBlockN {bn}: {stages} stages do not fit shared "
            f"memory (at most {fit})"
        )
    overlap = override.get("overlap", True)
    # upstream's UseSchedulerBarrier (16-bit inputs): intra-warpgroup overlap and d <= 128
    pingpong = override.get("pingpong", d <= 128) and overlap
    regs = override.get("regs", 24 if bm == BM else 32)
    if regs not in REGS:
        raise ValueError(f"producer registers {regs} must be one of {REGS}")
    split_kv = override.get("split_kv", True)
    return Schedule(bn, stages, overlap, pingpong, split_kv, regs, bm, pv_smem)


def pick_tiles(d: int, dv: int, causal: bool = False) -> tuple[int, int]:
    """(kBlockN, stages) of the default schedule (no override)."""
    s = pick_schedule(d, dv, causal, {})
    return s.bn, s.stages


def num_kv_blocks(
    m_block: int, seqlen_q: int, seqlen_k: int, bn: int, causal: bool, bm: int = BM
) -> int:
    """K/V blocks that Q tile ``m_block`` reads (the pure model of the kernel's bound).

    Causal masking is bottom-right aligned (``hopper/mask.h``): query row ``i`` sees keys
    ``j <= i + seqlen_k - seqlen_q``, so rows of a tile below ``(m_block + 1) * bm`` see keys
    below ``(m_block + 1) * bm + seqlen_k - seqlen_q``.
    """
    total = -(-seqlen_k // bn)
    if not causal:
        return total
    hi = max((m_block + 1) * bm + seqlen_k - seqlen_q, 0)
    return min(total, -(-hi // bn))
