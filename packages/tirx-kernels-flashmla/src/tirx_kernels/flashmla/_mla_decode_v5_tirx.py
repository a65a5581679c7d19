# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The "v5" split-KV kernel of dense MLA decode: pages in pairs, one page per warpgroup.

Port of the schedule of FlashMLA's sm90 dense decode
(``csrc/sm90/decode/dense/splitkv_mla.cuh``: ``wg0_subroutine``, ``wg1_subroutine``, the
bunches, ``warpgroup_cooperative_qkt_gemm``), on the request walk, guards and epilogue of
:mod:`._mla_decode_tirx` and the TMA page loads of :mod:`._mla_pages_tma_tirx` (two
barriers per stage: tiles 0-3, the V dims warpgroup 0 reads, and tiles 4-8).

Pages go in pairs ``(a, b)``: ``a`` in stage 0, whose ``S`` warpgroup 0 computes, ``b`` in
stage 1 for warpgroup 1 (64 x 64 each, full rows). Warpgroup ``w`` owns O columns ``256w ..
256w + 255``. The running max lives in shared memory (``sM``) and is chained: warpgroup 0
folds in page ``a`` and publishes the rescale ``sScale0``; warpgroup 1 then folds in page
``b`` on top and publishes ``sScale1``. Per pair, with named barriers between the steps:

- wg 0: softmax of ``a`` -> ``O0 += P_a V_a`` (P from registers) -> page ``a + 2``'s tiles
  0-3 into stage 0 -> ``P_a * sScale1`` into the P0 tile -> ``O0 *= sScale1``, ``O0 += P_b
  V_b`` (the P1 tile) -> ``S`` of ``a + 2`` (tiles 0-3, then 4-8 after page ``b + 2``'s
  tiles 0-3 go out).
- wg 1: softmax of ``b`` on top of ``a``'s max -> ``P_b`` into the P1 tile, ``O1 += P_b
  V_b`` (registers) -> ``O1 += P_a V_a`` (the P0 tile) -> tiles 4-8 of pages ``b + 2`` and
  ``a + 2`` as its reads of them finish -> ``S`` of ``b + 2`` (tiles 4-8, then 0-3).

So one warpgroup's softmax overlaps the other's GEMMs, and each half-page load goes out as
soon as the last reader of that half is done. Masked scores are finite (``MASKED``, below
``M_INIT``), so the chained max never meets ``inf - inf``.

Shared memory: Q (72 KiB; its tile 8, the rope dims 512..575, is kept in registers as the A
fragments of the ``S`` wgmmas of tile 8, and its space holds the P1 tile) + 2 KV stages
(144 KiB) + the P0 tile (8 KiB), dynamic; the max, two rescales and the sum exchange (1.25
KiB) and four mbarriers static.
"""

from __future__ import annotations

import functools

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.toolchain import T

from ._mla_decode_tirx import (
    _DESC_K,
    _DESC_V,
    _S_STEPS,
    _V_HALF,
    BM,
    PAGE,
    TILE_BYTES,
    _load_q,
    _mask_scores,
    _mma_ss,
    _pv,
    check_static,
    page_ok,
    split_kv_kernel,
    wgmma_ops,
)
from ._mla_pages_tma_tirx import TILES, TmaPages

P0_OFF = TILE_BYTES * 3  # warpgroup 0's P tile, after Q and the two KV stages
P1_OFF = 8 * BM * 128  # warpgroup 1's P tile: Q's tile 8, whose values wait in registers
SMEM = P0_OFF + BM * PAGE * 2
MASKED = -1e33  # a masked score (log2 units): finite, far below any real one
M_INIT = -1e30  # the running max before any score: above MASKED, so exp2(MASKED - m) = 0
# a page's halves, as its tiles (one mbarrier each): the V dims warpgroup 0 reads | the rest
LEFT, RIGHT = tuple(range(4)), tuple(range(4, 9))
# named barriers (0 is the CTA barrier): the handoffs between the warpgroups, and each
# warpgroup's own 128 threads
SCALE0, SCALE1, P0_READY, PV1_ISSUED, WG_BAR = 1, 2, 3, 4, 5


@functools.cache
def make_decode(
    dtype="bfloat16",
    h_q=128,
    s_q=1,
    causal=False,
    prefetch=False,
    staged_stores=False,
    early_q=False,
    timeline=False,
):
    """v5 split-KV decode PrimFunc for one (dtype, h_q, s_q, causal); the same signature and
    outputs as :func:`._mla_decode_tirx.make_decode`. ``prefetch`` (variant v7):
    the next request's Q and first two pages are issued before a request's epilogue stores
    instead of at the next request's start (upstream loads the next Q there).
    ``staged_stores`` (variant v9, with ``prefetch``): the epilogue stages O in the two
    pages' shared memory and stores it by one bulk copy per row (upstream's), and the next
    request's loads follow once the copies have read it. ``early_q`` (variant v10, with
    ``staged_stores``): the next request's Q goes out before the staged stores, its pages
    after them (upstream's order).
    ``timeline``: the profiling build (:func:`._mla_decode_tirx.split_kv_kernel`)."""
    check_static(dtype, h_q, s_q)
    cvt, mma_s, mma_o = wgmma_ops(dtype, PAGE)

    @T.inline
    def alloc_tiles():
        arena = T.alloc_shared((SMEM // 4,), "uint32", scope="shared.dyn", align=1024)
        xch = T.alloc_shared((2 * BM,), "float32")  # the warpgroups' row sums, at the end
        rowmax = T.alloc_shared((BM,), "float32")  # sM: the running max of each row
        scales = T.alloc_shared((2 * BM,), "float32")  # sScale0, sScale1
        base = dsl.smem_addr(arena)
        acc_s = T.alloc_local((PAGE // 2,), "float32")
        acc_o = T.alloc_local((128,), "float32")
        pa = T.alloc_local((PAGE // 4,), "uint32")
        rq8 = T.alloc_local((PAGE // 4,), "uint32")
        pages = TmaPages(arena, dtype, TILES)  # an expression: no new scope
        pages.init(T.cuda.thread_idx("x"))
        loaded = _loaded_flag(prefetch)
        if T.constexpr(prefetch):
            loaded[0] = 0
        return base, acc_o, (arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded)

    def page_scores(stage, base, rq8, acc_s, pages, order, fresh=True):
        """``acc_s`` (= if ``fresh``, else +=) S of the page in ``stage`` (64 x 64, 4 k16
        wgmmas per tile): the halves in ``order``, each committed as one group, each tile
        issued as soon as its own barrier completes; tile 8's A from registers."""
        dq = dsl.descriptor(_DESC_K, base)
        dk = dsl.descriptor(_DESC_K, base + T.uint32(TILE_BYTES * (1 + stage)))
        for n, half in enumerate(order):
            dsl.fence_registers(acc_s, PAGE // 2)
            dsl.wgmma_fence()
            for tile in half:
                pages.wait(stage, tile)
                _s_tile(mma_s, acc_s, rq8, dq, dk, tile, not fresh or n > 0 or tile > half[0])
            dsl.wgmma_commit()

    @T.inline
    def first_pages(KC, BT, NT, req, lo, hi, tid, pages):
        """Pages ``lo`` and ``lo + 1`` by TMA (one thread issues them)."""
        if tid == 0:
            pages.issue(KC, BT, NT, req, lo, 0, LEFT + RIGHT)
            if lo + 1 < hi:
                pages.issue(KC, BT, NT, req, lo + 1, 1, RIGHT + LEFT)

    @T.inline
    def q_load(Q, req, mt, base, tid, R, tiles):
        """Q by cp.async (one group)."""
        _load_q(Q, req, mt, base, tid, R)
        T.ptx.cp.async_.commit_group()

    @T.inline
    def request_loads(Q, KC, BT, NT, req, lo, hi, mt, base, tid, R, tiles):
        """The first pages (issued first: their loads overlap Q's), then Q."""
        arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded = tiles
        first_pages(KC, BT, NT, req, lo, hi, tid, pages)
        q_load(Q, req, mt, base, tid, R, tiles)

    @T.inline
    def request_prefetch(Q, KC, BT, NT, req, lo, hi, mt, base, tid, R, tiles):
        """(v7) The next request's loads, issued while this one's epilogue stores; (v10)
        its pages only, Q having gone out before the stores."""
        arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded = tiles
        if T.constexpr(early_q):
            first_pages(KC, BT, NT, req, lo, hi, tid, pages)
        else:
            request_loads(Q, KC, BT, NT, req, lo, hi, mt, base, tid, R, tiles)
        loaded[0] = 1

    @T.inline
    def request_start(Q, KC, BT, NT, req, lo, hi, mt, seqlen, base, tid, R, tiles):
        """Q (cp.async; its tile 8 into registers), pages ``lo`` and ``lo + 1`` by TMA, and
        the S of each in its warpgroup."""
        arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded = tiles
        wg = tid // 128
        lane = tid % 32
        r0 = 16 * ((tid % 128) // 32) + lane // 4
        if tid < BM:
            rowmax[tid] = T.float32(M_INIT)
        if T.constexpr(prefetch):
            if loaded[0] == 0:  # the part's first request: nothing was issued ahead
                request_loads(Q, KC, BT, NT, req, lo, hi, mt, base, tid, R, tiles)
            loaded[0] = 0
        else:
            request_loads(Q, KC, BT, NT, req, lo, hi, mt, base, tid, R, tiles)
        T.ptx["cp.async.wait_group"](0)
        T.ptx.fence.proxy.async_.shared__cta()  # cp.async writes -> wgmma reads
        T.cuda.cta_sync()
        for q in T.unroll(PAGE // 4):
            row = r0 + 8 * (q % 2)
            rq8[q] = arena[_p_word(P1_OFF, row, q // 2, lane)]
        # every wgmma retired inside the branch that issued it: ptxas serializes them all
        # otherwise
        if wg == 0:
            page_scores(0, base, rq8, acc_s, pages, (LEFT, RIGHT))
            dsl.wgmma_wait(0)
        else:
            if lo + 1 < hi:
                page_scores(1, base, rq8, acc_s, pages, (RIGHT, LEFT))
                dsl.wgmma_wait(0)
        dsl.fence_registers(acc_s, PAGE // 2)

    @T.inline
    def pair_step(
        KC, BT, NT, scale_log2, req, blk, lo, hi, seqlen, stage, thread, rows, base, tiles
    ):
        """Pages ``a = blk`` (stage 0, S in warpgroup 0's ``acc_s``) and ``b = blk + 1`` if
        ``b < hi`` (stage 1, S in warpgroup 1's)."""
        tid, wg, lane, r0, c0 = thread
        m, lsum, corr, lim, acc_o = rows
        arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded = tiles
        t = tid % 128
        has_b = blk + 1 < hi
        dp0 = dsl.descriptor(_DESC_K, base + T.uint32(P0_OFF))
        dp1 = dsl.descriptor(_DESC_K, base + T.uint32(P1_OFF))
        dv_a = dsl.descriptor(_DESC_V, base + T.cast(TILE_BYTES + wg * _V_HALF, "uint32"))
        dv_b = dsl.descriptor(_DESC_V, base + T.cast(2 * TILE_BYTES + wg * _V_HALF, "uint32"))
        if wg == 0:
            # softmax of page a; publish the new max and the rescale of the old
            _scale_scores(acc_s, blk * PAGE, BT[req, blk], NT, lim, c0, scale_log2)
            _fold_max(acc_s, acc_o, lsum, rowmax, scales, 0, r0, lane)
            T.ptx.bar.arrive(T.uint32(SCALE0), T.uint32(256))
            # O0 += P_a V_a (P from registers)
            if seqlen - blk * PAGE < PAGE:
                pages.zero_tail_half(0, 0, seqlen - blk * PAGE, t, WG_BAR)
            for q in T.unroll(PAGE // 4):
                cvt(pa[q], acc_s[2 * q + 1], acc_s[2 * q])
            _fence_operands(acc_o, pa)
            dsl.wgmma_fence()
            _pv(mma_o, acc_o, pa, dv_a)
            dsl.wgmma_commit()
            dsl.wgmma_wait(0)
            _fence_operands(acc_o, pa)
            # page a's tiles 0-3 are free (warpgroup 1 reads tiles 4-7 of it)
            T.ptx.bar.sync(T.uint32(SCALE1), T.uint32(256))
            if T.And(t == 0, blk + 2 < hi):
                pages.issue(KC, BT, NT, req, blk + 2, 0, LEFT)
            # P_a on warpgroup 1's max, into the P0 tile; the scales read before any store
            # (nvcc keeps a shared load behind each store that might alias it)
            for h in T.unroll(2):
                corr[h] = scales[BM + r0 + 8 * h]
            for q in T.unroll(PAGE // 4):
                cvt(pa[q], acc_s[2 * q + 1] * corr[q % 2], acc_s[2 * q] * corr[q % 2])
            for q in T.unroll(PAGE // 4):
                arena[_p_word(P0_OFF, r0 + 8 * (q % 2), q // 2, lane)] = pa[q]
            T.ptx.fence.proxy.async_.shared__cta()  # P0 stores -> warpgroup 1's wgmma
            T.ptx.bar.arrive(T.uint32(P0_READY), T.uint32(256))
            if has_b:
                # O0 on warpgroup 1's max, += P_b V_b (the P1 tile)
                if seqlen - (blk + 1) * PAGE < PAGE:
                    pages.zero_tail_half(1, 0, seqlen - (blk + 1) * PAGE, t, WG_BAR)
                T.ptx.bar.sync(T.uint32(PV1_ISSUED), T.uint32(256))
                _rescale_rows(acc_o, lsum, scales, BM, r0)
                dsl.fence_registers(acc_o, 128)
                dsl.wgmma_fence()
                _pv_shared(mma_o, acc_o, dp1, dv_b)
                dsl.wgmma_commit()
                if blk + 2 < hi:
                    # S of page a + 2: tiles 0-3, then page b + 2's tiles 0-3 once P_b V_b
                    # is done, then tiles 4-8
                    page_scores(0, base, rq8, acc_s, pages, (LEFT,))
                    if blk + 3 < hi:
                        dsl.wgmma_wait(1)
                        if t == 0:
                            pages.issue(KC, BT, NT, req, blk + 3, 1, LEFT)
                    page_scores(0, base, rq8, acc_s, pages, (RIGHT,), fresh=False)
                    dsl.wgmma_wait(0)
                dsl.wgmma_wait(0)
        else:
            # softmax of page b on top of page a's max (masked whole without a page b)
            T.ptx.bar.sync(T.uint32(SCALE0), T.uint32(256))
            entry = T.if_then_else(has_b, BT[req, T.min(blk + 1, hi - 1)], T.int32(-1))
            _scale_scores(acc_s, (blk + 1) * PAGE, entry, NT, lim, c0, scale_log2)
            _fold_max(acc_s, acc_o, lsum, rowmax, scales, 1, r0, lane)
            T.ptx.bar.arrive(T.uint32(SCALE1), T.uint32(256))
            if has_b:
                # P_b into the P1 tile; O1 += P_b V_b (P from registers)
                for q in T.unroll(PAGE // 4):
                    cvt(pa[q], acc_s[2 * q + 1], acc_s[2 * q])
                    arena[_p_word(P1_OFF, r0 + 8 * (q % 2), q // 2, lane)] = pa[q]
                if seqlen - (blk + 1) * PAGE < PAGE:
                    pages.zero_tail_half(1, 1, seqlen - (blk + 1) * PAGE, t, WG_BAR + 1)
                _fence_operands(acc_o, pa)
                dsl.wgmma_fence()
                _pv(mma_o, acc_o, pa, dv_b)
                dsl.wgmma_commit()
                T.ptx.fence.proxy.async_.shared__cta()  # P1 stores -> warpgroup 0's wgmma
                # O1 += P_a V_a (the P0 tile; page a is whole: page b follows it)
                T.ptx.bar.sync(T.uint32(P0_READY), T.uint32(256))
                dsl.fence_registers(acc_o, 128)
                dsl.wgmma_fence()
                _pv_shared(mma_o, acc_o, dp0, dv_a)
                dsl.wgmma_commit()
                T.ptx.bar.arrive(T.uint32(PV1_ISSUED), T.uint32(256))
                # page b's tiles 4-8 are free once P_b V_b is done, page a's once P_a V_a is
                dsl.wgmma_wait(1)
                if T.And(t == 0, blk + 3 < hi):
                    pages.issue(KC, BT, NT, req, blk + 3, 1, RIGHT)
                dsl.wgmma_wait(0)
                if T.And(t == 0, blk + 2 < hi):
                    pages.issue(KC, BT, NT, req, blk + 2, 0, RIGHT)
                if blk + 3 < hi:
                    # S of page b + 2: tiles 4-8 (issued above), then 0-3 (by warpgroup 0)
                    page_scores(1, base, rq8, acc_s, pages, (RIGHT, LEFT))
                    dsl.wgmma_wait(0)
                dsl.wgmma_wait(0)
            else:
                # O1 += P_a V_a (the P0 tile): the request's last page
                T.ptx.bar.sync(T.uint32(P0_READY), T.uint32(256))
                if seqlen - blk * PAGE < PAGE:
                    pages.zero_tail_half(0, 1, seqlen - blk * PAGE, t, WG_BAR + 1)
                dsl.fence_registers(acc_o, 128)
                dsl.wgmma_fence()
                _pv_shared(mma_o, acc_o, dp0, dv_a)
                dsl.wgmma_commit()
                dsl.wgmma_wait(0)
        dsl.fence_registers(acc_s, PAGE // 2)
        _fence_operands(acc_o, pa)

    @T.inline
    def request_end(thread, rows, tiles):
        """l = the two warpgroups' row sums (reduced over each quad first); m = sM."""
        tid, wg, lane, r0, c0 = thread
        m, lsum, corr, lim, acc_o = rows
        arena, xch, rowmax, scales, acc_s, pa, rq8, pages, loaded = tiles
        for h in T.unroll(2):
            lsum[h] = T.cuda.warp_sum(lsum[h], 4)
        add_other_half(lsum, xch, wg, lane, r0)
        for h in T.unroll(2):
            m[h] = rowmax[r0 + 8 * h]

    return split_kv_kernel(
        "mla_decode_v5",
        dtype,
        h_q,
        s_q,
        causal,
        SMEM,
        alloc_tiles,
        pair_step,
        request_end,
        request_start,
        blocks_per_step=2,
        request_prefetch=request_prefetch if prefetch else None,
        timeline=timeline,
        staging=TILE_BYTES if staged_stores else None,  # the two pages, after Q
        q_ahead=q_load if early_q else None,
    )


def _loaded_flag(prefetch):
    """``prefetch``: local int32[1], 1 while the next request's loads are issued ahead (None
    otherwise)."""
    if not prefetch:
        return None
    return T.bind_(T.alloc_local((1,), "int32"))


def _p_word(offset, row, chunk, lane):
    """The 32-bit word of a 64 x 64 K-major 128B-swizzled 16-bit tile at byte ``offset`` that
    holds A-fragment pair ``(row, 8 chunk + 2 (lane % 4))`` (the accumulator layout)."""
    byte = row * 128 + T.bitwise_xor(chunk, row % 8) * 16 + 4 * (lane % 4)
    return (offset + byte) // 4


def _s_tile(op, acc, rq8, dq, dk, tile, accumulate):
    """acc (64 x 64) += Q K^T over the 64 dims of ``tile`` (4 k16 steps): Q from shared
    memory, or tile 8 from registers (``rq8``, four A fragments per step)."""
    for s in range(4):
        step = T.uint64(_S_STEPS[4 * tile + s] >> 4)
        if tile < 8:
            _mma_ss(op, acc, PAGE // 2, dq + step, dk + step, accumulate or s > 0)
        else:
            a = [rq8[4 * s + i] for i in range(4)]
            op(*[acc[i] for i in range(PAGE // 2)], *a, dk + step, T.ptx.pred(True), 1, 1, 0)


def _fence_operands(acc_o, pa):
    """Compiler fences on O and the P fragments (:func:`dsl.fence_registers`)."""
    dsl.fence_registers(acc_o, 128)
    dsl.fence_registers(pa, PAGE // 4)


def _pv_shared(op, acc, dp, dv):
    """acc (64 x 256) += P V: 4 k16 wgmmas, A = a P tile in shared memory (K-major, 32 bytes
    per step), B = V MN-major (16 tokens, 2 KiB per step)."""
    for kk in range(PAGE // 16):
        _mma_sv(op, acc, dp + T.uint64((kk * 32) >> 4), dv + T.uint64((kk * 16 * 128) >> 4))


@T.inline
def _fold_max(acc_s, acc_o, lsum, rowmax, scales, wg, r0, lane):
    """Fold this warpgroup's masked scores (log2 units) into the running max ``sM``:
    ``sScale_wg`` = exp2(old - new), S -> P = exp2(S - new), O and the row sums rescaled by
    it (warpgroup 1 also by ``sScale0``, the step warpgroup 0 took before it)."""
    for h in T.unroll(2):
        row = r0 + 8 * h
        mx = T.local_scalar("float32")
        mx = _row_max([acc_s[4 * j + 2 * h + e] for j in range(PAGE // 8) for e in range(2)])
        mx = T.cuda.warp_max(mx, 4)
        old = T.local_scalar("float32")
        old = rowmax[row]
        top = T.max(old, mx)
        sc = T.local_scalar("float32")
        sc = T.exp2(old - top)
        T.cuda.warp_sync()  # every lane of the quad has read sM before it changes
        if lane % 4 == 0:
            rowmax[row] = top
            scales[wg * BM + row] = sc
        if T.constexpr(wg == 1):
            sc = sc * scales[row]
        rs = T.local_scalar("float32")
        rs = T.float32(0)
        for j in T.unroll(PAGE // 8):
            for e in T.unroll(2):
                acc_s[4 * j + 2 * h + e] = T.exp2(acc_s[4 * j + 2 * h + e] - top)
                rs = rs + acc_s[4 * j + 2 * h + e]
        for j in T.unroll(32):
            for e in T.unroll(2):
                acc_o[4 * j + 2 * h + e] = acc_o[4 * j + 2 * h + e] * sc
        lsum[h] = lsum[h] * sc + rs


@T.inline
def _scale_scores(acc_s, first_token, entry, NT, lim, c0, scale_log2):
    """S in log2 units, masked (``MASKED``) past each row's limit and on a page outside the
    cache; a page inside the cache and below both rows' limits (every page but a request's
    last, not causal) skips the per-score mask."""
    if T.And(page_ok(entry, NT), first_token + PAGE <= T.min(lim[0], lim[1])):
        for i in T.unroll(PAGE // 2):
            acc_s[i] = acc_s[i] * scale_log2
    else:
        _mask_scores(acc_s, PAGE, first_token, entry, NT, lim, c0, scale_log2, MASKED)


def _row_max(values):
    """The max of ``values`` as a tree of ``fmaxf`` (scores are never NaN; ``T.max`` keeps
    NaN and costs four instructions a step, in one serial chain)."""
    while len(values) > 1:
        pairs = zip(values[0::2], values[1::2])
        values = [T.call_pure_extern("fmaxf", a, b, ty="float32") for a, b in pairs] + (
            values[-1:] if len(values) % 2 else []
        )
    return values[0]


@T.inline
def _rescale_rows(acc_o, lsum, scales, offset, r0):
    """O and the row sums of this thread's two rows times ``scales[offset + row]``."""
    for h in T.unroll(2):
        sc = T.local_scalar("float32")
        sc = scales[offset + r0 + 8 * h]
        for j in T.unroll(32):
            for e in T.unroll(2):
                acc_o[4 * j + 2 * h + e] = acc_o[4 * j + 2 * h + e] * sc
        lsum[h] = lsum[h] * sc


@T.inline
def add_other_half(lsum, xch, wg, lane, r0):
    """Each warpgroup's row sums (one lane per quad holds a row's) plus the other
    warpgroup's, through the shared ``xch`` (2 x BM floats) and a CTA barrier."""
    for h in T.unroll(2):
        if lane % 4 == 0:
            xch[wg * BM + r0 + 8 * h] = lsum[h]
    T.cuda.cta_sync()
    for h in T.unroll(2):
        lsum[h] = lsum[h] + xch[(1 - wg) * BM + r0 + 8 * h]


@T.inline
def _mma_sv(op, acc, da, db):
    """SS form with B MN-major (transpose bit of B set), A K-major."""
    op(*[acc[i] for i in range(128)], da, db, T.ptx.pred(True), 1, 1, 0, 1)
