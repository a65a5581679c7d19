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
``stages``, ``overlap``, ``pingpong``, ``split_kv``, ``regs``, ``pv_smem``, ``persistent``,
``grid``; flags 0/1); it is read at the first call (:func:`override_text`), so the
compiled kernel follows it. The
persistent schedule's tile order (after ``hopper/tile_scheduler.hpp``) is
:func:`tile_coords`. Pure Python (no compiler import).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
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
    as upstream's two-consumer kernel, 32 or 40 -> 232, 32 -> 160 with three consumers as
    upstream's); ``bm``: kBlockM, 64 Q rows per consumer warpgroup;
    ``pv_smem``: P through shared memory for an SS P V (upstream's MmaPV_is_RS false, its d 64
    192 x 192 tile), each consumer a 64 x kBlockN tile, instead of the registers' A operand.
    ``persistent``: one CTA per SM walking the Q tiles (upstream's persistent schedulers;
    batched kernel only, varlen keeps one CTA per tile), so a CTA's next Q and K/V load
    while it finishes a tile; the default for d <= 128 (:func:`walks_by_default`);
    ``grid``: that many CTAs instead of the SM count (tests).
    ``early_rescale``: with ``overlap``, O is rescaled by the previous block's correction
    between issuing S and P V, under the S GEMM, instead of after P V completes (upstream's
    ``RescaleOBeforeGemm``, which it takes for head dims above 128; opt-in until timed).
    """

    bn: int
    stages: int
    overlap: bool = True
    pingpong: bool = True
    split_kv: bool = True
    regs: int = 24
    bm: int = BM
    pv_smem: bool = False
    persistent: bool = False
    grid: int = 0
    early_rescale: bool = False

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
                "pingpong, split_kv, regs, pv_smem, persistent, grid, early_rescale"
            )
        if key in ("bm", "bn", "stages", "regs", "grid"):
            if not value.isdigit():
                raise ValueError(f"{ENV}: {key} must be a positive integer, got {value!r}")
            out[key] = int(value)
        else:
            if value not in ("0", "1"):
                raise ValueError(f"{ENV}: {key} must be 0 or 1, got {value!r}")
            out[key] = value == "1"
    return out


@functools.cache
def override_text() -> str:
    """``$TIRX_FLASH_ATTN_SCHEDULE``, read at the first call; ``override_text.cache_clear()``
    reads it again. Once, not per call: a lookup of an unset variable costs about a µs."""
    return os.environ.get(ENV, "")


def pick_schedule(
    d: int, dv: int, causal: bool, override: dict | None = None, varlen: bool = False
) -> Schedule:
    """The default schedule for head dims (``d``, ``dv``) of the batched or ``varlen``
    kernel, with ``override`` applied (None: the one of :func:`override_text`)."""
    if override is None:  # once per (head dims, mask, variable): every call of the op asks
        return _environment_schedule(d, dv, causal, varlen, override_text())
    return _schedule(d, dv, causal, override, varlen)


@functools.lru_cache(maxsize=256)
def _environment_schedule(d: int, dv: int, causal: bool, varlen: bool, text: str) -> Schedule:
    return _schedule(d, dv, causal, dict(_parsed(text)), varlen)


def walks_by_default(d: int, override: dict, varlen: bool) -> bool:
    """Whether the schedule is persistent unless ``override`` says: for the batched kernel
    at d <= 128 (timed faster on every such row: docs/flash_attn_fwd.md), and only when the
    override names no key but ``persistent`` or ``grid``, so a tile or pipeline tried alone
    keeps one CTA per tile, the pairing its tests ran."""
    return not varlen and d <= 128 and set(override) <= {"persistent", "grid"}


def _schedule(d: int, dv: int, causal: bool, override: dict, varlen: bool = False) -> Schedule:
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
    persistent = override.get("persistent", walks_by_default(d, override, varlen))
    # the persistent producer walks tiles: 24 registers spill (d 256, d 192 causal); 32
    # leave two consumers 232
    regs = override.get("regs", 24 if bm == BM and not persistent else 32)
    if regs not in REGS:
        raise ValueError(f"producer registers {regs} must be one of {REGS}")
    split_kv = override.get("split_kv", True)
    grid = override.get("grid", 0)
    if grid and not persistent:
        raise ValueError(f"grid {grid} sizes the persistent grid: set persistent=1 with it")
    early_rescale = override.get("early_rescale", False)
    return Schedule(
        bn, stages, overlap, pingpong, split_kv, regs, bm, pv_smem, persistent, grid, early_rescale
    )


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


# -------------------------------------------------------------------- persistent tile order

L2_KV_BYTES = 32 * 1024 * 1024  # upstream's L2 budget for the K and V of one section


def _pick(cond, a, b):
    return a if cond else b


# (select, div, mod, keep) of Python ints; the kernel passes TIR's, with ``keep(slot, v)``
# storing v in a register so later steps read it instead of repeating its expression
PY_OPS = (_pick, operator.floordiv, operator.mod, lambda slot, value: value)


def floor_pow2(n: int) -> int:
    """The largest power of two <= ``n`` (1 for n < 1)."""
    return 1 << (max(n, 1).bit_length() - 1)


def section_heads(seqlen_k, d: int, dv: int, group: int, pow2=floor_pow2):
    """Query heads per L2 section of the causal order (upstream's ``DynamicPersistentTile
    Scheduler`` swizzle): the largest power of two of KV heads whose K and V fit
    :data:`L2_KV_BYTES` (at least one), times ``group`` query heads per KV head.
    ``pow2``: :func:`floor_pow2` over ``seqlen_k``'s type (TIR's in the kernel)."""
    return pow2((L2_KV_BYTES // ((d + dv) * 2)) // seqlen_k) * group


def tile_coords(t, n_mb, heads_q, heads_batch, section, causal: bool, ops=PY_OPS):
    """(Q tile, head, sequence) of persistent tile ``t`` of ``n_mb * heads_batch``.

    Not causal (upstream's ``StaticPersistentTileScheduler``): Q tiles fastest, then heads,
    then sequences, so the CTAs in flight share a few heads' K and V in L2. Causal (upstream's
    ``DynamicPersistentTileScheduler``, tiles handed out in this order by a counter): the
    (head, sequence) pairs in sections of ``section``, the last section what is left; within
    a section heads fastest and Q tiles longest first, so the longest tiles go first and the
    K/V of one section stay in L2. ``ops``: :data:`PY_OPS` or the kernel's."""
    select, div, mod, keep = ops
    if not causal:
        mb, hb = keep(0, mod(t, n_mb)), keep(1, div(t, n_mb))
    else:
        span = section * n_mb
        first, within = keep(0, div(t, span)), keep(1, mod(t, span))
        width = keep(
            2, select(first < div(heads_batch, section), section, mod(heads_batch, section))
        )
        mb = keep(3, n_mb - 1 - div(within, width))
        hb = keep(4, first * section + mod(within, width))
    return mb, mod(hb, heads_q), div(hb, heads_q)
