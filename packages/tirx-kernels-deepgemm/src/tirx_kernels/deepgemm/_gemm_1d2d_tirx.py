# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The sm90 FP8 1D2D GEMMs with the scale-prefetch schedule: normal, m-grouped contiguous
and m-grouped masked (``D = (A * sfa) @ (B * sfb)^T`` in bf16).

Port of ``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh`` (the kernel, one body
for the three GEMM types) and ``deep_gemm/include/deep_gemm/scheduler/gemm.cuh`` (the
persistent tile scheduler: ``get_next_block``, ``get_global_idx``, ``is_computation_valid``);
launch in ``csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp``.

Numerics as upstream (and as ``_gemm_tirx``): per 128-wide K block, ``wgmma m64nWk32 e4m3``
sums the block's products into fp32 ``accum`` (scale-d 0 on the first of 4), then
``final += sfa[row, kb] * sfb[n_blk, kb] * accum``; ``final`` is rounded once to bf16.

Schedule: 384 threads, persistent grid (one CTA per SM). Warpgroup 0 (setmaxnreg 40), one
thread, TMA-loads the A (BLOCK_M x 128) and B (BLOCK_N x 128) K-blocks (128B swizzle) into a
full/empty mbarrier ring. Warpgroups 1 and 2 (setmaxnreg 232) compute: for BLOCK_M 128 each
owns 64 rows of the tile, for BLOCK_M 64 each owns half of its BLOCK_N columns (or, with
``consumers=1``, one warpgroup owns them all in a 256-thread CTA), for BLOCK_M 256 (the
normal GEMM, where the tile model picks it) 64 rows of each 128-row half, one half after the
other per K block with the accumulator reused (upstream's ``WAVE_BLOCK_M`` waves). Scales as
upstream: the producer copies each K block's A scales (the tile's BLOCK_M floats of one
``SFA`` row) into the stage's slot of ``sfa_s`` with a 1-D bulk copy on the stage's
mbarrier; the consumers stage the tile's B scales (one per K block) in ``sfb_s`` at tile
start, between two barriers of theirs; a K block's scales are read from shared memory before
its wgmmas issue.
With ``cluster=2`` (normal GEMM only) CTA pairs along M share each B tile: each loads half
and multicasts it to both; consumers free a slot in both CTAs, and a producer drains its
ring before exit so no remote arrival lands after it (a pair's spare M tile past M loads
zeros and stores nothing).

GEMM types (upstream ``GemmType``; ``G`` groups):

- ``normal``: A (M, K), B (N, K), D (M, N); M is a run-time size.
- ``contiguous``: A (M, K) holds the groups' rows one after another, each group's row count
  a multiple of 128 (upstream's ``get_mk_alignment_for_contiguous_layout``); ``IDX`` (M,)
  int32 names each row's group (``m_indices``), -1 for padding rows. BLOCK_M is 128; tile
  ``m`` multiplies B[IDX[128 m]] (clamped to >= 0, as upstream), and a warpgroup whose first
  row has a negative index skips its wgmmas and stores zeros (``is_computation_valid``).
  B (G*N, K) is the (G, N, K) weight tensor as 2-D.
- ``masked``: A (G*Mg, K), D (G*Mg, N) are the (G, Mg, K) / (G, Mg, N) tensors as 2-D
  (``GM`` = G*Mg is the run-time size); ``MASK`` (G,) int32 on the device holds each
  group's valid rows. Tiles walk group by group (upstream's masked ``get_next_block``:
  ceil(MASK[g] / BLOCK_M) x N/BLOCK_N tiles for group g), rows clipped at MASK[g]: no host
  sync, CUDA-graph safe.

Scales: ``SFA`` holds A's 1x128 scales MN-major, ``(KB, MP)`` (``(G*KB, MP)`` masked) with
``SFA[kb, m] = sfa[m, kb]``; ``SFB`` (N/128, KB) (``(G*N/128, KB)`` grouped). Domain: N % 128
== 0 and K % 128 == 0 (``check_domain``).
"""

from __future__ import annotations

import functools

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.timeline import NoTimeline, Timeline
from tirx_kernels.core.sm90.wgmma import kmajor_descriptor_base, kstep_offset
from tirx_kernels.core.toolchain import T

from ._gemm_schedule import BK, BLOCK_MS, BLOCK_NS, GROUP_M, WIDE_BM, prefetch_stages
from ._gemm_schedule import num_sms as default_num_sms

FP8 = "float8_e4m3fn"
KINDS = ("normal", "contiguous", "masked")
_PRODUCER_REGS, _CONSUMER_REGS = 40, 232
_MMA_K = 32  # e4m3 wgmma K per instruction
SFB_BARRIER = 1  # named barrier of the consumer warpgroups (0 is the CTA's)
EPILOGUE_BARRIER = 2  # + w: consumer warpgroup w's own, for its TMA epilogue
# a timeline build's events (core.sm90.timeline; scripts/gemm_timeline.py reads them): a
# consumer warpgroup's tile, its wait for each K block's slot and its epilogue; the
# producer's loads of a tile (from its first slot acquired to its last copy issued)
TILE, WAIT, EPILOGUE, LOADS = range(4)
EVENTS = {TILE: "tile", WAIT: "wait", EPILOGUE: "epilogue", LOADS: "loads"}


def check_domain(N: int, K: int, num_groups: int = 1) -> None:
    """ValueError unless (N, K, groups) is in the kernels' compile-time domain."""
    for name, v in (("N", N), ("K", K)):
        if not isinstance(v, int) or v < BK or v % BK:
            raise ValueError(f"fp8 1d2d gemm: {name} must be a positive multiple of 128, got {v!r}")
    if not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"fp8 1d2d gemm: num_groups must be a positive int, got {num_groups!r}")
    if num_groups * N * K >= 2**31:
        raise ValueError("fp8 1d2d gemm: num_groups*N*K must be < 2^31 (int32 indexing)")


def _group_rows(idx, g, group_m):
    """Masked: group ``g``'s valid rows, ``masked_m[g]`` clamped to [0, rows per group]."""
    return T.max(T.min(idx[g], group_m), 0)


def _tile_coords(kind, tm, tn, group, idx, group_m, rows, N, BM, BN, kb_count):
    """Where tile (tm, tn) of ``group`` reads and writes (upstream ``get_global_idx``):
    (A/D first row, D row end, B first row, SFA first K-block row, SFB row) expressions."""
    sfb_col_block = T.truncdiv(tn * BN, 128)
    if kind == "masked":
        first_row = group * group_m
        return (
            first_row + tm * BM,
            first_row + _group_rows(idx, group, group_m),
            group * N + tn * BN,
            group * kb_count,
            group * (N // 128) + sfb_col_block,
        )
    if kind == "contiguous":
        g = T.max(idx[tm * BM], 0)
        return tm * BM, rows, g * N + tn * BN, 0, g * (N // 128) + sfb_col_block
    return tm * BM, rows, tn * BN, 0, sfb_col_block


def warpgroup_shape(bm: int, bn: int, consumers: int = 2) -> tuple[int, int]:
    """(columns, 128-row waves) of a consumer warpgroup's share of a ``bm`` x ``bn`` tile:
    BLOCK_M 128 and 256, 64 rows of each 128-row wave and every column; BLOCK_M 64, the 64
    rows and the columns split over the ``consumers`` warpgroups."""
    return (bn, bm // 128) if bm >= 128 else (bn // consumers, 1)


def warpgroup_origin(bm: int, bn: int, w, consumers: int = 2):
    """(first row, first column) of consumer warpgroup ``w``'s share (:func:`warpgroup_shape`)."""
    return (w * 64, 0) if bm >= 128 else (0, w * (bn // consumers))


def _chunks(waves, wn, row, col):
    """(accumulator chunk, D row, D column) of each 64-column chunk of a warpgroup's share:
    ``waves`` 128-row waves of ``wn`` columns from (row, col)."""
    per_wave = wn // 64
    return [
        (wave * per_wave + c, row + 128 * wave, col + 64 * c)
        for wave in range(waves)
        for c in range(per_wave)
    ]


@T.inline
def _store_rows(buf, D, row, col, wn, row_end, n, packed):
    """A warpgroup's 64 x ``wn`` accumulator ``buf`` into D at (row, col) as bf16 pairs from
    registers, rows from ``row_end`` on dropped."""
    dsl.store_acc(buf, D, row, col, wn, row_end, n, True, False, packed)


def _valid(kind, idx, row):
    """Upstream ``is_computation_valid`` for a warpgroup's first row (contiguous only)."""
    if kind == "contiguous":
        return idx[row] >= 0
    return T.bool(True)


def _cluster_tile(t, walk, nb_count, cm, cn, rank):
    """(M tile, N tile) of this CTA in cluster work unit ``t`` of the walk: a pair along M
    (``cm`` 2) takes two M tiles of one N tile, a pair along N (``cn`` 2) two N tiles of one
    M tile, each CTA the one of its ``rank``."""
    m, n = dsl.grouped_tile(t - walk[2], walk[3], nb_count // cn, GROUP_M // cm)
    if cn == 1:
        return m * cm + rank, n
    return m, n * cn + rank


@T.inline
def _load_operand(arena, offset, rows, src, bar, row, kb, mode, share, rank, l2):
    """TMA of one operand's K block (``rows`` x 128 from ``row``) into the ring at ``offset``:
    whole, or with ``share`` 2 this CTA's half, multicast into both CTAs of its pair; ``l2``:
    the tensor map's L2 promotion."""
    if T.constexpr(share == 1):
        view = dsl.smem_view(arena, offset, (rows, BK), FP8, mode)
        dsl.tma_load_tile(view, src, bar, (row, kb * BK), mode, 1, l2_promotion=l2)
    else:  # (a Python int, not a bound variable: the view's shape must stay static)
        view = dsl.smem_view(
            arena, offset + rank * (rows // share) * BK, (rows // share, BK), FP8, mode
        )
        dsl.tma_load_tile(view, src, bar, (row + rank * (rows // share), kb * BK), mode, 1, 3, l2)


@T.inline
def _read_scales(scale, sfa_s, sfb_s, row, kb, waves):
    """A K block's two scale products per 128-row wave of this thread's two accumulator rows
    (``row`` and ``row + 8`` of the slot's A scales, times the tile's B scale of ``kb``)."""
    for wave in T.unroll(waves):
        scale[2 * wave] = sfa_s[row + wave * 128] * sfb_s[kb]
        scale[2 * wave + 1] = sfa_s[row + wave * 128 + 8] * sfb_s[kb]


@T.inline
def _stage_sfb(sfb_s, SFB, sfb_row, kb_count, ct, threads):
    """The tile's B scales (one per K block) into shared memory by the ``threads`` consumer
    threads (``ct`` their index), between two barriers of theirs: the first waits until the
    last tile's are read."""
    T.ptx.bar.sync(T.uint32(SFB_BARRIER), T.uint32(threads))
    for kb in T.serial(ct, kb_count, step=threads):
        sfb_s[kb] = SFB[sfb_row, kb]
    T.ptx.bar.sync(T.uint32(SFB_BARRIER), T.uint32(threads))


@T.inline
def _release(ring, lane, rank, cl):
    """One lane per consumer warp frees the current slot in every CTA that wrote into it."""
    if lane == 0:
        ring.consumer_release(ring.stage)
        if T.constexpr(cl > 1):
            ring.consumer_release_remote(ring.stage, rank ^ 1)


@functools.cache
def make_gemm_1d2d(
    kind: str,
    N: int,
    K: int,
    bm: int,
    bn: int,
    num_groups: int = 1,
    num_sms: int | None = None,
    stages: int | None = None,
    cluster: int = 1,
    multicast_a: bool = False,
    consumers: int = 2,
    l2_promotion: int = 0,
    tma_store: bool = False,
    lean_loop: bool = False,
    timeline: bool = False,
):
    """The PrimFunc of GEMM type ``kind`` for one (N, K, BLOCK_M, BLOCK_N, groups);
    ``cluster=2`` (normal only): CTA pairs along M share each B tile by TMA multicast, or
    with ``multicast_a`` pairs along N share each A tile (upstream's cluster_n; N / BLOCK_N
    must be even). ``consumers=1`` (BLOCK_M 64 only): one math warpgroup of ``m64nBN``
    wgmmas in a 256-thread CTA, as upstream's BLOCK_M 64 kernel, instead of two splitting
    the columns. ``l2_promotion`` 3: A's and B's tensor maps promote L2 fills to 256 B, as
    upstream's (0: none). ``tma_store`` (normal only, a warpgroup share of whole 64-column
    chunks): D leaves through swizzled shared memory by TMA stores that drain while the next
    tile computes, as upstream's epilogue, instead of bf16 pairs stored from registers. The
    op turns both on for the normal GEMM (``fp8_gemm.normal_options``). ``lean_loop``: the
    ring's barriers addressed by their shared addresses (``Ring(by_address=True)``) and a K
    block's scales read after its wgmmas are issued, as upstream's K loop (opt-in: no faster
    on the H100, docs/fp8_gemm.md). ``timeline``: the profiling build, one more argument
    (a uint64 buffer) where thread 0 of each warpgroup marks the :data:`EVENTS`
    (``scripts/gemm_timeline.py``).

    Arguments: normal ``(A, B, SFA, SFB, D)``; contiguous ``(A, B, SFA, SFB, D, IDX)``;
    masked ``(A, B, SFA, SFB, D, MASK)`` (module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"fp8 1d2d gemm: kind must be one of {KINDS}, got {kind!r}")
    check_domain(N, K, num_groups)
    if bm not in (*BLOCK_MS, WIDE_BM) or bn not in BLOCK_NS:
        raise ValueError(f"fp8 1d2d gemm: (bm, bn) must be in {(*BLOCK_MS, WIDE_BM)} x {BLOCK_NS}")
    if bm == WIDE_BM and kind != "normal":
        raise ValueError(f"fp8 1d2d gemm: bm = {WIDE_BM} is for the normal GEMM only")
    if kind == "contiguous" and bm != 128:
        raise ValueError("fp8 1d2d gemm: the contiguous layout takes bm = 128 (its alignment)")
    num_sms = num_sms or default_num_sms()
    if cluster not in (1, 2) or (cluster == 2 and (kind != "normal" or num_sms % 2)):
        raise ValueError(
            "fp8 1d2d gemm: cluster must be 1, or 2 for the normal GEMM on an even SM count"
        )
    if consumers not in (1, 2) or (consumers == 1 and bm != 64):
        raise ValueError("fp8 1d2d gemm: consumers must be 2, or 1 with bm = 64")
    if tma_store and (kind != "normal" or warpgroup_shape(bm, bn, consumers)[0] % 64):
        raise ValueError(
            "fp8 1d2d gemm: tma_store is for the normal GEMM with whole 64-column chunks per "
            "warpgroup (bn 128, or bn 64 with bm >= 128 or one consumer)"
        )
    CL = cluster
    CM, CN = (1, CL) if multicast_a else (CL, 1)  # the pair's extent along M and along N
    G = num_groups if kind != "normal" else 1
    BM, BN = bm, bn
    WN, WAVES = warpgroup_shape(BM, BN, consumers)  # a warpgroup's wgmma columns, waves
    CT = 128 * consumers  # consumer threads
    A_BYTES, B_BYTES = BM * BK, BN * BK
    clusters = num_sms // CL  # persistent grid: one CTA per SM, in clusters of CL
    # TMA epilogue: two 64 x 64 bf16 staging tiles per consumer warpgroup, after the ring
    staging = consumers * 2 * dsl.STAGING_BYTES if tma_store else 0
    stages = stages or prefetch_stages(BM, BN, K // BK, staging)
    ring_bytes = stages * (A_BYTES + B_BYTES)
    smem = ring_bytes + staging
    kb_count, nb_count = K // BK, N // BN
    if nb_count % CN:
        raise ValueError(f"fp8 1d2d gemm: A multicast pairs N tiles: N / bn must be even, got {N}")
    mode = Swizzle.B128
    desc_a = kmajor_descriptor_base(mode, BM)
    desc_b = kmajor_descriptor_base(mode, BN)
    a_steps = [kstep_offset(k, rows=BM, elem_bytes=1, mode=mode) for k in range(BK // _MMA_K)]
    b_steps = [kstep_offset(k, rows=BN, elem_bytes=1, mode=mode) for k in range(BK // _MMA_K)]
    M = T.dynamic("M")  # rows of A / D (masked: G * rows per group)
    MP = T.dynamic("MP")  # SFA row stride
    masked = kind == "masked"
    contiguous = kind == "contiguous"
    n_rows_b = G * N
    sfa_rows = (G if masked else 1) * kb_count  # contiguous A is one (M, K) matrix

    @T.inline
    def walk_to_group_of(walk, t, IDX, group_m):
        # masked: move the walk on to the group holding linear tile t (tiles are numbered
        # group by group); the other layouts have one group
        if T.constexpr(masked):
            while t >= walk[2] + walk[3] * nb_count:
                walk[2] = walk[2] + walk[3] * nb_count
                walk[1] = walk[1] + 1
                walk[3] = T.truncdiv(_group_rows(IDX, walk[1], group_m) + (BM - 1), BM)

    @T.inline
    def gemm_body(A, B, SFA, SFB, D, IDX, marks):
        """The kernel after its entry; ``marks`` (a :mod:`~tirx_kernels.core.sm90.timeline`
        object) around each tile's phases (EVENTS)."""
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        rank = T.cuda.block_idx("x") % CL  # this CTA's tile of its cluster's pair
        first = T.cuda.block_idx("x") // CL
        arena = T.alloc_shared((smem,), FP8, scope="shared.dyn", align=1024)
        sfa_s = T.alloc_shared((stages * BM,), "float32", align=128)  # A scales, per slot
        sfb_s = T.alloc_shared((kb_count,), "float32", align=16)  # the tile's B scales
        ring = dsl.Ring(stages, by_address=lean_loop)
        # tile walk state (tiles of a cluster): [total, group, first tile of the group,
        # M tiles of the group]
        walk = T.alloc_local((4,), "int32")
        group_m = T.truncdiv(M, G)  # masked: rows per group
        ring.setup(tid, CL, 4 * consumers)
        marks.init()
        # a cluster's spare M tile (past M: zero-filled A, nothing stored) keeps pairs whole
        walk[0] = T.truncdiv(T.truncdiv(M + (BM - 1), BM) + (CM - 1), CM) * (nb_count // CN)
        if T.constexpr(masked):
            walk[0] = 0
            for g in T.serial(G):
                walk[0] = (
                    walk[0] + T.truncdiv(_group_rows(IDX, g, group_m) + (BM - 1), BM) * nb_count
                )
        walk[1] = 0
        walk[2] = 0
        walk[3] = T.truncdiv(T.truncdiv(M + (BM - 1), BM) + (CM - 1), CM)
        if T.constexpr(masked):
            walk[3] = T.truncdiv(_group_rows(IDX, 0, group_m) + (BM - 1), BM)
        if wg == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(_PRODUCER_REGS)
            if tid == 0:
                for t in T.serial(first, walk[0], step=clusters):
                    walk_to_group_of(walk, t, IDX, group_m)
                    tm, tn = _cluster_tile(t, walk, nb_count, CM, CN, rank)
                    a_row, _, b_row, sfa_kb0, _ = _tile_coords(
                        kind, tm, tn, walk[1], IDX, group_m, M, N, BM, BN, kb_count
                    )
                    # the tile's A scales of a K block: one contiguous row of SFA, clipped
                    # at its end (a multiple of 4 floats: 16-byte copies)
                    sfa_bytes = T.max(T.min(BM, MP - tm * BM), 0) * 4
                    marks.begin(LOADS)
                    for kb in T.serial(kb_count):
                        ring.producer_acquire()
                        ring.producer_expect(A_BYTES + B_BYTES + sfa_bytes)
                        _load_operand(
                            arena,
                            ring.stage * A_BYTES,
                            BM,
                            A,
                            ring.full_bar(),
                            a_row,
                            kb,
                            mode,
                            CN,
                            rank,
                            l2_promotion,
                        )
                        _load_operand(
                            arena,
                            stages * A_BYTES + ring.stage * B_BYTES,
                            BN,
                            B,
                            ring.full_bar(),
                            b_row,
                            kb,
                            mode,
                            CM,
                            rank,
                            l2_promotion,
                        )
                        if sfa_bytes > 0:  # (none for a pair's spare tile past M)
                            dsl.bulk_load(
                                T.cuda.cvta_generic_to_shared(sfa_s.ptr_to([ring.stage * BM])),
                                SFA.ptr_to([sfa_kb0 + kb, tm * BM]),
                                T.cast(sfa_bytes, "uint32"),
                                T.cuda.cvta_generic_to_shared(ring.full_bar()),
                            )
                        ring.advance()
                    marks.end(LOADS)
                if T.constexpr(CL > 1):
                    ring.producer_tail()
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(_CONSUMER_REGS)
            acc = T.alloc_local((WN // 2,), "float32")
            final = T.alloc_local((WAVES * WN // 2,), "float32")
            scale = T.alloc_local((2 * WAVES,), "float32")
            packed = T.local_scalar("uint32")
            packed4 = T.alloc_local((4,), "uint32")
            lane = tid % 32
            base = dsl.smem_addr(arena)
            # (a constant with one consumer: no thread index in its descriptors' addresses)
            w = wg - 1 if consumers > 1 else 0
            m_off, n_off = warpgroup_origin(BM, BN, w, consumers)  # rows (wave 0), columns
            a_wg = T.uint32(m_off * BK)
            b_wg = T.uint32(n_off * BK)
            t_in = tid % 128
            r_in = m_off + 16 * (t_in // 32) + (t_in % 32) // 4  # the tile row of acc[0]
            for t in T.serial(first, walk[0], step=clusters):
                marks.begin(TILE)
                walk_to_group_of(walk, t, IDX, group_m)
                tm, tn = _cluster_tile(t, walk, nb_count, CM, CN, rank)
                # D rows of this tile: [row_base, row_end)
                row_base, row_end, _, _, sfb_row = _tile_coords(
                    kind, tm, tn, walk[1], IDX, group_m, M, N, BM, BN, kb_count
                )
                _stage_sfb(sfb_s, SFB, sfb_row, kb_count, tid - 128, CT)
                # contiguous: a warpgroup whose first row is padding (-1) skips its wgmmas
                valid = _valid(kind, IDX, tm * BM + m_off)
                for i in T.unroll(WAVES * WN // 2):
                    final[i] = T.float32(0)
                if valid:
                    for kb in T.serial(kb_count):
                        marks.begin(WAIT)
                        ring.consumer_wait()
                        marks.end(WAIT)
                        # the K block's scales, read before the slot is freed (lean: after
                        # the first wave's wgmmas are issued, off their issue path)
                        if T.constexpr(not lean_loop):
                            _read_scales(scale, sfa_s, sfb_s, ring.stage * BM + r_in, kb, WAVES)
                        for wave in T.unroll(WAVES):
                            da = dsl.descriptor(
                                desc_a,
                                base
                                + T.cast(ring.stage * A_BYTES, "uint32")
                                + a_wg
                                + T.uint32(wave * 128 * BK),
                            )
                            db = dsl.descriptor(
                                desc_b,
                                base
                                + T.cast(stages * A_BYTES + ring.stage * B_BYTES, "uint32")
                                + b_wg,
                            )
                            dsl.wgmma_fence()
                            dsl.mma_ksteps(acc, da, db, a_steps, b_steps, T.bool(False), WN, FP8)
                            dsl.wgmma_commit()
                            if T.constexpr(lean_loop):
                                if wave == 0:  # a loop variable: not a constexpr
                                    _read_scales(
                                        scale, sfa_s, sfb_s, ring.stage * BM + r_in, kb, WAVES
                                    )
                            dsl.wgmma_wait(0)
                            if wave == WAVES - 1:
                                _release(ring, lane, rank, CL)
                            # registers 4j, 4j+1: row r_in; 4j+2, 4j+3: row r_in + 8
                            for i in T.unroll(WN // 2):
                                final[wave * (WN // 2) + i] = (
                                    final[wave * (WN // 2) + i]
                                    + scale[2 * wave + (i // 2) % 2] * acc[i]
                                )
                        ring.advance()
                else:
                    # upstream's skipped block: consume the stages, store zeros
                    for _kb in T.serial(kb_count):
                        ring.consumer_wait()
                        _release(ring, lane, rank, CL)
                        ring.advance()
                marks.begin(EPILOGUE)
                if T.constexpr(tma_store):
                    dsl.store_acc_tma(
                        final,
                        D,
                        arena,
                        base,
                        ring_bytes + w * 2 * dsl.STAGING_BYTES,
                        _chunks(WAVES, WN, row_base + m_off, tn * BN + n_off),
                        EPILOGUE_BARRIER + w,
                        packed4,
                        "bfloat16",
                    )
                else:
                    _store_rows(final, D, row_base + m_off, tn * BN + n_off, WN, row_end, N, packed)
                    if T.constexpr(WAVES == 2):  # the second half's rows, through acc (free now)
                        for i in T.unroll(WN // 2):
                            acc[i] = final[WN // 2 + i]
                        row = row_base + m_off + 128
                        _store_rows(acc, D, row, tn * BN + n_off, WN, row_end, N, packed)
                marks.end(EPILOGUE)
                marks.end(TILE)
            if T.constexpr(tma_store):
                if T.cuda.thread_in_warpgroup() == 0:
                    dsl.bulk_wait(0)  # the staging tiles must outlive the stores reading them

    @T.function
    def gemm_1d2d(
        A: T.Tensor((M, K), FP8, align=16),
        B: T.Tensor((n_rows_b, K), FP8, align=16),
        SFA: T.Tensor((sfa_rows, MP), "float32", align=4),
        SFB: T.Tensor((n_rows_b // 128, kb_count), "float32", align=4),
        D: T.Tensor((M, N), "bfloat16", align=16),
        IDX: T.Tensor((M if contiguous else G,), "int32", align=4),
    ):
        dsl.persistent_entry(clusters, CL, smem, 128 + CT)
        gemm_body(A, B, SFA, SFB, D, IDX, NoTimeline())

    if timeline:  # a PrimFunc has no optional parameter: the signature again, plus the buffer
        W = T.dynamic("W", "int64")

        @T.function
        def gemm_1d2d_timeline(
            A: T.Tensor((M, K), FP8, align=16),
            B: T.Tensor((n_rows_b, K), FP8, align=16),
            SFA: T.Tensor((sfa_rows, MP), "float32", align=4),
            SFB: T.Tensor((n_rows_b // 128, kb_count), "float32", align=4),
            D: T.Tensor((M, N), "bfloat16", align=16),
            IDX: T.Tensor((M if contiguous else G,), "int32", align=4),
            TIMELINE: T.Tensor((W,), "uint64"),
        ):
            dsl.persistent_entry(clusters, CL, smem, 128 + CT)
            tid = T.cuda.thread_idx("x")
            marks = Timeline(TIMELINE, W, clusters * CL, 1 + consumers, tid // 128, tid % 128 == 0)
            gemm_body(A, B, SFA, SFB, D, IDX, marks)

        return gemm_1d2d_timeline.with_attr("global_symbol", "gemm_1d2d_timeline")
    return gemm_1d2d
