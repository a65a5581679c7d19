# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Schedule choices of the sm90 FP8 1D2D GEMMs (upstream: csrc/jit_kernels/heuristics/sm90.hpp).

Two schedules. ``basic`` (the first port, kept as a fallback: ``TIRX_DEEPGEMM_SCHEDULE=basic``)
fixes BLOCK_M = 128 and picks BLOCK_N 128 or 64 from M. ``prefetch`` (the default) picks
(BLOCK_M, BLOCK_N) among BLOCK_M {64, 128} x BLOCK_N {128, 64, 32} with upstream's cost
model (``SM90ArchSpec::get_layout_info``: L1/L2 bytes moved divided by the wave efficiency;
no multicast). BLOCK_K = 128 is the scale granularity (upstream requires it too); every
BLOCK_N here divides 128, so a tile needs one B scale per K block. Each choice is a compiled
kernel serving every M.
"""

from __future__ import annotations

import os

BM, BK = 128, 128
BNS = (128, 64)  # BLOCK_N choices: a 128-column scale block holds whole tiles of either
A_BYTES = BM * BK  # one e4m3 K-block of A
SMEM_BUDGET = 227 * 1024 - 2048  # opt-in dynamic smem minus barriers and slack
MAX_STAGES = 8
GROUP_M = 8  # M tiles per raster group (L2 reuse of B)


def num_sms() -> int:
    """SMs of device 0 (132, the H200's, without a GPU): :func:`toolchain.num_sms`."""
    from tirx_kernels.core import toolchain

    return toolchain.num_sms()


def pick_bn(M: int, N: int, num_sms: int) -> int:
    """128 when 128 x 128 tiles give every SM one, else 64 (skinny M: twice the CTAs
    stream B, which bounds these shapes)."""
    return 128 if -(-M // BM) * (N // 128) >= num_sms else 64


def pick_stages(bn: int) -> int:
    """The deepest (A, B) K-block ring that fits shared memory (capped)."""
    return min(MAX_STAGES, SMEM_BUDGET // (A_BYTES + bn * BK))


# ----------------------------------------------------------------------- prefetch schedule

SCHEDULES = ("prefetch", "basic")
BLOCK_MS = (64, 128)  # the default dispatch's candidates (upstream's, less 256)
WIDE_BM = 256  # upstream's third candidate, ranked by pick_normal_layout from M = 256 on
BLOCK_NS = (32, 64, 128)  # divisors of the 128-column scale block, ascending as upstream
PREFETCH_MAX_STAGES = 12


def schedule() -> str:
    """The fp8_gemm_nt schedule: ``TIRX_DEEPGEMM_SCHEDULE`` (prefetch | basic), default prefetch."""
    name = os.environ.get("TIRX_DEEPGEMM_SCHEDULE", "prefetch") or "prefetch"
    if name not in SCHEDULES:
        raise ValueError(f"TIRX_DEEPGEMM_SCHEDULE must be one of {SCHEDULES}, got {name!r}")
    return name


def block_cycles(
    m: int,
    n: int,
    k: int,
    groups: int,
    bm: int,
    bn: int,
    sms: int,
    cluster: int = 1,
    multicast_a: bool = False,
) -> float:
    """Upstream's estimate of a (bm, bn) layout's cost: the larger of its L1 and L2 cycles
    (e4m3 A/B, bf16 D), divided by the wave efficiency. ``cluster`` 2: CTA pairs along M
    multicast B (half the B bytes from L2; an odd M-tile count leaves a spare tile), or with
    ``multicast_a`` pairs along N multicast A (upstream's cluster_n); as upstream, never for
    a single wave."""
    cm, cn = (1, cluster) if multicast_a else (cluster, 1)
    m_tiles, n_tiles = -(-m // bm), -(-n // bn)
    blocks = -(-m_tiles // cm) * cm * (-(-n_tiles // cn) * cn) * groups
    waves = -(-blocks // sms)
    if cluster > 1 and waves <= 1:
        return float("inf")
    l2_bw = min(64.0 * sms, 8e6 / 1.3e3)  # bytes per cycle
    l1_bw = 128.0 * sms
    cd = bm * bn * 2
    l2 = (k * (bm / cn + bn / cm) + cd) * blocks / l2_bw
    l1 = (k * (bm + bn) + k * (max(64, bm) + bn) + cd + cd) * blocks / l1_bw
    return max(l1, l2) / (blocks / (waves * sms))


def pick_block(
    m: int, n: int, k: int, sms: int, groups: int = 1, bms: tuple[int, ...] = BLOCK_MS
) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of least :func:`block_cycles` (first one on ties, upstream's order:
    BLOCK_M ascending, then BLOCK_N ascending) for ``groups`` GEMMs of ``m`` x ``n`` x ``k``."""
    m = max(m, 1)
    best, best_cycles = None, None
    for bm in bms:
        for bn in BLOCK_NS:
            if n % bn:
                continue
            cycles = block_cycles(m, n, k, groups, bm, bn, sms)
            if best_cycles is None or cycles < best_cycles:
                best, best_cycles = (bm, bn), cycles
    assert best is not None
    return best


def prefetch_stages(bm: int, bn: int, kb_count: int = 0, reserved: int = 0) -> int:
    """The deepest K-block ring of the prefetch schedule (A, B and the A scales per slot)
    that fits shared memory beside the tile's ``kb_count`` B scales and ``reserved`` bytes
    (the TMA epilogue's staging tiles)."""
    free = SMEM_BUDGET - 4 * kb_count - reserved
    return min(PREFETCH_MAX_STAGES, free // (bm * BK + bn * BK + 4 * bm))


def multicast() -> bool:
    """Whether the prefetch schedule may pick B multicast over CTA pairs:
    ``TIRX_DEEPGEMM_MULTICAST`` 1 or 0 (default: the single CTAs were faster, docs/fp8_gemm.md)."""
    value = os.environ.get("TIRX_DEEPGEMM_MULTICAST", "0") or "0"
    if value not in ("0", "1"):
        raise ValueError(f"TIRX_DEEPGEMM_MULTICAST must be 0 or 1, got {value!r}")
    return value == "1"


def pick_layout(
    m: int, n: int, k: int, sms: int, allow_multicast: bool, bms: tuple[int, ...] = BLOCK_MS
) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, cluster) of the normal GEMM: :func:`pick_block`'s tile, and a CTA
    pair multicasting B (cluster 2) where upstream's model says it pays; ``bms``: the BLOCK_M
    candidates."""
    bm, bn = pick_block(m, n, k, sms, bms=bms)
    if not allow_multicast or sms % 2:
        return bm, bn, 1
    best = (bm, bn, 1)
    best_cycles = block_cycles(max(m, 1), n, k, 1, bm, bn, sms)
    for cbm in bms:
        for cbn in BLOCK_NS:
            if n % cbn:
                continue
            cycles = block_cycles(max(m, 1), n, k, 1, cbm, cbn, sms, cluster=2)
            if cycles < best_cycles:
                best, best_cycles = (cbm, cbn, 2), cycles
    return best


def pick_wide_layout(
    m: int, n: int, k: int, sms: int, allow_b_pairs: bool = True
) -> tuple[int, int, int, bool]:
    """The BLOCK_M 256 tiles' (BLOCK_M, BLOCK_N, cluster, multicast_a): the BLOCK_N and CTA
    pair (none, along M sharing B unless not ``allow_b_pairs``, along N sharing A) of least
    :func:`block_cycles`, as upstream ranks its candidates; an A-sharing pair needs an even
    N-tile count."""
    best, best_cycles = None, None
    for bn in BLOCK_NS:
        if n % bn:
            continue
        for cluster, multicast_a in ((1, False), (2, False), (2, True)):
            if cluster > 1 and (sms % 2 or (multicast_a and (n // bn) % 2)):
                continue
            if cluster > 1 and not (multicast_a or allow_b_pairs):
                continue
            cycles = block_cycles(max(m, 1), n, k, 1, WIDE_BM, bn, sms, cluster, multicast_a)
            if best_cycles is None or cycles < best_cycles:
                best, best_cycles = (WIDE_BM, bn, cluster, multicast_a), cycles
    assert best is not None
    return best


def pick_normal_layout(
    m: int, n: int, k: int, sms: int, allow_multicast: bool
) -> tuple[int, int, int, bool]:
    """The normal GEMM's (BLOCK_M, BLOCK_N, cluster, multicast_a): :func:`pick_layout`'s
    tile, or from M = ``WIDE_BM`` on :func:`pick_wide_layout`'s where the model ranks it
    cheaper, as upstream ranks BLOCK_M 256 beside 64 and 128 (CTA pairs sharing B only if
    ``allow_multicast``; timings in docs/fp8_gemm.md)."""
    bm, bn, cluster = pick_layout(m, n, k, sms, allow_multicast)
    narrow = (bm, bn, cluster, False)
    if m < WIDE_BM:
        return narrow
    wide = pick_wide_layout(m, n, k, sms, allow_b_pairs=allow_multicast)
    wide_cycles = block_cycles(m, n, k, 1, wide[0], wide[1], sms, wide[2], wide[3])
    return wide if wide_cycles < block_cycles(m, n, k, 1, bm, bn, sms, cluster) else narrow
