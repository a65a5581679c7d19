# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The TIRx kernels of the FlashInfer norm ports (RMSNorm, Gemma RMSNorm, fused add, LayerNorm).

Upstream source: ``include/flashinfer/norm.cuh`` (``RMSNormKernel``, ``FusedAddRMSNormKernel``,
``generalLayerNorm``), launched by its ``RMSNorm``/``GemmaRMSNorm``/``FusedAddRMSNorm``/
``GemmaFusedAddRMSNorm``/``LayerNorm`` launchers, bound in ``csrc/norm.cu`` and exposed by
``flashinfer/norm/__init__.py`` (the CUDA-JIT path, which is what runs on sm_90a when the
CuTe-DSL kernels are unavailable). These kernels and launchers are identical in the copy of
``norm.cuh`` shipped by flashinfer-python 0.7.2.post1 (git beabf500), the reference on the H200.

Kept from upstream (except as ``_norm_schedule.schedule`` says): one CTA per row, 16-byte vectors
(``VEC_SIZE = gcd(16 / sizeof(T), d)`` is 8 for every ``d % 8 == 0``), thread ``t`` owning
vectors ``t, t + threads, ...``, fp32 accumulation of the squares per thread, warp shuffle-xor
then cross-warp reduction,
``rms_rcp = rsqrt(sum_sq / d + eps)``, ``out = T(float(x) * rms_rcp * (weight_bias + float(w)))``
with ``weight_bias`` 0 (RMSNorm) or 1 (Gemma); the fused-add kernels store
``residual = T(x)`` with ``x = float(input) + float(residual)`` and normalize the unrounded
fp32 ``x``. LayerNorm: mean, then the variance of ``x - mean`` (two-pass, upstream's
``USE_DIFF_OF_SQUARES = false``), ``out = T((x - mean) * rsqrt(var / d + eps) * gamma + beta)``.

Changed (performance, same arithmetic): the row lives in registers instead of being read
twice (RMSNorm) or staged in shared memory (fused add, LayerNorm); the weight is loaded with
the row, before the reduction (except below); the cross-warp step is done by every warp
after a single barrier; the block is ``ceil(d / (8 * vecs_per_thread))`` threads (rounded up
to a warp) instead of ``min(1024, d / 8)``. For large batches (see
``_norm_schedule.schedule``): a CTA normalizes 2 or 4 rows at once (RMSNorm, LayerNorm: one
barrier per reduction for all of them, one weight load) or, RMSNorm at hidden 2048, a warp
normalizes a row alone (8 vectors per lane, no barrier), and fused add loads the weight at
its use so two CTAs fit per SM. LayerNorm loads gamma/beta with ``L1::evict_last``
(except at hidden 8192 and 16384) so the streamed rows do not push them out of L1.
LayerNorm from hidden 8192 holds only the packed bf16 row between its passes (``lean``,
:func:`lean_f32`; the epilogue re-sums the mean from its shared partials, giving the same
bits), so a launch bound fits 3 CTAs of 512 threads per SM at hidden 16384 instead of 2;
RMSNorm does the same between 256 and 8192 tokens from hidden 4096 and for large batches
up to hidden 4096. No PDL (``griddepcontrol``) and contiguous rows only.

Each ``make_*`` returns the PrimFunc of one static ``hidden`` (tokens are dynamic) for one
schedule (``_norm_schedule.schedule``'s keywords); importing this module does not import
the compiler (each ``make_*`` does, on first call). Design notes: ``docs/norm.md``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from ._norm_schedule import VEC, WARP_ROW, check_domain, plan

LD_EVICT_LAST_F32X4 = "ld.global.L1::evict_last.v4.f32"  # 4 fp32, kept in L1 over the stream
LD_F32X4 = "ld.global.v4.f32"


def ramp(T, base, lanes: int):
    """Index of ``lanes`` consecutive elements from ``base`` (a scalar index for one)."""
    return T.Ramp(base, 1, lanes) if lanes > 1 else base


def check_vec(hidden: int, vec: int) -> int:
    """``vec`` when it is a valid vector width for ``hidden`` (1, 2, 4 or 8 dividing it)."""
    if vec not in (1, 2, 4, VEC) or hidden % vec:
        raise ValueError(f"vec={vec} must be 1, 2, 4 or 8 and divide hidden={hidden}")
    return vec


def opaque_zero(T, M, n: int):
    """An expression that is 0 at run time (0 <= M < 2**30, the row count) but not to ptxas;
    different for n = 1 and 2."""
    return T.cast(T.shift_right(M, 32 - n), "uint32")


def lean_f32(T, dtype, words, i, zero):
    """float32 of element ``i`` of a 16-bit row held as 32-bit ``words``, read through
    ``word ^ zero`` (an :func:`opaque_zero`): a value ptxas cannot equate with an earlier
    conversion of the same element, so between two passes it keeps the packed row (16 bits
    an element) alive instead of the fp32 values the first pass made (32 bits an element)."""
    w = words[i // 2] ^ zero
    odd = T.cast(i % 2, "uint32")  # i is an (unrolled) loop expression: no Python branching
    if dtype == "bfloat16":  # the fp32 bits are the bf16 bits and 16 zero bits
        bits = T.bitwise_and(T.shift_left(w, (1 - odd) * 16), T.uint32(0xFFFF0000))
        return T.reinterpret(bits, ty="float32")
    half = T.cast(T.shift_right(w, odd * 16), "uint16")
    return T.cast(T.reinterpret(half, ty=dtype), "float32")


def row_reader(T, dtype, M, lean: bool):
    """A trace-time helper ``row_f32(xr, xw, i, pass_)``: element ``i`` of the held rows in
    fp32 for the rows' ``pass_``-th (1 or 2) use after the first; a plain cast of ``xr[i]``,
    or, ``lean``, :func:`lean_f32` of the same bits ``xw`` through ``opaque_zero(pass_)``."""

    def row_f32(xr, xw, i, pass_):
        if lean:
            return lean_f32(T, dtype, xw, i, opaque_zero(T, M, pass_))
        return T.cast(xr[i], "float32")

    return row_f32


def launch_bounds(T, min_ctas_per_sm: int):
    """Kernel attributes asking ptxas to fit ``min_ctas_per_sm`` CTAs per SM (None for 1)."""
    if min_ctas_per_sm <= 1:
        return None
    return T.cuda.KernelAttributes(min_blocks_per_sm=min_ctas_per_sm)


def row_threads(hidden: int, k: int, threads: int, warp_rows: int) -> int:
    """Threads of one CTA: ``threads`` per row group, ``warp_rows`` of them when set (each a
    single warp normalizing its own rows: the row must fit one warp at ``k``)."""
    if not warp_rows:
        return threads
    if threads != 32:
        raise ValueError(
            f"warp_rows: hidden={hidden} at {k} vectors per thread needs {threads} threads, "
            f"not one warp; pass vecs_per_thread=hidden // {WARP_ROW}"
        )
    return 32 * warp_rows


def first_row_and_lane(T, R: int, warp_rows: int):
    """(the first of the thread's R rows, its index among its row's threads)."""
    tid, bid = T.cuda.thread_idx("x"), T.cuda.block_idx("x")
    if warp_rows:
        return (bid * warp_rows + tid // 32) * R, tid % 32
    return bid * R, tid


def reductions(T, R: int, warps: int):
    """T.inline helpers ``(block_sums, partials_sum)`` for R rows of ``warps`` warps each.

    ``block_sums(acc, red, tx, out)``: out[r] = the sum of acc[r] over a row's threads. One
    warp: a shuffle. More: each warp's shuffle sum to shared memory ``red``, one barrier, then
    ``partials_sum(red, tx, out)``: every warp sums the partials (a full-warp shuffle, as
    upstream; summing only the lanes that hold partials gives the same bits but made ptxas
    spill the lean LayerNorm at its launch bound).
    """
    one_warp = warps == 1

    @T.inline
    def partials_sum(red, tx, out):
        for r in T.unroll(R):
            out[r] = T.cuda.warp_sum(
                T.if_then_else(tx % 32 < warps, red[r * 32 + tx % 32], T.float32(0))
            )

    @T.inline
    def block_sums(acc, red, tx, out):
        if one_warp:
            for r in T.unroll(R):
                out[r] = T.cuda.warp_sum(acc[r])
        else:
            for r in T.unroll(R):
                part = T.cuda.warp_sum(acc[r])
                if tx % 32 == 0:
                    red[r * 32 + tx // 32] = part
            T.cuda.cta_sync()
            partials_sum(red, tx, out)

    return block_sums, partials_sum


def row_entry(T, M, R: int, warp_rows: int, block: int, bounds):
    """T.inline ``enter()`` of the row kernels: no-alias buffers, one CTA of ``block``
    threads per R rows (times ``warp_rows`` warps of their own rows), ``bounds`` attributes."""

    @T.inline
    def enter():
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=T.ceildiv(M, R * max(1, warp_rows)), block=block),
            kernel_attrs=bounds,
        )

    return enter


def row_loads(T, dtype, M, hidden: int, R: int, k: int, V: int, threads: int, one_row: bool):
    """T.inline ``load_rows(X, xr, row0, tx, W=None, wr=None)``: thread ``tx``'s k vectors
    of V elements (vector ``it`` at column ``(it * threads + tx) * V``) of rows ``row0 ...
    row0 + R - 1`` into registers ``xr``, zeros for a padding lane's; rows past M re-read row
    M - 1 (never stored) unless ``one_row``. With ``W``, its vectors into ``wr`` alongside."""
    exact = threads * k * V == hidden

    @T.inline
    def load_rows(X, xr, row0, tx, W=None, wr=None):
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:
                for r in T.unroll(R):
                    src = row0 + r if one_row else T.min(row0 + r, M - 1)
                    xr[ramp(T, (r * k + it) * V, V)] = X[src, ramp(T, c, V)]
                if T.constexpr(W is not None):
                    wr[ramp(T, it * V, V)] = W[ramp(T, c, V)]
            else:
                for i in T.unroll(R * V):
                    xr[(i // V * k + it) * V + i % V] = T.cast(T.float32(0), dtype)

    return load_rows


class RowKernel(NamedTuple):
    """The geometry and trace-time helpers make_rmsnorm and make_layernorm share."""

    V: int  # elements per vector
    k: int  # vectors per thread and row
    threads: int  # threads per row
    exact: bool  # the threads' vectors cover the row with no padding lane
    R: int  # rows per thread
    one_row: bool  # one row per CTA (or warp): no row past M is read
    M: Any  # the dynamic row count
    enter: Any  # row_entry's
    block_sums: Any  # reductions'
    partials_sum: Any
    load_rows: Any  # row_loads'


def row_kernel(
    kind: str,
    dtype,
    hidden: int,
    vecs_per_thread,
    vec: int,
    rows_per_cta: int,
    warp_rows: int,
    min_ctas_per_sm: int,
) -> RowKernel:
    """The :class:`RowKernel` of ``kind`` (``plan``'s) for make_rmsnorm's / make_layernorm's
    schedule keywords."""
    from tirx_kernels.core.toolchain import T

    V = check_vec(hidden, vec)
    k, threads = plan(hidden, None, kind, vecs_per_thread, vec)
    block = row_threads(hidden, k, threads, warp_rows)
    R = rows_per_cta
    one_row = R * max(1, warp_rows) == 1  # else rows past M are clamped on load, not stored
    M = T.dynamic("M")
    block_sums, partials_sum = reductions(T, R, threads // 32)
    return RowKernel(
        V=V,
        k=k,
        threads=threads,
        exact=threads * k * V == hidden,
        R=R,
        one_row=one_row,
        M=M,
        enter=row_entry(T, M, R, warp_rows, block, launch_bounds(T, min_ctas_per_sm)),
        block_sums=block_sums,
        partials_sum=partials_sum,
        load_rows=row_loads(T, dtype, M, hidden, R, k, V, threads, one_row),
    )


@functools.cache
def make_rmsnorm(
    dtype: str,
    hidden: int,
    weight_bias: float,
    vecs_per_thread=None,
    rows_per_cta: int = 1,
    lean: bool = False,
    min_ctas_per_sm: int = 1,
    warp_rows: int = 0,
    vec: int = VEC,
):
    """out[m] = T(float(x[m]) * rsqrt(mean(x[m]^2) + eps) * (weight_bias + float(w))).

    ``rows_per_cta`` (R): each CTA normalizes R consecutive rows at once, a thread holding
    its columns of all R; the weight is loaded once for them and one barrier serves all R
    reductions. A row's arithmetic is the same for every R.
    ``lean``: only the packed 16-bit rows stay live across the barrier (see
    :func:`lean_f32`); ``min_ctas_per_sm`` then caps registers so that many CTAs fit per SM.
    ``warp_rows`` (W): the CTA is W warps, each normalizing its own R rows with shuffles
    only (no shared memory, no barrier); the row must fit one warp (k = hidden / WARP_ROW).
    """
    from tirx_kernels.core.toolchain import T

    check_domain(dtype, hidden)
    rows = row_kernel(
        "rmsnorm", dtype, hidden, vecs_per_thread, vec, rows_per_cta, warp_rows, min_ctas_per_sm
    )
    V, k, threads, exact, R, one_row, M = rows[:7]  # RowKernel's geometry
    row_f32 = row_reader(T, dtype, M, lean)

    @T.function
    def rmsnorm(
        X: T.Tensor((M, hidden), dtype, align=2 * V),
        W: T.Tensor((hidden,), dtype, align=2 * V),
        Y: T.Tensor((M, hidden), dtype, align=2 * V),
        eps: T.float32,
    ):
        rows.enter()
        row0, tx = first_row_and_lane(T, R, warp_rows)
        xr = T.alloc_local((-(-R * k * V // 2) * 2,), dtype)  # even: viewed as words
        xw = xr.view("uint32")  # the rows' bits, for lean_f32
        wr = T.alloc_local((k * V,), dtype)
        yr = T.alloc_local((V,), dtype)
        red = T.alloc_shared((R * 32,), "float32")
        acc = T.alloc_local((R,), "float32")
        rr = T.alloc_local((R,), "float32")
        rows.load_rows(X, xr, row0, tx, W, wr)
        for r in T.unroll(R):
            acc[r] = T.float32(0)
            for i in T.unroll(k * V):
                xf = T.cast(xr[r * k * V + i], "float32")
                acc[r] = acc[r] + xf * xf
        rows.block_sums(acc, red, tx, rr)
        for r in T.unroll(R):
            rr[r] = T.rsqrt(rr[r] / T.float32(hidden) + eps)
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:
                for r in T.unroll(R):
                    if one_row or row0 + r < M:
                        for v in T.unroll(V):
                            yr[v] = T.cast(
                                row_f32(xr, xw, (r * k + it) * V + v, 1)
                                * rr[r]
                                * (T.float32(weight_bias) + T.cast(wr[it * V + v], "float32")),
                                dtype,
                            )
                        Y[row0 + r, ramp(T, c, V)] = yr[ramp(T, 0, V)]

    return rmsnorm


@functools.cache
def make_fused_add_rmsnorm(
    dtype: str,
    hidden: int,
    weight_bias: float,
    vecs_per_thread=None,
    late_weight: bool = False,
    vec: int = VEC,
):
    """In place: x = I + R (fp32); R = T(x); I = T(x * rsqrt(mean(x^2) + eps) * (bias + w)).

    ``late_weight``: ``w`` is loaded just before its use instead of with the row, freeing its
    registers across the reduction; with a 64-register launch bound two 512-thread CTAs fit
    per SM, so one CTA's loads overlap the other's reduction and stores.
    """
    from tirx_kernels.core.toolchain import T

    check_domain(dtype, hidden)
    V = check_vec(hidden, vec)
    k, threads = plan(hidden, None, "fused_add_rmsnorm", vecs_per_thread, vec)
    warps = threads // 32
    exact = threads * k * V == hidden
    ctas_per_sm = max(1, 1024 // threads) if late_weight else 1
    M = T.dynamic("M")
    block_sums, _ = reductions(T, 1, warps)

    @T.function
    def fused_add_rmsnorm(
        I: T.Tensor((M, hidden), dtype, align=2 * V),  # noqa: E741 - upstream's "input"
        R: T.Tensor((M, hidden), dtype, align=2 * V),
        W: T.Tensor((hidden,), dtype, align=2 * V),
        eps: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=M, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=ctas_per_sm),
        )
        row = T.cuda.block_idx("x")
        tx = T.cuda.thread_idx("x")
        iv = T.alloc_local((k * V,), dtype)
        rv = T.alloc_local((k * V,), dtype)
        wr = T.alloc_local((k * V,), dtype)
        xf = T.alloc_local((k * V,), "float32")
        ov = T.alloc_local((V,), dtype)
        red = T.alloc_shared((32,), "float32")
        acc = T.alloc_local((1,), "float32")
        rs = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:
                iv[ramp(T, it * V, V)] = I[row, ramp(T, c, V)]
                rv[ramp(T, it * V, V)] = R[row, ramp(T, c, V)]
                if not late_weight:
                    wr[ramp(T, it * V, V)] = W[ramp(T, c, V)]
            else:
                for v in T.unroll(V):
                    iv[it * V + v] = T.cast(T.float32(0), dtype)
                    rv[it * V + v] = T.cast(T.float32(0), dtype)
        for it in T.unroll(k):
            for v in T.unroll(V):
                i = it * V + v
                xf[i] = T.cast(iv[i], "float32") + T.cast(rv[i], "float32")
                acc[0] = acc[0] + xf[i] * xf[i]
                ov[v] = T.cast(xf[i], dtype)
            c = (it * threads + tx) * V
            if exact or c < hidden:
                R[row, ramp(T, c, V)] = ov[ramp(T, 0, V)]
        block_sums(acc, red, tx, rs)
        rs[0] = T.rsqrt(rs[0] / T.float32(hidden) + eps)
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:
                if late_weight:
                    wr[ramp(T, it * V, V)] = W[ramp(T, c, V)]
                for v in T.unroll(V):
                    i = it * V + v
                    ov[v] = T.cast(
                        xf[i] * rs[0] * (T.float32(weight_bias) + T.cast(wr[i], "float32")), dtype
                    )
                I[row, ramp(T, c, V)] = ov[ramp(T, 0, V)]

    return fused_add_rmsnorm


@functools.cache
def make_layernorm(
    hidden: int,
    vecs_per_thread=None,
    rows_per_cta: int = 1,
    keep_gamma_beta: bool = False,
    lean: bool = False,
    min_ctas_per_sm: int = 1,
    warp_rows: int = 0,
    vec: int = VEC,
):
    """out[m] = bf16((x - mean) * rsqrt(var + eps) * gamma + beta); x bf16, gamma/beta fp32.

    ``rows_per_cta`` (R): a CTA normalizes R consecutive rows at once (see make_rmsnorm); a
    gamma/beta vector is loaded once for the R rows, and two barriers serve them all.
    ``keep_gamma_beta``: load gamma/beta with ``L1::evict_last``, so the streamed rows do not
    evict them from L1 before the SM's next row needs them.
    ``lean``: only the packed bf16 row stays live across the barriers (see :func:`lean_f32`;
    the epilogue re-reads the mean's partials), 44 instead of 59 registers at hidden 16384;
    ``min_ctas_per_sm`` then caps registers so that many CTAs fit per SM.
    ``warp_rows`` (W): the CTA is W warps, each normalizing its own R rows with shuffles
    only (no shared memory, no barrier); the row must fit one warp (k = hidden / WARP_ROW).
    """
    from tirx_kernels.core.toolchain import T

    dtype = "bfloat16"
    check_domain(dtype, hidden, bf16_only=True)
    rows = row_kernel(
        "layernorm", dtype, hidden, vecs_per_thread, vec, rows_per_cta, warp_rows, min_ctas_per_sm
    )
    V, k, threads, exact, R, one_row, M = rows[:7]  # RowKernel's geometry
    row_f32 = row_reader(T, dtype, M, lean)
    # lean: a volatile (PTX) load, which nvcc cannot hoist above the barriers into registers
    gb_ptx = keep_gamma_beta or lean
    if gb_ptx and V != VEC:
        raise ValueError(f"keep_gamma_beta/lean need 8-element vectors, hidden={hidden}")
    gb_lanes = min(4, V)
    gb_loads = V // gb_lanes
    gb_load = LD_EVICT_LAST_F32X4 if keep_gamma_beta else LD_F32X4
    block_sums, partials_sum = rows.block_sums, rows.partials_sum
    resum_mean = lean and threads // 32 > 1  # one warp keeps its mean in a register

    @T.function
    def layernorm(
        X: T.Tensor((M, hidden), dtype, align=2 * V),
        G: T.Tensor((hidden,), "float32", align=4 * gb_lanes),
        B: T.Tensor((hidden,), "float32", align=4 * gb_lanes),
        Y: T.Tensor((M, hidden), dtype, align=2 * V),
        eps: T.float32,
    ):
        rows.enter()
        row0, tx = first_row_and_lane(T, R, warp_rows)
        xr = T.alloc_local((-(-R * k * V // 2) * 2,), dtype)  # even: viewed as words
        xw = xr.view("uint32")  # the row's bits, for lean_f32
        gr = T.alloc_local((V,), "float32")
        br = T.alloc_local((V,), "float32")
        yr = T.alloc_local((V,), dtype)
        red = T.alloc_shared((R * 32,), "float32")
        red2 = T.alloc_shared((R * 32,), "float32")
        acc = T.alloc_local((R,), "float32")
        mean = T.alloc_local((R,), "float32")
        rstd = T.alloc_local((R,), "float32")
        rows.load_rows(X, xr, row0, tx)
        for r in T.unroll(R):
            acc[r] = T.float32(0)
            for i in T.unroll(k * V):
                acc[r] = acc[r] + T.cast(xr[r * k * V + i], "float32")
        block_sums(acc, red, tx, mean)
        for r in T.unroll(R):
            mean[r] = mean[r] / T.float32(hidden)
            acc[r] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:  # padding lanes must not add mean^2
                for r in T.unroll(R):
                    for v in T.unroll(V):
                        dv = row_f32(xr, xw, (r * k + it) * V + v, 1) - mean[r]
                        acc[r] = acc[r] + dv * dv
        block_sums(acc, red2, tx, rstd)
        for r in T.unroll(R):
            rstd[r] = T.rsqrt(rstd[r] / T.float32(hidden) + eps)
        if resum_mean:  # the same mean, re-summed: ptxas cannot reuse the variance's x - mean
            partials_sum(red, tx, mean)
            for r in T.unroll(R):
                mean[r] = mean[r] / T.float32(hidden)
        for it in T.unroll(k):
            c = (it * threads + tx) * V
            if exact or c < hidden:
                for h in T.unroll(gb_loads):  # 4 fp32 per 16-byte load (narrow: V each)
                    o = gb_lanes * h
                    if gb_ptx:
                        T.ptx[gb_load](gr[o], gr[o + 1], gr[o + 2], gr[o + 3], G.ptr_to([c + o]))
                        T.ptx[gb_load](br[o], br[o + 1], br[o + 2], br[o + 3], B.ptr_to([c + o]))
                    else:
                        gr[ramp(T, o, gb_lanes)] = G[ramp(T, c + o, gb_lanes)]
                        br[ramp(T, o, gb_lanes)] = B[ramp(T, c + o, gb_lanes)]
                for r in T.unroll(R):
                    if one_row or row0 + r < M:
                        for v in T.unroll(V):
                            xf = row_f32(xr, xw, (r * k + it) * V + v, 2)
                            yr[v] = T.cast((xf - mean[r]) * rstd[r] * gr[v] + br[v], dtype)
                        Y[row0 + r, ramp(T, c, V)] = yr[ramp(T, 0, V)]

    return layernorm


def make(kind: str, dtype: str, hidden: int, weight_bias: float = 0.0, **sched):
    """The PrimFunc of ``kind`` for one static shape; ``sched``: ``_norm_schedule.schedule``'s
    keywords."""
    if kind == "rmsnorm":
        return make_rmsnorm(dtype, hidden, weight_bias, **sched)
    if kind == "fused_add_rmsnorm":
        return make_fused_add_rmsnorm(dtype, hidden, weight_bias, **sched)
    if kind == "layernorm":
        return make_layernorm(hidden, **sched)
    raise ValueError(f"unknown norm kind {kind!r}")
