# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Shared code of the FlashInfer norm ports (RMSNorm, Gemma RMSNorm, fused add, LayerNorm).

Upstream source: ``include/flashinfer/norm.cuh`` (``RMSNormKernel``, ``FusedAddRMSNormKernel``,
``RMSNorm``/``GemmaRMSNorm``/``FusedAddRMSNorm``/``GemmaFusedAddRMSNorm`` launchers,
``generalLayerNorm``/``LayerNorm``), bound in ``csrc/norm.cu`` and exposed by
``flashinfer/norm/__init__.py`` (the CUDA-JIT path, which is what runs on sm_90a when the
CuTe-DSL kernels are unavailable). These kernels and launchers are identical in the copy of
``norm.cuh`` shipped by flashinfer-python 0.7.2.post1 (git beabf500), the reference on the H200.

Kept from upstream (except as :func:`schedule` says): one CTA per row, 16-byte vectors
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
to a warp) instead of ``min(1024, d / 8)``. Above ``SMALL_BATCH`` tokens (see
:func:`schedule`): LayerNorm with ``hidden <= 2048`` runs a persistent kernel holding gamma
and beta in registers across rows, and fused add loads the weight at its use so two CTAs fit
per SM. No PDL (``griddepcontrol``) and contiguous rows only.

Dispatch domain of the port: dtype bfloat16 or float16 (LayerNorm: bfloat16 input, float32
gamma/beta, as upstream); ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8 specialization;
other ``d`` use smaller vectors upstream and are not ported); ``8 <= hidden <= 16384``;
``tokens * hidden < 2**31`` (32-bit indexing); rows contiguous. Outside it: ValueError.
"""

from __future__ import annotations

import functools

import torch

VEC = 8  # elements per 16-byte vector of a 16-bit dtype
MAX_HIDDEN = 16384
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
TORCH_TO_NAME = {v: k for k, v in DTYPES.items()}

# Correctness and bench matrices of rmsnorm, gemma_rmsnorm and both fused_add variants
# (dtype, tokens, hidden): LLM hidden sizes incl. 5120/11008, odd token counts, batch 1.
_TEST_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 7, 2048),
    ("bfloat16", 16, 16384),
    ("bfloat16", 127, 5120),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 8192),
    ("float16", 33, 4096),
    ("float16", 2047, 11008),
    ("bfloat16", 1025, 16384),  # fused add: late weight at 1024 threads
    ("float16", 3001, 1000),  # tail lanes in every row, late weight at 128 threads
]
_BENCH_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 16, 4096),
    ("bfloat16", 1, 16384),
    ("bfloat16", 16, 8192),
    ("bfloat16", 1024, 4096),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 2048),
    ("bfloat16", 16384, 4096),
    ("bfloat16", 16384, 8192),
    ("bfloat16", 16384, 16384),
    ("float16", 16384, 5120),
]
_ABBR = {"bfloat16": "bf16", "float16": "fp16"}
NORM_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _TEST_SHAPES
]
NORM_BENCH_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _BENCH_SHAPES
]


def check_domain(dtype: str, hidden: int, tokens: int | None = None, *, bf16_only=False) -> None:
    """Raise ValueError unless (dtype, hidden, tokens) is inside the port's dispatch domain."""
    allowed = ("bfloat16",) if bf16_only else tuple(DTYPES)
    if dtype not in allowed:
        raise ValueError(f"dtype {dtype!r} not supported: expected one of {allowed}")
    if not isinstance(hidden, int) or hidden % VEC or not VEC <= hidden <= MAX_HIDDEN:
        raise ValueError(
            f"hidden={hidden} outside the ported dispatch domain: need hidden % {VEC} == 0 "
            f"(FlashInfer's VEC_SIZE=8 path) and {VEC} <= hidden <= {MAX_HIDDEN}"
        )
    if tokens is not None and not (0 <= tokens and tokens * hidden < 2**31):
        raise ValueError(f"tokens={tokens} x hidden={hidden} exceeds 32-bit indexing")


SMALL_BATCH = 256  # up to ~2 rows per SM: latency-bound, spread a row over more threads


def plan(
    hidden: int, tokens: int | None = None, kind: str = "rmsnorm", vecs_per_thread=None
) -> tuple[int, int]:
    """(16-byte vectors per thread, threads per CTA) for one row of ``hidden`` elements.

    Picked from a proton sweep of 1/2/4/8 vectors per thread on the H200: small batches
    want 1-2 vectors per thread (fused add: at most 512 threads), large batches 4 (1 when
    hidden <= 2048). Tokens only pick the plan; the compiled kernel takes any count.
    """
    nvec = hidden // VEC
    if vecs_per_thread:
        k = vecs_per_thread
    elif tokens is not None and tokens <= SMALL_BATCH:
        k = -(-nvec // (512 if kind == "fused_add_rmsnorm" else 1024))
    else:
        k = 1 if nvec <= 256 else 4
    threads = -(-nvec // k)
    threads = -(-threads // 32) * 32
    if threads > 1024:
        raise ValueError(f"hidden={hidden} needs {threads} threads at {k} vectors per thread")
    return k, threads


# Host schedules beyond plan(), each picked from an H200 sweep (scripts/norm_sweep.py, proton,
# 16384 tokens unless noted; µs):
# - LayerNorm, hidden <= 2048: a persistent "rows" kernel holding fp32 gamma and beta in
#   registers (h2048: 37.97 vs 41.52 one-row). From 4096 up it loses (h4096 76.57 vs 69.06,
#   h16384 356.51 vs 289.18); so did persistent RMSNorm (h4096 72.11 vs 68.06) and fused add
#   (h16384 549.84 vs 522.84), which were dropped.
# - Fused add: the weight loaded at its use, not with the row (``late_weight``): two CTAs per
#   SM at 512 threads; h16384 wants 1024 threads (517.22 vs 522.84 one-row, FlashInfer 522.82;
#   h4096 132.37 vs 133.43; 4113 x 11008 89.66 vs 90.14).
PERSISTENT_LAYERNORM_MAX_HIDDEN = 2048
PERSISTENT_LAYERNORM_K = 2
REGS_PER_SM = 65536
THREADS_PER_SM = 2048
MAX_CTAS_PER_SM = 32
# Registers per thread of the persistent LayerNorm at k vectors per thread: 16 + 24 k, the
# smallest spill-free -maxrregcount found by ptxas (CUDA 13.0, sm_90a) for k = 1, 2, 4, 8.
_ROWS_REGS = (16, 24)


def rows_ctas_per_sm(hidden: int, vecs_per_thread=None) -> int:
    """Resident CTAs per SM of the persistent LayerNorm: its min_blocks_per_sm and host grid."""
    k, threads = plan(hidden, None, "layernorm", vecs_per_thread)
    a, b = _ROWS_REGS
    regs = min(255, -(-(a + b * k) // 8) * 8)  # allocated in units of 8 per thread
    # the register file is 4 quarters, one per scheduler: warps are spread over them
    quarter = REGS_PER_SM // 4 // (32 * regs)  # warps per quarter
    n = min(THREADS_PER_SM // threads, MAX_CTAS_PER_SM)
    while n > 1 and -(-n * threads // 32 // 4) > quarter:
        n -= 1
    return n


def schedule(kind: str, hidden: int, tokens: int | None) -> dict:
    """The host's kernel choice for ``tokens`` rows (None: a large batch): make_* keywords."""
    large = tokens is None or tokens > SMALL_BATCH
    k = plan(hidden, tokens, kind)[0]
    if large and kind == "layernorm" and hidden <= PERSISTENT_LAYERNORM_MAX_HIDDEN:
        return {"vecs_per_thread": PERSISTENT_LAYERNORM_K, "persistent": True}
    if large and kind == "fused_add_rmsnorm":
        return {"vecs_per_thread": 2 if hidden >= 16384 else k, "late_weight": True}
    return {"vecs_per_thread": k}


@functools.cache
def make_rmsnorm(dtype: str, hidden: int, weight_bias: float, vecs_per_thread=None):
    """out[m] = T(float(x[m]) * rsqrt(mean(x[m]^2) + eps) * (weight_bias + float(w)))."""
    from tirx_kernels.core.toolchain import T

    check_domain(dtype, hidden)
    k, threads = plan(hidden, None, "rmsnorm", vecs_per_thread)
    warps = threads // 32
    exact = threads * k * VEC == hidden
    M = T.dynamic("M")

    @T.function
    def rmsnorm(
        X: T.Tensor((M, hidden), dtype, align=16),
        W: T.Tensor((hidden,), dtype, align=16),
        Y: T.Tensor((M, hidden), dtype, align=16),
        eps: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(launch=T.cuda.LaunchConfig(grid=M, block=threads))
        row = T.cuda.block_idx("x")
        tx = T.cuda.thread_idx("x")
        xr = T.alloc_local((k * VEC,), dtype)
        wr = T.alloc_local((k * VEC,), dtype)
        yr = T.alloc_local((VEC,), dtype)
        red = T.alloc_shared((32,), "float32")
        acc = T.alloc_local((1,), "float32")
        rr = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                xr[T.Ramp(it * VEC, 1, VEC)] = X[row, T.Ramp(c, 1, VEC)]
                wr[T.Ramp(it * VEC, 1, VEC)] = W[T.Ramp(c, 1, VEC)]
            else:
                for v in T.unroll(VEC):
                    xr[it * VEC + v] = T.cast(T.float32(0), dtype)
        for i in T.unroll(k * VEC):
            acc[0] = acc[0] + T.cast(xr[i], "float32") * T.cast(xr[i], "float32")
        # CTA sum: warp shuffle, partials to shared memory, one barrier, every warp sums them
        part = T.cuda.warp_sum(acc[0])
        if tx % 32 == 0:
            red[tx // 32] = part
        T.cuda.cta_sync()
        tot = T.cuda.warp_sum(T.if_then_else(tx % 32 < warps, red[tx % 32], T.float32(0)))
        rr[0] = T.rsqrt(tot / T.float32(hidden) + eps)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                for v in T.unroll(VEC):
                    i = it * VEC + v
                    yr[v] = T.cast(
                        T.cast(xr[i], "float32")
                        * rr[0]
                        * (T.float32(weight_bias) + T.cast(wr[i], "float32")),
                        dtype,
                    )
                Y[row, T.Ramp(c, 1, VEC)] = yr[T.Ramp(0, 1, VEC)]

    return rmsnorm


@functools.cache
def make_fused_add_rmsnorm(
    dtype: str, hidden: int, weight_bias: float, vecs_per_thread=None, late_weight: bool = False
):
    """In place: x = I + R (fp32); R = T(x); I = T(x * rsqrt(mean(x^2) + eps) * (bias + w)).

    ``late_weight``: ``w`` is loaded just before its use instead of with the row, freeing its
    registers across the reduction; with a 64-register launch bound two 512-thread CTAs fit
    per SM, so one CTA's loads overlap the other's reduction and stores.
    """
    from tirx_kernels.core.toolchain import T

    check_domain(dtype, hidden)
    k, threads = plan(hidden, None, "fused_add_rmsnorm", vecs_per_thread)
    warps = threads // 32
    exact = threads * k * VEC == hidden
    ctas_per_sm = max(1, 1024 // threads) if late_weight else 1
    M = T.dynamic("M")

    @T.function
    def fused_add_rmsnorm(
        I: T.Tensor((M, hidden), dtype, align=16),  # noqa: E741 - upstream's "input"
        R: T.Tensor((M, hidden), dtype, align=16),
        W: T.Tensor((hidden,), dtype, align=16),
        eps: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=M, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=ctas_per_sm),
        )
        row = T.cuda.block_idx("x")
        tx = T.cuda.thread_idx("x")
        iv = T.alloc_local((k * VEC,), dtype)
        rv = T.alloc_local((k * VEC,), dtype)
        wr = T.alloc_local((k * VEC,), dtype)
        xf = T.alloc_local((k * VEC,), "float32")
        ov = T.alloc_local((VEC,), dtype)
        red = T.alloc_shared((32,), "float32")
        acc = T.alloc_local((1,), "float32")
        rs = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                iv[T.Ramp(it * VEC, 1, VEC)] = I[row, T.Ramp(c, 1, VEC)]
                rv[T.Ramp(it * VEC, 1, VEC)] = R[row, T.Ramp(c, 1, VEC)]
                if not late_weight:
                    wr[T.Ramp(it * VEC, 1, VEC)] = W[T.Ramp(c, 1, VEC)]
            else:
                for v in T.unroll(VEC):
                    iv[it * VEC + v] = T.cast(T.float32(0), dtype)
                    rv[it * VEC + v] = T.cast(T.float32(0), dtype)
        for it in T.unroll(k):
            for v in T.unroll(VEC):
                i = it * VEC + v
                xf[i] = T.cast(iv[i], "float32") + T.cast(rv[i], "float32")
                acc[0] = acc[0] + xf[i] * xf[i]
                ov[v] = T.cast(xf[i], dtype)
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                R[row, T.Ramp(c, 1, VEC)] = ov[T.Ramp(0, 1, VEC)]
        # CTA sum: warp shuffle, partials to shared memory, one barrier, every warp sums them
        part = T.cuda.warp_sum(acc[0])
        if tx % 32 == 0:
            red[tx // 32] = part
        T.cuda.cta_sync()
        tot = T.cuda.warp_sum(T.if_then_else(tx % 32 < warps, red[tx % 32], T.float32(0)))
        rs[0] = T.rsqrt(tot / T.float32(hidden) + eps)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                if late_weight:
                    wr[T.Ramp(it * VEC, 1, VEC)] = W[T.Ramp(c, 1, VEC)]
                for v in T.unroll(VEC):
                    i = it * VEC + v
                    ov[v] = T.cast(
                        xf[i] * rs[0] * (T.float32(weight_bias) + T.cast(wr[i], "float32")), dtype
                    )
                I[row, T.Ramp(c, 1, VEC)] = ov[T.Ramp(0, 1, VEC)]

    return fused_add_rmsnorm


@functools.cache
def make_layernorm(hidden: int, vecs_per_thread=None, persistent: bool = False):
    """out[m] = bf16((x - mean) * rsqrt(var + eps) * gamma + beta); x bf16, gamma/beta fp32.

    ``persistent``: the kernel takes a trailing ``ctas: int32`` (grid size, the host passes
    ``1 <= ctas <= M``) and walks rows ``bid, bid + ctas, ...``, holding gamma and beta (fp32,
    twice the bytes of a row) in registers instead of reloading them per row from L2; a row's
    arithmetic is the same code as the one-row kernel's.
    """
    from tirx_kernels.core.toolchain import T

    dtype = "bfloat16"
    check_domain(dtype, hidden, bf16_only=True)
    k, threads = plan(hidden, None, "layernorm", vecs_per_thread)
    warps = threads // 32
    exact = threads * k * VEC == hidden
    resident = rows_ctas_per_sm(hidden, k)  # persistent: CTAs per SM
    gvecs = k if persistent else 1  # gamma/beta vectors held per thread
    M = T.dynamic("M")

    @T.inline
    def load_gb(G, B, gr, br, o, c):
        gr[T.Ramp(o, 1, 4)] = G[T.Ramp(c, 1, 4)]
        gr[T.Ramp(o + 4, 1, 4)] = G[T.Ramp(c + 4, 1, 4)]
        br[T.Ramp(o, 1, 4)] = B[T.Ramp(c, 1, 4)]
        br[T.Ramp(o + 4, 1, 4)] = B[T.Ramp(c + 4, 1, 4)]

    @T.inline
    def one_row(X, G, B, Y, eps, row, tx, xr, gr, br, yr, red, red2, acc, mv):
        acc[0] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                xr[T.Ramp(it * VEC, 1, VEC)] = X[row, T.Ramp(c, 1, VEC)]
            else:
                for v in T.unroll(VEC):
                    xr[it * VEC + v] = T.cast(T.float32(0), dtype)
        for i in T.unroll(k * VEC):
            acc[0] = acc[0] + T.cast(xr[i], "float32")
        # CTA sum: warp shuffle, partials to shared memory, one barrier, every warp sums them
        part = T.cuda.warp_sum(acc[0])
        if tx % 32 == 0:
            red[tx // 32] = part
        T.cuda.cta_sync()
        tot = T.cuda.warp_sum(T.if_then_else(tx % 32 < warps, red[tx % 32], T.float32(0)))
        mv[0] = tot / T.float32(hidden)
        acc[0] = T.float32(0)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:  # padding lanes must not add mean^2
                for v in T.unroll(VEC):
                    dv = T.cast(xr[it * VEC + v], "float32") - mv[0]
                    acc[0] = acc[0] + dv * dv
        # CTA sum: warp shuffle, partials to shared memory, one barrier, every warp sums them
        part2 = T.cuda.warp_sum(acc[0])
        if tx % 32 == 0:
            red2[tx // 32] = part2
        T.cuda.cta_sync()
        tot2 = T.cuda.warp_sum(T.if_then_else(tx % 32 < warps, red2[tx % 32], T.float32(0)))
        mv[1] = T.rsqrt(tot2 / T.float32(hidden) + eps)
        for it in T.unroll(k):
            c = (it * threads + tx) * VEC
            if exact or c < hidden:
                if not persistent:  # the persistent kernel holds gamma/beta across rows
                    load_gb(G, B, gr, br, 0, c)
                for v in T.unroll(VEC):
                    g = it * VEC + v if persistent else v
                    yr[v] = T.cast(
                        (T.cast(xr[it * VEC + v], "float32") - mv[0]) * mv[1] * gr[g] + br[g],
                        dtype,
                    )
                Y[row, T.Ramp(c, 1, VEC)] = yr[T.Ramp(0, 1, VEC)]

    @T.function
    def layernorm(
        X: T.Tensor((M, hidden), dtype, align=16),
        G: T.Tensor((hidden,), "float32", align=16),
        B: T.Tensor((hidden,), "float32", align=16),
        Y: T.Tensor((M, hidden), dtype, align=16),
        eps: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(launch=T.cuda.LaunchConfig(grid=M, block=threads))
        row = T.cuda.block_idx("x")
        tx = T.cuda.thread_idx("x")
        xr = T.alloc_local((k * VEC,), dtype)
        gr = T.alloc_local((VEC,), "float32")
        br = T.alloc_local((VEC,), "float32")
        yr = T.alloc_local((VEC,), dtype)
        red = T.alloc_shared((32,), "float32")
        red2 = T.alloc_shared((32,), "float32")
        acc = T.alloc_local((1,), "float32")
        mv = T.alloc_local((2,), "float32")
        one_row(X, G, B, Y, eps, row, tx, xr, gr, br, yr, red, red2, acc, mv)

    @T.function
    def layernorm_rows(
        X: T.Tensor((M, hidden), dtype, align=16),
        G: T.Tensor((hidden,), "float32", align=16),
        B: T.Tensor((hidden,), "float32", align=16),
        Y: T.Tensor((M, hidden), dtype, align=16),
        eps: T.float32,
        ctas: T.int32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=ctas, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=resident),
        )
        bid = T.cuda.block_idx("x")
        tx = T.cuda.thread_idx("x")
        xr = T.alloc_local((k * VEC,), dtype)
        gr = T.alloc_local((gvecs * VEC,), "float32")
        br = T.alloc_local((gvecs * VEC,), "float32")
        yr = T.alloc_local((VEC,), dtype)
        red = T.alloc_shared((32,), "float32")
        red2 = T.alloc_shared((32,), "float32")
        acc = T.alloc_local((1,), "float32")
        mv = T.alloc_local((2,), "float32")
        if bid < M:
            for it in T.unroll(k):
                c = (it * threads + tx) * VEC
                if exact or c < hidden:
                    load_gb(G, B, gr, br, it * VEC, c)
            # Single-buffered red/red2 are safe across rows: a warp writes red (row r + 1)
            # only after row r's second barrier, which every warp reaches after reading red
            # (row r); it writes red2 (row r + 1) only after row r + 1's first barrier, which
            # every warp reaches after reading red2 (row r).
            for r in range(T.truncdiv(M - bid + ctas - 1, ctas)):  # bid < M, ctas >= 1
                one_row(X, G, B, Y, eps, bid + r * ctas, tx, xr, gr, br, yr, red, red2, acc, mv)

    return layernorm_rows if persistent else layernorm


def make(kind: str, dtype: str, hidden: int, weight_bias: float = 0.0, **sched):
    """The PrimFunc of ``kind`` for one static shape; ``sched``: :func:`schedule`'s keywords."""
    if kind == "rmsnorm":
        return make_rmsnorm(dtype, hidden, weight_bias, **sched)
    if kind == "fused_add_rmsnorm":
        return make_fused_add_rmsnorm(dtype, hidden, weight_bias, **sched)
    if kind == "layernorm":
        return make_layernorm(hidden, **sched)
    raise ValueError(f"unknown norm kind {kind!r}")


@functools.cache
def _compiled(kind: str, dtype: str, hidden: int, weight_bias: float, sched: tuple):
    from tirx_kernels.core import toolchain

    func = make(kind, dtype, hidden, weight_bias, **dict(sched))
    return toolchain.compile(func, toolchain.gpu_arch() or "sm_90a")


def kernel_for(kind: str, dtype: str, hidden: int, tokens=None, weight_bias: float = 0.0):
    """The PrimFunc the host dispatches for ``tokens`` rows (get_kernel of the modules)."""
    return make(kind, dtype, hidden, weight_bias, **schedule(kind, hidden, tokens))


def launcher(
    kind: str,
    dtype: str,
    hidden: int,
    tokens: int,
    weight_bias: float = 0.0,
    sched: dict | None = None,
    device_index: int = 0,
):
    """``f(*tensors, eps)`` launching the kernel for ``tokens >= 1`` rows.

    ``sched``: make_* keywords (default: the host's :func:`schedule`); a persistent kernel
    gets ``ctas = min(tokens, SMs * resident CTAs per SM)`` appended.
    """
    sched = schedule(kind, hidden, tokens) if sched is None else sched
    exe = _compiled(kind, dtype, hidden, float(weight_bias), tuple(sorted(sched.items())))
    if not sched.get("persistent"):
        return exe
    k = sched.get("vecs_per_thread")
    from tirx_kernels.core import toolchain

    ctas = min(tokens, toolchain.sm_count(device_index) * rows_ctas_per_sm(hidden, k))
    return lambda *args: exe(*args, ctas)


def check_tensors(*tensors, hidden: int) -> None:
    """Raise ValueError for tensors the kernels cannot take (shape, device, contiguity)."""
    for t in tensors:
        if not t.is_cuda:
            raise ValueError("tensors must be on a CUDA device")
        if t.shape[-1] != hidden or not t.is_contiguous():
            raise ValueError(
                f"expected contiguous tensors with last dim {hidden}, got shape "
                f"{tuple(t.shape)} strides {t.stride()}"
            )
        if t.data_ptr() % 16:
            raise ValueError("tensors must be 16-byte aligned")


def dev(t) -> int:
    return t.device.index or 0


def rmsnorm(x, w, eps=1e-6, out=None, *, weight_bias=0.0):
    """FlashInfer ``rmsnorm`` (weight_bias 0) / ``gemma_rmsnorm`` (weight_bias 1) on 2D x."""
    if x.dim() != 2 or w.dim() != 1 or w.dtype != x.dtype:
        raise ValueError(
            "expected x of shape (tokens, hidden) and w of shape (hidden,), same dtype"
        )
    tokens, hidden = x.shape
    dtype = TORCH_TO_NAME.get(x.dtype)
    check_domain(dtype, hidden, tokens)
    out = torch.empty_like(x) if out is None else out
    check_tensors(x, w, out, hidden=hidden)
    if tokens:
        run = launcher("rmsnorm", dtype, hidden, tokens, float(weight_bias), device_index=dev(x))
        run(x, w, out, eps)
    return out


def fused_add_rmsnorm(x, residual, w, eps=1e-6, *, weight_bias=0.0):
    """FlashInfer ``fused_add_rmsnorm`` / ``gemma_fused_add_rmsnorm``: updates x and residual."""
    if x.dim() != 2 or residual.shape != x.shape or w.dim() != 1:
        raise ValueError("expected x, residual of shape (tokens, hidden) and w of shape (hidden,)")
    if residual.dtype != x.dtype or w.dtype != x.dtype:
        raise ValueError("x, residual and w must share one dtype")
    tokens, hidden = x.shape
    dtype = TORCH_TO_NAME.get(x.dtype)
    check_domain(dtype, hidden, tokens)
    check_tensors(x, residual, w, hidden=hidden)
    if tokens:
        kind = "fused_add_rmsnorm"
        run = launcher(kind, dtype, hidden, tokens, float(weight_bias), device_index=dev(x))
        run(x, residual, w, eps)


def layernorm(x, gamma, beta, eps=1e-6, out=None):
    """FlashInfer ``layernorm``: bf16 x, fp32 gamma and beta."""
    if x.dim() != 2 or gamma.dim() != 1 or beta.dim() != 1:
        raise ValueError("expected x of shape (tokens, hidden), gamma and beta of shape (hidden,)")
    if gamma.dtype != torch.float32 or beta.dtype != torch.float32:
        raise ValueError("gamma and beta must be float32 (FlashInfer's layernorm contract)")
    tokens, hidden = x.shape
    check_domain(TORCH_TO_NAME.get(x.dtype), hidden, tokens, bf16_only=True)
    out = torch.empty_like(x) if out is None else out
    check_tensors(x, gamma, beta, out, hidden=hidden)
    if tokens:
        run = launcher("layernorm", "bfloat16", hidden, tokens, device_index=dev(x))
        run(x, gamma, beta, out, eps)
    return out


def flashinfer_available() -> bool:
    try:
        import flashinfer.norm  # noqa: F401
    except Exception:
        return False
    return True


def dtype_tols(dtype: str) -> dict:
    """assert_close tolerances of a 16-bit output against an fp32 reference (a few ulps)."""
    return {"bfloat16": {"rtol": 1.6e-2, "atol": 1.6e-2}, "float16": {"rtol": 2e-3, "atol": 2e-3}}[
        dtype
    ]


def ulp_tols(dtype: str) -> dict:
    """assert_close tolerances between two implementations of the same arithmetic (~1 ulp)."""
    return {"bfloat16": {"rtol": 8e-3, "atol": 1e-5}, "float16": {"rtol": 1e-3, "atol": 1e-6}}[
        dtype
    ]


def assert_close(name: str, got, want, tols: dict) -> None:
    """torch.testing.assert_close with the worst element named in the message."""
    try:
        torch.testing.assert_close(got.float(), want.float(), **tols)
    except AssertionError as e:
        diff = (got.float() - want.float()).abs()
        idx = divmod(int(diff.argmax()), diff.shape[-1])
        raise AssertionError(
            f"{name}: max abs error {diff.max().item():.4g} at (row, col) {idx}: "
            f"got {got.flatten()[diff.argmax()].item()} want {want.flatten()[diff.argmax()].item()}"
            f"\n{e}"
        ) from None


def skip_unless_gpu(meta: dict) -> None:
    """unittest.SkipTest unless the visible GPU is one of the kernel's archs."""
    import unittest

    from tirx_kernels.core import toolchain

    arch = toolchain.gpu_arch()
    if arch not in meta["archs"]:
        raise unittest.SkipTest(f"needs a GPU of arch {meta['archs']}, found {arch}")


def randn(shape, dtype: str, seed: int, scale: float = 1.0, shift: float = 0.0):
    """Deterministic normal data (generated on the CPU, then moved to the GPU)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32) * scale + shift
    return t.to(DTYPES.get(dtype, torch.float32)).cuda()
