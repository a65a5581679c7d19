# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The RMSNorm kernel: ``Y[m, :] = X[m, :] * rsqrt(mean(X[m, :]^2) + eps) * W``.

Numerics: bf16 or fp16 in and out (X, W, Y share the dtype); squares are summed in fp32 and
``x * rstd * w`` is formed in fp32 with a single rounding to the output dtype (as FlashInfer
does). The row sum has a fixed order, so results are deterministic run to run.

Domain: ``hidden`` static, ``hidden % 8 == 0`` and ``8 <= hidden <= 32768`` (other values
raise ValueError); the batch ``M`` is dynamic (``T.dynamic``), any ``M >= 1``; row offsets
are 64-bit, so ``M * hidden`` is not limited to int32. X, W and Y must be contiguous and
16-byte aligned (torch allocations are). What was tested on the H200: docs/rmsnorm.md.

Schedule (``_rmsnorm_schedule``): one CTA per row (``rows`` rows per CTA when a row is
shorter than a warp). Each of the ``tpr`` threads of a row holds ``per`` 16-byte vectors of
X and of W in registers; the row is reduced with warp shuffles plus one shared-memory
exchange (one barrier) when it spans several warps.
"""

from __future__ import annotations

import functools

from tirx_kernels.core.toolchain import T

from ._rmsnorm_schedule import MAX_HIDDEN, VEC, cdiv, default_schedule

DTYPES = ("bfloat16", "float16")


def _check_domain(hidden, dtype):
    if dtype not in DTYPES:
        raise ValueError(f"rmsnorm: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if not isinstance(hidden, int) or hidden % VEC != 0 or not VEC <= hidden <= MAX_HIDDEN:
        raise ValueError(
            f"rmsnorm: hidden must be a multiple of {VEC} in [{VEC}, {MAX_HIDDEN}], got {hidden!r}"
        )


@functools.cache
def make_rmsnorm(hidden, dtype="bfloat16", eps=1e-6, schedule=None):
    """The PrimFunc for one (hidden, dtype, eps); the batch M is dynamic.

    ``schedule`` overrides ``default_schedule(hidden)``: (threads per row, rows per CTA,
    min CTAs per SM for the launch bounds, which caps registers per thread).
    """
    _check_domain(hidden, dtype)
    tpr, rows, min_blocks = schedule or default_schedule(hidden)
    tdt = dtype
    nvec = hidden // VEC
    per = cdiv(nvec, tpr)  # vectors per thread
    ragged = per * tpr != nvec  # the last vectors of a row are masked
    nthreads = tpr * rows
    width = min(tpr, 32)  # shuffle width of a row's warp reduction
    wpr = max(tpr // 32, 1)  # warps per row
    bad_tpr = tpr % 32 != 0 if tpr > 32 else width & (width - 1)
    if bad_tpr or nthreads > 1024 or nthreads % 32:
        raise ValueError(f"rmsnorm: bad schedule tpr={tpr} rows={rows}")
    inv_h = 1.0 / hidden
    M = T.dynamic("M", "int64")
    m32 = T.cast(M, "int32")

    @T.inline
    def row_of(A, row):  # a row view with a 64-bit offset: M * hidden may pass 2^31
        view = T.decl_tensor(
            A.ptr_to([T.cast(row, "int64"), 0]), ty_args=[T.Tensor((hidden,), tdt)]
        )
        return view

    @T.macro
    def load_vecs(dst, src, lane):
        # Masked vectors (ragged rows) are never loaded; the sum and the store skip them.
        for k in T.unroll(per):
            col = (k * tpr + lane) * VEC
            if T.constexpr(ragged):
                if col < hidden:
                    dst[T.Ramp(k * VEC, 1, VEC)] = src[T.Ramp(col, 1, VEC)]
            else:
                dst[T.Ramp(k * VEC, 1, VEC)] = src[T.Ramp(col, 1, VEC)]

    @T.macro
    def sum_squares(xa, lane, acc, red, grp):
        # Leaves the row's sum of squares in acc[0] of every lane; all threads must call it.
        acc[0] = T.float32(0)
        for k in T.unroll(per):
            for v in T.unroll(VEC):
                xf = T.cast(xa[k * VEC + v], "float32")
                if T.constexpr(ragged):
                    acc[0] = acc[0] + T.if_then_else(
                        (k * tpr + lane) * VEC < hidden, xf * xf, T.float32(0)
                    )
                else:
                    acc[0] = acc[0] + xf * xf
        if T.constexpr(width > 1):
            acc[0] = T.cuda.warp_sum(acc[0], width)
        if T.constexpr(wpr > 1):
            if lane % 32 == 0:
                red[grp * wpr + lane // 32] = acc[0]
            T.cuda.cta_sync()
            acc[0] = red[grp * wpr]
            for j in T.unroll(1, wpr):
                acc[0] = acc[0] + red[grp * wpr + j]

    @T.macro
    def store(xa, wr, yrow, lane, acc, yv):
        rstd = T.rsqrt(acc[0] * T.float32(inv_h) + T.float32(eps))
        for k in T.unroll(per):
            col = (k * tpr + lane) * VEC
            for v in T.unroll(VEC):
                yv[v] = T.cast(
                    T.cast(xa[k * VEC + v], "float32") * rstd * T.cast(wr[k * VEC + v], "float32"),
                    tdt,
                )
            if T.constexpr(ragged):
                if col < hidden:
                    yrow[T.Ramp(col, 1, VEC)] = yv[T.Ramp(0, 1, VEC)]
            else:
                yrow[T.Ramp(col, 1, VEC)] = yv[T.Ramp(0, 1, VEC)]

    @T.function
    def rmsnorm(
        X: T.Tensor((M, hidden), tdt, align=16),
        W: T.Tensor((hidden,), tdt, align=16),
        Y: T.Tensor((M, hidden), tdt, align=16),
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=T.ceildiv(m32, rows), block=nthreads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=min_blocks),
        )
        tx = T.cuda.thread_idx("x")
        lane = tx % tpr
        grp = tx // tpr
        row = T.cuda.block_idx("x") * rows + grp
        wr = T.alloc_local((per * VEC,), tdt)
        xa = T.alloc_local((per * VEC,), tdt)
        yv = T.alloc_local((VEC,), tdt)
        acc = T.alloc_local((1,), "float32")
        red = T.alloc_shared((rows * wpr,), "float32")
        # W first: its (L2-hit) load overlaps X's. Rows past M (the last CTA of short rows)
        # read row M-1 and skip the store, so every lane joins the shuffles and the barrier.
        load_vecs(wr, W, lane)
        load_vecs(xa, row_of(X, T.min(row, m32 - 1)), lane)
        sum_squares(xa, lane, acc, red, grp)
        if row < m32:
            store(xa, wr, row_of(Y, row), lane, acc, yv)

    return rmsnorm
