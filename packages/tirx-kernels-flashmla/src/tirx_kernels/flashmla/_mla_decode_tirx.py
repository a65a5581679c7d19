# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The first sm_90a split-KV kernel of dense MLA decode ("v1") and what the later ones share.

Port of FlashMLA's dense decode (``csrc/sm90/decode/dense/splitkv_mla.cuh``, ``traits.h``),
re-expressed in TIRx with a simpler schedule (docs/mla_decode.md); the split combine is in
:mod:`._mla_combine_tirx`.

``make_decode`` -- one CTA per (scheduler part ``p``, 64-row tile ``mt`` of the
``R = s_q * h_q`` query rows of a request), 256 threads = 2 warpgroups. Part ``p`` walks the
requests and 64-token blocks that ``META[p]`` assigns to it (FlashMLA's tile-scheduler
metadata, :mod:`._mla_decode_schedule`); for each request it loads the 64 x 576 Q tile and
the KV pages through the block table with 16-byte ``cp.async`` into 128B-swizzled shared
tiles (two KV stages: the next page loads while the current one is computed; rows past
``cache_seqlens`` are zero-filled, never read). Both
warpgroups compute the same ``S = Q K^T`` (64 x 64, ``wgmma m64n64k16``, 36 k-steps over
d = 576, both operands K-major), mask tokens past ``cache_seqlens`` (and the causal
diagonal), run the online softmax in fp32 registers (log2 domain, quad shuffles), and each
accumulates half of ``O = P V`` (64 x 256 fp32 per warpgroup) with ``wgmma m64n256k16`` whose
A (P, bf16/fp16) comes from registers and whose B is the same shared K tile read
MN-major (V = K[:, :512]: the transpose bit, LBO = 8 KiB between 64-column atoms,
SBO = 1 KiB between 8-token groups). Each (request, split) writes ``O / l`` in fp32 and
``lse = ln(sum exp)`` of its rows to ``OACC[split]`` / ``LACC[split]``; a request of one
split writes ``out`` and ``lse`` itself (``csrc/sm90/decode/dense/splitkv_mla.cuh``'s
``is_no_split`` path).
"""

from __future__ import annotations

import functools
import math

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.timeline import NoTimeline, Timeline
from tirx_kernels.core.sm90.wgmma import kmajor_descriptor_base, kstep_offset, matrix_descriptor
from tirx_kernels.core.toolchain import T

D_QK, D_V, PAGE = 576, 512, 64
BM = 64  # query rows per CTA (one wgmma M)
THREADS = 256
TILE_BYTES = BM * D_QK * 2  # one 64 x 576 16-bit tile (Q, or one KV page)
STAGES = 2
SMEM = TILE_BYTES * (1 + STAGES)
CHUNKS = D_QK * 2 // 16  # 16-byte chunks per row (72)
LOADS = BM * CHUNKS // THREADS  # cp.async per thread per tile (18)
META_INTS = 8
# a timeline build's events (core.sm90.timeline; scripts/mla_timeline.py reads them): a whole
# request, its start (metadata, Q and first pages issued), each block step, what comes
# before its epilogue, and the epilogue's stores (with v7's loads of the next request)
REQUEST, START, STEP, END, STORE = range(5)
EVENTS = {REQUEST: "request", START: "start", STEP: "step", END: "end", STORE: "store"}
DTYPES = ("bfloat16", "float16")
_AB = {"bfloat16": "bf16", "float16": "f16"}
_CVT = {"bfloat16": "bf16x2", "float16": "f16x2"}
LOG2E = math.log2(math.e)
LN2 = math.log(2.0)

# Descriptors (128B swizzle, the tile format of tirx_kernels.core.sm90.layouts: nine 64-column
# atom blocks of 64 rows x 128 B, 8 KiB each).
_MODE = Swizzle.B128
_DESC_K = kmajor_descriptor_base(_MODE, BM)  # Q (A) and K (B) of S = Q K^T, K-major
_S_STEPS = [kstep_offset(k, rows=BM, elem_bytes=2, mode=_MODE) for k in range(D_QK // 16)]
# V (B of O = P V) read MN-major from the K tile: N atoms (64 dims) 8 KiB apart (LBO),
# 8-token K groups 1 KiB apart (SBO); a k16 step is 16 tokens = 2 KiB.
_DESC_V = matrix_descriptor(0, BM * 128, 1024, _MODE)
_V_HALF = 4 * BM * 128  # byte offset of dims 256..511 (four atom blocks)


def check_static(dtype, h_q, s_q):
    if dtype not in DTYPES:
        raise ValueError(f"flash_mla: dtype must be one of {list(DTYPES)}, got {dtype!r}")
    if not (isinstance(h_q, int) and h_q >= 1 and isinstance(s_q, int) and s_q >= 1):
        raise ValueError(f"flash_mla: h_q and s_q must be positive ints, got {h_q!r}, {s_q!r}")


@functools.cache
def make_decode(dtype="bfloat16", h_q=128, s_q=1, causal=False):
    """Split-KV decode PrimFunc for one (dtype, h_q, s_q, causal); batch, page count, table
    width, scheduler parts and split count are dynamic; the softmax scale is an argument."""
    check_static(dtype, h_q, s_q)
    cvt, mma_s, mma_o = wgmma_ops(dtype, BM)

    @T.inline
    def alloc_tiles():
        arena = T.alloc_shared((SMEM // 2,), dtype, scope="shared.dyn", align=1024)
        base = dsl.smem_addr(arena)
        acc_s = T.alloc_local((BM // 2,), "float32")
        acc_o = T.alloc_local((128,), "float32")
        pa = T.alloc_local((BM // 4,), "uint32")
        return base, acc_o, (acc_s, pa)

    @T.inline
    def block_step(
        KC, BT, NT, scale_log2, req, blk, lo, hi, seqlen, stage, thread, rows, base, tiles
    ):
        tid, wg, lane, r0, c0 = thread
        m, lsum, corr, lim, acc_o = rows
        acc_s, pa = tiles
        T.ptx["cp.async.wait_group"](0)
        T.ptx.fence.proxy.async_.shared__cta()  # cp.async writes -> wgmma reads
        T.cuda.cta_sync()
        if blk + 1 < hi:
            nxt = base + T.cast(TILE_BYTES * (1 + (1 - stage)), "uint32")
            _load_page(KC, BT, req, blk + 1, seqlen, NT, nxt, tid)
            T.ptx.cp.async_.commit_group()
        kaddr = base + T.cast(TILE_BYTES * (1 + stage), "uint32")
        # S = Q K^T (64 x 64), both warpgroups
        dq = dsl.descriptor(_DESC_K, base)
        dk = dsl.descriptor(_DESC_K, kaddr)
        dsl.wgmma_fence()
        _qk(mma_s, acc_s, BM // 2, dq, dk)
        dsl.wgmma_commit()
        dsl.wgmma_wait(0)
        # mask (tokens past the limit, pages outside the cache), online softmax (log2)
        _mask_scores(acc_s, BM, blk * PAGE, BT[req, blk], NT, lim, c0, scale_log2)
        _row_maxima(acc_s, BM, m, functools.partial(_softmax_step, acc_s, BM, m, lsum, corr))
        for i in T.unroll(128):
            acc_o[i] = acc_o[i] * corr[(i // 2) % 2]
        # P as the A fragments of 4 k16 steps: the accumulator layout (a_coord)
        for q in T.unroll(BM // 4):
            cvt(pa[q], acc_s[2 * q + 1], acc_s[2 * q])
        dv = dsl.descriptor(_DESC_V, kaddr + T.cast(wg * _V_HALF, "uint32"))
        dsl.wgmma_fence()
        _pv(mma_o, acc_o, pa, dv)
        dsl.wgmma_commit()
        dsl.wgmma_wait(0)

    return split_kv_kernel(
        "mla_decode", dtype, h_q, s_q, causal, SMEM, alloc_tiles, block_step, _no_request_end
    )


def split_kv_kernel(
    name,
    dtype,
    h_q,
    s_q,
    causal,
    smem,
    alloc_tiles,
    block_step,
    request_end,
    request_start=None,
    blocks_per_step=1,
    request_prefetch=None,
    timeline=False,
    staging=None,
    q_ahead=None,
):
    """The split-KV decode PrimFunc ``name`` (``smem`` bytes of dynamic shared memory): what
    every variant shares -- the signature (batch, page count, table width, scheduler parts
    and split count dynamic; the softmax scale an argument), the grid, the walk over the
    requests and blocks ``META[part]`` assigns (clamped: device-side guards), the online
    softmax state of a thread's two rows, the start of a request (Q and its first page in
    flight) and the epilogue. The variant's ``T.inline`` helpers emit the rest:
    ``alloc_tiles()`` -> ``(base, acc_o, tiles)`` (the shared arena's address, the O
    accumulator and its own buffers), ``block_step(...)`` one 64-token block (the wait for
    its page, the next page's load, S, softmax, P V; ``blocks_per_step`` blocks from ``blk``
    when more than one), ``request_end(thread, rows, tiles)`` what comes before a request's
    epilogue and ``request_start(Q, KC, BT, NT, req, lo, hi, mt, seqlen, base, tid, R,
    tiles)`` the loads of Q and the first page of a request with blocks (default:
    :func:`cp_async_request_start`) and, if given, ``request_prefetch(Q, KC, BT, NT, req, lo,
    hi, mt, base, tid, R, tiles)`` those loads of the next request (when it has blocks),
    issued after ``request_end`` and a CTA barrier, before the epilogue's stores. With
    ``timeline``, the profiling build ``name + "_timeline"``: one more argument, the uint64
    buffer where thread 0 of each warpgroup marks the :data:`EVENTS`. ``staging``: the byte
    offset in the arena of :data:`STAGING_BYTES` that the epilogue may reuse, to store
    through shared memory by bulk copies (:func:`_store_staged`, before the next request's
    loads), else each thread stores its registers directly. ``q_ahead(Q, req, mt, base, tid,
    R, tiles)``, with ``staging``: the next request's Q load (when it has blocks), issued
    before the staged stores, as upstream orders them (Q's space is free once the last S is
    done; the pages' only after the staging is read), ``request_prefetch`` the rest."""
    if q_ahead is not None and staging is None:
        raise ValueError("q_ahead needs a staged epilogue (staging)")
    request_start = request_start or cp_async_request_start
    causal = bool(causal) and s_q > 1
    R = s_q * h_q
    mtiles = -(-R // BM)
    B = T.dynamic("B")
    B1 = T.dynamic("B1")
    NT = T.dynamic("NT", "int64")
    MAXB = T.dynamic("MAXB")
    P = T.dynamic("P")
    TOT = T.dynamic("TOT")
    f32 = "float32"

    @T.inline
    def walk(Q, KC, BT, SEQ, META, NSPL, OACC, LACC, OUT, LSE, scale_log2, marks):
        """The CTA's requests, ``marks`` (a :mod:`~tirx_kernels.core.sm90.timeline` object)
        around each phase of each (EVENTS)."""
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        t = tid % 128
        lane = tid % 32
        part = T.cuda.block_idx("x")
        mt = T.cuda.block_idx("y")
        base, acc_o, tiles = alloc_tiles()
        marks.init()
        m = T.alloc_local((2,), f32)
        lsum = T.alloc_local((2,), f32)
        corr = T.alloc_local((2,), f32)
        lim = T.alloc_local((2,), "int32")
        # this thread's two accumulator rows (acc_coord): r0 and r0 + 8 of the CTA's 64
        r0 = 16 * (t // 32) + lane // 4
        c0 = 2 * (lane % 4)
        begin_req = META[part, 0]
        end_req = META[part, 1]
        # device-side guards (no host check of values): requests clamped to [0, B), blocks to
        # the block table's width, splits to the accumulators (see _load_page for pages)
        last_req = T.min(end_req, B - 1)
        for req in T.serial(T.max(begin_req, 0), last_req + 1):
            marks.begin(REQUEST)
            marks.begin(START)
            seqlen, lo, hi, split = _request_blocks(
                SEQ, META, NSPL, MAXB, part, req, begin_req, end_req
            )
            _reset_rows(m, lsum, lim, acc_o, mt, r0, seqlen, R, s_q, h_q, causal)
            T.cuda.cta_sync()  # the previous request's wgmmas (and exchanges) are done
            if lo < hi:
                request_start(Q, KC, BT, NT, req, lo, hi, mt, seqlen, base, tid, R, tiles)
            marks.end(START)
            for it in T.serial((T.max(hi - lo, 0) + blocks_per_step - 1) // blocks_per_step):
                blk = lo + it * blocks_per_step
                stage = (blk - lo) % STAGES
                marks.begin(STEP)
                block_step(
                    KC,
                    BT,
                    NT,
                    scale_log2,
                    req,
                    blk,
                    lo,
                    hi,
                    seqlen,
                    stage,
                    (tid, wg, lane, r0, c0),
                    (m, lsum, corr, lim, acc_o),
                    base,
                    tiles,
                )
                marks.end(STEP)
            marks.begin(END)
            request_end((tid, wg, lane, r0, c0), (m, lsum, corr, lim, acc_o), tiles)
            marks.end(END)
            marks.begin(STORE)
            if T.constexpr(staging is not None):
                T.cuda.cta_sync()  # every P V is done reading the pages the staging reuses
                if T.constexpr(q_ahead is not None):
                    if req < last_req:
                        n_seqlen, n_lo, n_hi, n_split = _request_blocks(
                            SEQ, META, NSPL, MAXB, part, req + 1, begin_req, end_req
                        )
                        if n_lo < n_hi:
                            q_ahead(Q, req + 1, mt, base, tid, R, tiles)
                _store_staged(
                    (OACC, LACC, OUT, LSE),
                    (m, lsum, acc_o),
                    (tid, wg, lane, r0, c0),
                    (req, split, mt, TOT),
                    R,
                    NSPL[req + 1] - NSPL[req] == 1,
                    base + T.uint32(staging),
                )
            if T.constexpr(request_prefetch is not None):
                # the next request's loads overlap this one's stores (shared memory is free;
                # a staged epilogue has already waited for its copies to read it)
                if T.constexpr(staging is None):
                    T.cuda.cta_sync()
                if req < last_req:
                    n_seqlen, n_lo, n_hi, n_split = _request_blocks(
                        SEQ, META, NSPL, MAXB, part, req + 1, begin_req, end_req
                    )
                    if n_lo < n_hi:
                        request_prefetch(
                            Q, KC, BT, NT, req + 1, n_lo, n_hi, mt, base, tid, R, tiles
                        )
            # epilogue: O / l and lse of this (request, split), or of the request itself
            # when it has only this split (upstream's is_no_split: the combine skips it)
            if T.constexpr(staging is None):
                unsplit = NSPL[req + 1] - NSPL[req] == 1
                _store_split(
                    OACC,
                    LACC,
                    acc_o,
                    m,
                    lsum,
                    split,
                    mt,
                    r0,
                    c0,
                    wg,
                    lane,
                    R,
                    TOT,
                    unsplit,
                )
                _store_request(OUT, LSE, acc_o, m, lsum, req, mt, r0, c0, wg, lane, R, unsplit)
            marks.end(STORE)
            marks.end(REQUEST)

    @T.function
    def mla_decode(
        Q: T.Tensor((B, R, D_QK), dtype, align=16),
        KC: T.Tensor((NT, D_QK), dtype, align=16),
        BT: T.Tensor((B, MAXB), "int32", align=4),
        SEQ: T.Tensor((B,), "int32", align=4),
        META: T.Tensor((P, META_INTS), "int32", align=4),
        NSPL: T.Tensor((B1,), "int32", align=4),
        OACC: T.Tensor((TOT, R, D_V), f32),
        LACC: T.Tensor((TOT, R), f32),
        OUT: T.Tensor((B, R, D_V), dtype),
        LSE: T.Tensor((B, R), f32),
        scale_log2: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=(P, mtiles), block=THREADS, dynamic_smem_bytes=smem),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )
        walk(Q, KC, BT, SEQ, META, NSPL, OACC, LACC, OUT, LSE, scale_log2, NoTimeline())

    if timeline:  # a PrimFunc has no optional parameter: the signature again, plus the buffer
        W = T.dynamic("W", "int64")

        @T.function
        def mla_decode_timeline(
            Q: T.Tensor((B, R, D_QK), dtype, align=16),
            KC: T.Tensor((NT, D_QK), dtype, align=16),
            BT: T.Tensor((B, MAXB), "int32", align=4),
            SEQ: T.Tensor((B,), "int32", align=4),
            META: T.Tensor((P, META_INTS), "int32", align=4),
            NSPL: T.Tensor((B1,), "int32", align=4),
            OACC: T.Tensor((TOT, R, D_V), f32),
            LACC: T.Tensor((TOT, R), f32),
            OUT: T.Tensor((B, R, D_V), dtype),
            LSE: T.Tensor((B, R), f32),
            scale_log2: T.float32,
            TIMELINE: T.Tensor((W,), "uint64"),
        ):
            T.func_attr({"tirx.noalias": True})
            T.device_entry(
                launch=T.cuda.LaunchConfig(
                    grid=(P, mtiles), block=THREADS, dynamic_smem_bytes=smem
                ),
                kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
            )
            tid = T.cuda.thread_idx("x")
            marks = Timeline(TIMELINE, W, P * mtiles, 2, tid // 128, tid % 128 == 0)
            walk(Q, KC, BT, SEQ, META, NSPL, OACC, LACC, OUT, LSE, scale_log2, marks)

        return mla_decode_timeline.with_attr("global_symbol", name + "_timeline")
    return mla_decode.with_attr("global_symbol", name)


@T.inline
def _no_request_end(thread, rows, tiles):
    """v1 has nothing to do before a request's epilogue."""


@T.inline
def cp_async_request_start(Q, KC, BT, NT, req, lo, hi, mt, seqlen, base, tid, R, tiles):
    """Q and the request's first page into stage 0, one cp.async group (waited for by the
    first block)."""
    _load_q(Q, req, mt, base, tid, R)
    _load_page(KC, BT, req, lo, seqlen, NT, base + T.uint32(TILE_BYTES), tid)
    T.ptx.cp.async_.commit_group()


def _qk(op, acc, acc_len, dq, dk):
    """acc (64 x n, ``acc_len`` = n / 2 per thread) = Q K^T over d = 576: 36 k16 wgmmas, SS,
    both K-major (Python-unrolled)."""
    for k in range(D_QK // 16):
        step = T.uint64(_S_STEPS[k] >> 4)
        _mma_ss(op, acc, acc_len, dq + step, dk + step, k > 0)


@T.inline
def _mma_ss(op, acc, acc_len, da, db, accumulate):
    op(*[acc[i] for i in range(acc_len)], da, db, T.ptx.pred(accumulate), 1, 1, 0, 0)


def _pv(op, acc, pa, dv):
    """acc (64 x 256) += P V: 4 k16 wgmmas, A = P from registers, B = V MN-major."""
    for kk in range(BM // 16):
        _mma_rs(op, acc, pa, 4 * kk, dv + T.uint64((kk * 16 * 128) >> 4))


@T.inline
def _mma_rs(op, acc, pa, q, db):
    op(
        *[acc[i] for i in range(128)],
        pa[q],
        pa[q + 1],
        pa[q + 2],
        pa[q + 3],
        db,
        T.ptx.pred(True),
        1,
        1,
        1,
    )


def wgmma_ops(dtype, s_tokens):
    """(cvt, mma_s, mma_o) of a split-KV kernel: the fp32 -> ``dtype`` pair conversion, the
    wgmma of ``S = Q K^T`` (64 x ``s_tokens``) and the one of ``O += P V`` (64 x 256)."""
    ab = _AB[dtype]
    cvt = getattr(T.ptx.cvt.rn, _CVT[dtype]).f32
    aligned = T.ptx.wgmma.mma_async.sync.aligned
    mma_s = getattr(getattr(getattr(aligned, f"m64n{s_tokens}k16").f32, ab), ab)
    mma_o = getattr(getattr(aligned.m64n256k16.f32, ab), ab)
    return cvt, mma_s, mma_o


@T.inline
def _mask_scores(acc_s, tokens, first_token, entry, NT, lim, c0, scale_log2, masked=-math.inf):
    """This thread's S scores of ``tokens`` columns (the first: token ``first_token``) in log2
    units, ``masked`` past each row's limit ``lim`` and everywhere when the block-table
    ``entry`` of the page is outside the cache (``NT`` rows)."""
    pok = page_ok(entry, NT)
    for h in T.unroll(2):
        for j in T.unroll(tokens // 8):
            for e in T.unroll(2):
                i = 4 * j + 2 * h + e
                tok = first_token + 8 * j + c0 + e
                acc_s[i] = T.if_then_else(
                    T.And(pok, tok < lim[h]),
                    acc_s[i] * scale_log2,
                    T.float32(masked),
                )


@T.inline
def _request_blocks(SEQ, META, NSPL, MAXB, part, req, begin_req, end_req):
    """(seqlen, lo, hi, split) of request ``req`` in scheduler part ``part``: its length, the
    block range ``[lo, hi)`` the part computes and the split it writes; blocks clamped to the
    block table's width (a device-side guard)."""
    seqlen = SEQ[req]
    nblk = T.min((seqlen + PAGE - 1) // PAGE, MAXB)
    lo = T.max(T.if_then_else(req == begin_req, META[part, 2], 0), 0)
    hi = T.min(T.if_then_else(req == end_req, META[part, 3], nblk), nblk)
    split = NSPL[req] + T.if_then_else(req == begin_req, META[part, 4], 0)
    return seqlen, lo, hi, split


@T.inline
def _reset_rows(m, lsum, lim, acc_o, mt, r0, seqlen, R, s_q, h_q, causal):
    """Start the online softmax of this thread's two rows: max -inf, sum 0, O 0, and the
    token limit of each row (``seqlen``, or its causal diagonal)."""
    for h in T.unroll(2):
        m[h] = T.float32(-math.inf)
        lsum[h] = T.float32(0)
        row = T.min(mt * BM + r0 + 8 * h, R - 1)
        if T.constexpr(causal):
            lim[h] = seqlen - s_q + 1 + row // h_q
        else:
            lim[h] = seqlen
    for i in T.unroll(128):
        acc_o[i] = T.float32(0)


@T.inline
def _row_maxima(acc_s, tokens, m, new_max):
    """For each row half ``h`` of this thread: the running max ``mx`` of ``m[h]`` and the
    quad's scores of ``tokens`` columns of S, handed to ``new_max(h, mx)``."""
    for h in T.unroll(2):
        mx = T.local_scalar("float32")
        mx = m[h]
        for j in T.unroll(tokens // 8):
            for e in T.unroll(2):
                mx = T.max(mx, acc_s[4 * j + 2 * h + e])
        mx = T.cuda.warp_max(mx, 4)
        new_max(h, mx)


@T.inline
def _softmax_step(acc_s, tokens, m, lsum, corr, h, mx):
    """Row half ``h`` of the online softmax over ``tokens`` columns of S (log2 units) with
    the new running max ``mx``: ``corr[h]`` the rescale of the old sum and O, S -> P =
    exp2(S - mx) in place, ``lsum[h]`` rescaled plus the row sum of P."""
    # a row with nothing valid yet keeps exp2 finite: subtract 0 instead of -inf
    safe = T.if_then_else(mx == T.float32(-math.inf), T.float32(0), mx)
    corr[h] = T.exp2(m[h] - safe)
    m[h] = mx
    rs = T.local_scalar("float32")
    rs = T.float32(0)
    for j in T.unroll(tokens // 8):
        for e in T.unroll(2):
            acc_s[4 * j + 2 * h + e] = T.exp2(acc_s[4 * j + 2 * h + e] - safe)
            rs = rs + acc_s[4 * j + 2 * h + e]
    lsum[h] = lsum[h] * corr[h] + T.cuda.warp_sum(rs, 4)


@T.inline
def _store_split(OACC, LACC, acc_o, m, lsum, split, mt, r0, c0, wg, lane, R, TOT, unsplit):
    """O / l of this thread's rows (its warpgroup's 256 columns) and their lse (natural log)
    into ``OACC[split]`` / ``LACC[split]`` unless the request is ``unsplit``; rows past R and
    splits outside the accumulators are not stored (a device-side guard)."""
    for h in T.unroll(2):
        row = mt * BM + r0 + 8 * h
        if T.And(T.And(row < R, T.Not(unsplit)), T.And(split >= 0, split < TOT)):
            empty = lsum[h] == T.float32(0)
            inv = T.if_then_else(empty, T.float32(0), T.float32(1) / lsum[h])
            for j in T.unroll(32):
                for e in T.unroll(2):
                    OACC[split, row, wg * 256 + 8 * j + c0 + e] = acc_o[4 * j + 2 * h + e] * inv
            if wg == 0:
                if lane % 4 == 0:
                    LACC[split, row] = T.if_then_else(
                        empty,
                        T.float32(-math.inf),
                        m[h] * T.float32(LN2) + T.log(lsum[h]),
                    )


@T.inline
def _store_request(OUT, LSE, acc_o, m, lsum, req, mt, r0, c0, wg, lane, R, unsplit):
    """For an ``unsplit`` request, what the combine makes of one split, written here: O / l
    rounded once to the output dtype and lse (natural log); a row with nothing to attend
    gets 0 and +inf, as from the combine."""
    for h in T.unroll(2):
        row = mt * BM + r0 + 8 * h
        if T.And(row < R, unsplit):
            empty = lsum[h] == T.float32(0)
            inv = T.if_then_else(empty, T.float32(0), T.float32(1) / lsum[h])
            for j in T.unroll(32):
                for e in T.unroll(2):
                    OUT[req, row, wg * 256 + 8 * j + c0 + e] = T.cast(
                        acc_o[4 * j + 2 * h + e] * inv, OUT.dtype
                    )
            if wg == 0:
                if lane % 4 == 0:
                    LSE[req, row] = T.if_then_else(
                        empty,
                        T.float32(math.inf),
                        m[h] * T.float32(LN2) + T.log(lsum[h]),
                    )


# a staged row's stride in shared memory, padded by 8 elements: a warp's stores (8 rows of 4
# threads) fall in distinct banks (upstream pads the fp32 rows the same way)
ACC_ROW_BYTES = (D_V + 8) * 4
OUT_ROW_BYTES = (D_V + 8) * 2
STAGING_BYTES = BM * ACC_ROW_BYTES
assert STAGING_BYTES <= STAGES * TILE_BYTES  # the two pages' bytes hold the staged rows


@T.inline
def _store_staged(outputs, rows, thread, where, R, unsplit, staging):
    """The epilogue of :func:`_store_split` and :func:`_store_request` through shared memory
    (upstream's ``store_o``): each thread writes its O / l (fp32, or rounded to the output
    dtype when ``unsplit``) into the 64 rows staged at shared address ``staging``, then
    one thread per row copies its row to global memory as one bulk copy, and the CTA goes on
    once the copies have read the staging (their writes drain meanwhile). The caller
    ensures no wgmma still reads the staging's bytes (a CTA barrier after the last P V)."""
    OACC, LACC, OUT, LSE = outputs
    m, lsum, acc_o = rows
    tid, wg, lane, r0, c0 = thread
    req, split, mt, TOT = where
    cvt = getattr(T.ptx.cvt.rn, _CVT[str(OUT.ty.dtype.dtype)]).f32
    for h in T.unroll(2):
        row = r0 + 8 * h
        empty = lsum[h] == T.float32(0)
        inv = T.if_then_else(empty, T.float32(0), T.float32(1) / lsum[h])
        for j in T.unroll(32):
            col = wg * 256 + 8 * j + c0
            a = acc_o[4 * j + 2 * h] * inv
            b = acc_o[4 * j + 2 * h + 1] * inv
            if unsplit:
                packed = T.alloc_local((1,), "uint32")
                cvt(packed[0], b, a)
                T.ptx["st.shared.b32"](
                    staging + T.cast(row * OUT_ROW_BYTES + col * 2, "uint32"), packed[0]
                )
            else:
                T.ptx["st.shared.v2.f32"](
                    staging + T.cast(row * ACC_ROW_BYTES + col * 4, "uint32"), a, b
                )
        if wg == 0:
            if lane % 4 == 0:
                if mt * BM + row < R:
                    lse = m[h] * T.float32(LN2) + T.log(lsum[h])
                    if unsplit:
                        LSE[req, mt * BM + row] = T.if_then_else(empty, T.float32(math.inf), lse)
                    elif T.And(split >= 0, split < TOT):
                        LACC[split, mt * BM + row] = T.if_then_else(
                            empty, T.float32(-math.inf), lse
                        )
    T.ptx.fence.proxy.async_.shared__cta()  # generic-proxy writes -> the bulk copies' reads
    T.cuda.cta_sync()
    if tid < BM:
        if mt * BM + tid < R:
            if unsplit:
                dsl.bulk_store(
                    OUT.ptr_to([req, mt * BM + tid, 0]),
                    staging + T.cast(tid * OUT_ROW_BYTES, "uint32"),
                    D_V * 2,
                )
            elif T.And(split >= 0, split < TOT):
                dsl.bulk_store(
                    OACC.ptr_to([split, mt * BM + tid, 0]),
                    staging + T.cast(tid * ACC_ROW_BYTES, "uint32"),
                    D_V * 4,
                )
        dsl.bulk_commit()
        dsl.bulk_wait_read(0)
    T.cuda.cta_sync()  # the staging is free again


def _swz(row, chunk):
    """Byte offset of 16-byte chunk ``chunk`` (0..71) of row ``row`` in a 64-row tile."""
    return (chunk // 8) * (BM * 128) + row * 128 + T.bitwise_xor(chunk % 8, row % 8) * 16


@T.inline
def _load_q(Q, req, mt, base, tid, R):
    for it in T.unroll(LOADS):
        idx = it * THREADS + tid
        row = idx // CHUNKS
        ch = idx % CHUNKS
        src = T.min(mt * BM + row, R - 1)  # rows past R: any valid row (never stored)
        T.ptx["cp.async.cg.shared.global"](
            base + T.cast(_swz(row, ch), "uint32"), Q.ptr_to([req, src, ch * 8]), 16
        )


def page_ok(entry, NT):
    """Whether block-table entry ``entry`` names a page of the cache (``NT`` = its rows)."""
    return T.And(entry >= 0, T.cast(entry, "int64") * PAGE < NT)


@T.inline
def _load_page(KC, BT, req, blk, seqlen, NT, dst, tid):
    """Logical block ``blk`` (< the table width) of request ``req`` (page ``BT[req, blk]``).
    Rows of tokens at or past ``seqlen``, and every row of an entry outside
    ``[0, num_blocks)``, are zero-filled (src-size 0, address clamped to page 0): stale or NaN
    cache contents past the end cannot reach ``P V``, and a bad entry never reads out of
    bounds (its tokens are masked in the softmax)."""
    entry = BT[req, blk]
    ok = page_ok(entry, NT)
    page = T.if_then_else(ok, T.cast(entry, "int64") * PAGE, T.int64(0))
    for it in T.unroll(LOADS):
        idx = it * THREADS + tid
        row = idx // CHUNKS
        ch = idx % CHUNKS
        T.ptx["cp.async.cg.shared.global"](
            dst + T.cast(_swz(row, ch), "uint32"),
            KC.ptr_to([page + row, ch * 8]),
            16,
            T.if_then_else(T.And(ok, blk * PAGE + row < seqlen), T.uint32(16), T.uint32(0)),
        )
