# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The "v2" split-KV kernel of dense MLA decode: the two warpgroups share the work of a block.

Port of the work split of FlashMLA's sm90 dense decode
(``csrc/sm90/decode/dense/splitkv_mla.cuh``, ``csrc/sm90/decode/dense/traits.h``: each
consumer warpgroup owns half of the 512 output columns, computes part of ``S = Q K^T`` and
its softmax, and hands its P to the other warpgroup through shared memory, the row max
too), written for the one-page pipeline of the v1 kernel in
:mod:`._mla_decode_tirx` (same grid, metadata walk, cp.async page loads, device-side guards,
epilogue and combine). Upstream gives each warpgroup a whole page of a pair of pages; here
each warpgroup takes 32 of the 64 tokens of the current page, so one page in flight still
overlaps the next load (v1 duplicates the whole ``S`` in both warpgroups instead).

Per 64-token block, warpgroup ``w``:

1. ``S_w = Q K[32w : 32w + 32]^T`` (64 x 32, 36 ``wgmma m64n32k16``, both K-major).
2. Mask, scale (log2 units), row max over its 32 columns; the two row maxima meet in shared
   memory (one CTA barrier), so both warpgroups hold the same running max ``m``.
3. ``P_w = exp2(S_w - m)``; each warpgroup keeps its own partial row sum (both rescaled by the
   same factor, added in the epilogue); ``O_w`` rescaled.
4. ``P_w`` rounded to the dtype goes to a 64 x 64 K-major 128B-swizzled P tile in shared
   memory (columns ``32w .. 32w + 31``); ``fence.proxy.async`` + CTA barrier.
5. ``O_w (64 x 256) += P V[:, 256w : 256w + 256]``: the two k16 steps of its own tokens with P
   from registers (RS), the two of the other warpgroup's tokens with P from the shared tile
   (SS); V is the K tile read MN-major, as v1.

"v4" (``make_decode_v4``) loads the pages by TMA (:mod:`._mla_pages_tma_tirx`): the next
page is issued by one thread after the block's first CTA barrier and before the wait on
this page's mbarrier, so two pages are in flight during the wait with no extra barrier.

Shared memory: Q (72 KiB) + 2 KV stages (144 KiB) + the P tile (8 KiB), dynamic; row maxima
and partial sums (512 B; ptxas reserves 1 KiB) static: 225 KiB of the 227 KiB an sm_90 CTA
may use.
"""

from __future__ import annotations

import functools

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.toolchain import T

from ._mla_decode_tirx import (
    _DESC_K,
    _DESC_V,
    _V_HALF,
    BM,
    PAGE,
    STAGES,
    TILE_BYTES,
    _load_page,
    _load_q,
    _mask_scores,
    _mma_rs,
    _qk,
    _row_maxima,
    _softmax_step,
    check_static,
    split_kv_kernel,
    wgmma_ops,
)
from ._mla_pages_tma_tirx import TmaPages

P_OFF = TILE_BYTES * (1 + STAGES)  # the P tile, after Q and the KV stages (1 KiB aligned)
P_BYTES = BM * PAGE * 2
SMEM = P_OFF + P_BYTES
HALF_N = PAGE // 2  # tokens of S per warpgroup
HALF_BYTES = HALF_N * 128  # byte offset of token row 32 within each 64-row atom block


@functools.cache
def make_decode(dtype="bfloat16", h_q=128, s_q=1, causal=False):
    """v2 split-KV decode PrimFunc for one (dtype, h_q, s_q, causal); the same signature and
    outputs as :func:`._mla_decode_tirx.make_decode`."""
    return _make(dtype, h_q, s_q, causal, pages="cp_async")


@functools.cache
def make_decode_v4(dtype="bfloat16", h_q=128, s_q=1, causal=False):
    """v4: v2 with the KV pages loaded by TMA (:mod:`._mla_pages_tma_tirx`), the next page
    issued by one thread before waiting for the current one on its mbarrier."""
    return _make(dtype, h_q, s_q, causal, pages="tma")


def _make(dtype, h_q, s_q, causal, pages):
    check_static(dtype, h_q, s_q)
    tma = pages == "tma"
    cvt, mma_s, mma_o = wgmma_ops(dtype, HALF_N)

    @T.inline
    def alloc_tiles():
        arena = T.alloc_shared((SMEM // 4,), "uint32", scope="shared.dyn", align=1024)
        xch = T.alloc_shared((2 * BM,), "float32")  # row maxima, then partial sums, per warpgroup
        base = dsl.smem_addr(arena)
        acc_s = T.alloc_local((HALF_N // 2,), "float32")
        acc_o = T.alloc_local((128,), "float32")
        pa = T.alloc_local((HALF_N // 4,), "uint32")
        loads = TmaPages(arena, dtype) if tma else None  # an expression: no new scope
        if T.constexpr(tma):
            loads.init(T.cuda.thread_idx("x"))
        return base, acc_o, (arena, xch, acc_s, pa, loads)

    @T.inline
    def tma_request_start(Q, KC, BT, NT, req, lo, hi, mt, seqlen, base, tid, R, tiles):
        """Q by cp.async, landed and fenced here (the first block's CTA barrier publishes
        it; that block issues the request's first two pages)."""
        _load_q(Q, req, mt, base, tid, R)
        T.ptx.cp.async_.commit_group()
        T.ptx["cp.async.wait_group"](0)
        T.ptx.fence.proxy.async_.shared__cta()  # cp.async writes -> wgmma reads

    @T.inline
    def block_step(
        KC, BT, NT, scale_log2, req, blk, lo, hi, seqlen, stage, thread, rows, base, tiles
    ):
        tid, wg, lane, r0, c0 = thread
        m, lsum, corr, lim, acc_o = rows
        arena, xch, acc_s, pa, loads = tiles
        nxt = base + T.cast(TILE_BYTES * (1 + (1 - stage)), "uint32")
        if T.constexpr(tma):
            # the other stage is free once both warpgroups' P V of the previous block is
            # done (barrier): its next page goes out before this one is waited for (the
            # first block of a request issues its own page too; one issue site, as TIRx
            # declares a TMA box's descriptor where it is first used)
            T.cuda.cta_sync()
            if tid == 0:
                for nb in T.serial(T.if_then_else(blk == lo, blk, blk + 1), T.min(blk + 2, hi)):
                    loads.issue(KC, BT, NT, req, nb, (nb - lo) % STAGES)
            loads.wait(stage)
            if seqlen - blk * PAGE < PAGE:
                loads.zero_tail(stage, seqlen - blk * PAGE, tid)
        else:
            T.ptx["cp.async.wait_group"](0)
            T.ptx.fence.proxy.async_.shared__cta()  # cp.async writes -> wgmma reads
            T.cuda.cta_sync()
            if blk + 1 < hi:
                _load_page(KC, BT, req, blk + 1, seqlen, NT, nxt, tid)
                T.ptx.cp.async_.commit_group()
        kaddr = base + T.cast(TILE_BYTES * (1 + stage), "uint32")
        # 1. S_w = Q K[32w : 32w + 32]^T (64 x 32)
        dq = dsl.descriptor(_DESC_K, base)
        dk = dsl.descriptor(_DESC_K, kaddr + T.cast(wg * HALF_BYTES, "uint32"))
        dsl.wgmma_fence()
        _qk(mma_s, acc_s, HALF_N // 2, dq, dk)
        dsl.wgmma_commit()
        dsl.wgmma_wait(0)
        # 2. mask (token limit, bad pages), scale, row max shared with the other half
        _mask_scores(acc_s, HALF_N, blk * PAGE + wg * HALF_N, BT[req, blk], NT, lim, c0, scale_log2)
        half_max = functools.partial(_share_half_max, corr, xch, wg, lane, r0)
        _row_maxima(acc_s, HALF_N, m, half_max)
        T.cuda.cta_sync()
        # 3. P_w = exp2(S_w - m), partial row sums, O rescaled
        for h in T.unroll(2):
            mx = T.local_scalar("float32")
            mx = T.max(corr[h], xch[(1 - wg) * BM + r0 + 8 * h])
            _softmax_step(acc_s, HALF_N, m, lsum, corr, h, mx)
        for i in T.unroll(128):
            acc_o[i] = acc_o[i] * corr[(i // 2) % 2]
        # 4. P_w as A fragments (a_coord) and into the shared P tile (K-major, 128B)
        for q in T.unroll(HALF_N // 4):
            cvt(pa[q], acc_s[2 * q + 1], acc_s[2 * q])
            prow = r0 + 8 * (q % 2)
            chunk = wg * (HALF_N // 8) + q // 2  # 16-byte column chunk of the row
            byte = prow * 128 + T.bitwise_xor(chunk, prow % 8) * 16 + c0 * 2
            arena[(P_OFF + byte) // 4] = pa[q]
        T.ptx.fence.proxy.async_.shared__cta()  # P stores -> the other's wgmma reads
        T.cuda.cta_sync()
        # 5. O_w += P V[:, half w]: own tokens from registers, the other's from smem
        dv = dsl.descriptor(_DESC_V, kaddr + T.cast(wg * _V_HALF, "uint32"))
        dp = dsl.descriptor(_DESC_K, base + T.uint32(P_OFF))
        dsl.wgmma_fence()
        _pv_split(mma_o, acc_o, pa, dv, dp, wg)
        dsl.wgmma_commit()
        dsl.wgmma_wait(0)

    @T.inline
    def request_end(thread, rows, tiles):
        """l = the two halves' partial sums, before the epilogue (O / l and lse)."""
        tid, wg, lane, r0, c0 = thread
        m, lsum, corr, lim, acc_o = rows
        arena, xch, acc_s, pa, loads = tiles
        add_other_half(lsum, xch, wg, lane, r0)

    return split_kv_kernel(
        "mla_decode_v2",
        dtype,
        h_q,
        s_q,
        causal,
        SMEM,
        alloc_tiles,
        block_step,
        request_end,
        tma_request_start if tma else None,
    )


@T.inline
def _share_half_max(corr, xch, wg, lane, r0, h, mx):
    """Keep this half's row max ``mx`` in ``corr[h]`` until the other half's is known, and
    hand it to the other warpgroup through ``xch``."""
    corr[h] = mx
    if lane % 4 == 0:
        xch[wg * BM + r0 + 8 * h] = mx


def _pv_split(op, acc, pa, dv, dp, wg):
    """acc (64 x 256) += P V: k16 steps ``2w, 2w + 1`` (this warpgroup's tokens) with A = P
    from registers, steps ``2(1 - w), 2(1 - w) + 1`` with A = the shared P tile (K-major,
    32 bytes per k16 step); B = V MN-major, 2 KiB per k16 step (16 tokens)."""
    own = wg * 2
    other = (1 - wg) * 2
    for i in range(2):
        kk = own + i
        _mma_rs(op, acc, pa, 4 * i, dv + T.cast((kk * 16 * 128) >> 4, "uint64"))
    for i in range(2):
        kk = other + i
        _mma_sv(
            op,
            acc,
            dp + T.cast((kk * 32) >> 4, "uint64"),
            dv + T.cast((kk * 16 * 128) >> 4, "uint64"),
        )


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
