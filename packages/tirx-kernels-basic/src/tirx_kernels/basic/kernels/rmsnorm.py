# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""RMSNorm: ``Y[m, :] = X[m, :] * rsqrt(mean(X[m, :]^2) + eps) * W``.

Numerics: bf16 or fp16 in and out (X, W, Y share the dtype); squares are summed in fp32 and
``x * rstd * w`` is formed in fp32 with a single rounding to the output dtype (as FlashInfer
does). The row sum has a fixed order, so results are deterministic run to run.

Dispatch domain: ``hidden`` static, ``hidden % 8 == 0`` and ``8 <= hidden <= 32768``
(other values raise ValueError); the batch ``M`` is dynamic (``T.dynamic``), any
``M >= 1``; row offsets are 64-bit, so ``M * hidden`` is not limited to int32.
X, W and Y must be contiguous and 16-byte aligned (torch allocations are).
Tested on the H200: hidden in {128, 1000, 2048, 4096, 5120, 8192, 16384}, batch 1 .. 16384,
and once 131075 x 16384 (M * hidden > 2^31, first/last rows checked).

Schedule: one CTA per row (``rows`` rows per CTA when a row is shorter than a warp). Each
of the ``tpr`` threads of a row holds ``per`` 16-byte vectors of X and of W in registers,
so X is read once and Y written once; the row is reduced with warp shuffles plus one
shared-memory exchange (one barrier) when it spans several warps. What matters at large
batch is bytes of X in flight per SM: 2048 threads x 2 vectors (32 registers a thread) or
1024 threads x 4 vectors (64 registers) -- both ~64 KiB. Measured on the H200 (proton,
cold L2): 4 vectors a thread is best for 4096 <= hidden <= 8192 (5-10% faster at batch
<= 128, equal at large batch), 2 elsewhere; 1 vector a thread lost 10-30% at large batch,
and a persistent grid that prefetches the next row never won (equal to 23% slower).
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.toolchain import T

KERNEL_META = {
    "name": "rmsnorm",
    "category": "basic",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "RMSNorm over the last dim, bf16/fp16 in/out, fp32 accumulation",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS: tuple[str, ...] = ()  # declared by the op layer (contract v2)

CONFIGS = [
    {"label": "bf16_t4113_h128", "dtype": "bfloat16", "batch": 4113, "hidden": 128},
    {"label": "bf16_t4113_h1000", "dtype": "bfloat16", "batch": 4113, "hidden": 1000},
    {"label": "bf16_t7_h2048", "dtype": "bfloat16", "batch": 7, "hidden": 2048},
    {"label": "bf16_t1_h4096", "dtype": "bfloat16", "batch": 1, "hidden": 4096},
    {"label": "bf16_t4113_h4096", "dtype": "bfloat16", "batch": 4113, "hidden": 4096},
    {"label": "bf16_t4113_h5120", "dtype": "bfloat16", "batch": 4113, "hidden": 5120},
    {"label": "bf16_t4096_h8192", "dtype": "bfloat16", "batch": 4096, "hidden": 8192},
    {"label": "bf16_t1_h16384", "dtype": "bfloat16", "batch": 1, "hidden": 16384},
    {"label": "fp16_t4113_h128", "dtype": "float16", "batch": 4113, "hidden": 128},
    {"label": "fp16_t1_h4096", "dtype": "float16", "batch": 1, "hidden": 4096},
    {"label": "fp16_t4096_h5120", "dtype": "float16", "batch": 4096, "hidden": 5120},
    {"label": "fp16_t4113_h8192", "dtype": "float16", "batch": 4113, "hidden": 8192},
    {"label": "fp16_t4113_h16384", "dtype": "float16", "batch": 4113, "hidden": 16384},
]

_BENCH_BATCHES = [1, 16, 128, 4113, 16384]

BENCH_CONFIGS = (
    [
        {"label": f"bf16_t{b}_h{h}", "dtype": "bfloat16", "batch": b, "hidden": h}
        for h in [4096, 8192]
        for b in _BENCH_BATCHES
    ]
    + [
        {"label": f"bf16_t{b}_h5120", "dtype": "bfloat16", "batch": b, "hidden": 5120}
        for b in [128, 16384]
    ]
    + [{"label": "bf16_t8192_h8192", "dtype": "bfloat16", "batch": 8192, "hidden": 8192}]
)

_DTYPES = {"bfloat16": ("bfloat16", torch.bfloat16), "float16": ("float16", torch.float16)}
_VEC = 8  # elements per 16-byte access
_MAX_HIDDEN = 32768
_THREADS_PER_SM = 2048


def _cdiv(a, b):
    return -(-a // b)


def _schedule(hidden):
    """Default (threads per row, rows per CTA, CTAs per SM for launch bounds) of a size."""
    nvec = hidden // _VEC
    if nvec <= 32:  # short rows share a warp, 8 warps a CTA
        tpr = 1 << (nvec - 1).bit_length()
        return tpr, 256 // tpr, 8
    per = 4 if 512 <= nvec <= 1024 else max(2, _cdiv(nvec, 1024))
    tpr = _cdiv(_cdiv(nvec, per), 32) * 32
    # 2 vectors: full occupancy at 32 registers; 4: half occupancy at 64 registers. Masked
    # (ragged) rows or more vectors (hidden > 16384): let ptxas choose rather than spill.
    if tpr * _cdiv(nvec, tpr) != nvec or per > 4:
        return tpr, 1, 1
    return tpr, 1, _THREADS_PER_SM // tpr // (1 if per <= 2 else 2)


def _check_domain(hidden, dtype):
    if dtype not in _DTYPES:
        raise ValueError(f"rmsnorm: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    if not isinstance(hidden, int) or hidden % _VEC != 0 or not _VEC <= hidden <= _MAX_HIDDEN:
        raise ValueError(
            f"rmsnorm: hidden must be a multiple of {_VEC} in [{_VEC}, {_MAX_HIDDEN}], "
            f"got {hidden!r}"
        )


@functools.cache
def make_rmsnorm(hidden, dtype="bfloat16", eps=1e-6, schedule=None):
    """The PrimFunc for one (hidden, dtype, eps); the batch M is dynamic.

    ``schedule`` overrides ``_schedule(hidden)``: (threads per row, rows per CTA, min CTAs
    per SM for the launch bounds, which caps registers per thread).
    """
    _check_domain(hidden, dtype)
    tpr, rows, min_blocks = schedule or _schedule(hidden)
    tdt = _DTYPES[dtype][0]
    nvec = hidden // _VEC
    per = _cdiv(nvec, tpr)  # vectors per thread
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
            col = (k * tpr + lane) * _VEC
            if T.constexpr(ragged):
                if col < hidden:
                    dst[T.Ramp(k * _VEC, 1, _VEC)] = src[T.Ramp(col, 1, _VEC)]
            else:
                dst[T.Ramp(k * _VEC, 1, _VEC)] = src[T.Ramp(col, 1, _VEC)]

    @T.macro
    def sum_squares(xa, lane, acc, red, grp):
        # Leaves the row's sum of squares in acc[0] of every lane; all threads must call it.
        acc[0] = T.float32(0)
        for k in T.unroll(per):
            for v in T.unroll(_VEC):
                xf = T.cast(xa[k * _VEC + v], "float32")
                if T.constexpr(ragged):
                    acc[0] = acc[0] + T.if_then_else(
                        (k * tpr + lane) * _VEC < hidden, xf * xf, T.float32(0)
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
            col = (k * tpr + lane) * _VEC
            for v in T.unroll(_VEC):
                yv[v] = T.cast(
                    T.cast(xa[k * _VEC + v], "float32")
                    * rstd
                    * T.cast(wr[k * _VEC + v], "float32"),
                    tdt,
                )
            if T.constexpr(ragged):
                if col < hidden:
                    yrow[T.Ramp(col, 1, _VEC)] = yv[T.Ramp(0, 1, _VEC)]
            else:
                yrow[T.Ramp(col, 1, _VEC)] = yv[T.Ramp(0, 1, _VEC)]

    @T.function
    def rmsnorm(
        X: T.Tensor((M, hidden), tdt), W: T.Tensor((hidden,), tdt), Y: T.Tensor((M, hidden), tdt)
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
        wr = T.alloc_local((per * _VEC,), tdt)
        xa = T.alloc_local((per * _VEC,), tdt)
        yv = T.alloc_local((_VEC,), tdt)
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


def get_kernel(hidden, dtype="bfloat16", eps=1e-6, **_):
    """The PrimFunc for ``hidden`` and ``dtype``; the batch is dynamic (ignored here)."""
    return make_rmsnorm(hidden, dtype, eps)


@functools.cache
def _compiled(hidden, dtype, eps):
    return toolchain.compile(make_rmsnorm(hidden, dtype, eps))


def prepare_data(batch, hidden, dtype="bfloat16", seed=0, **_):
    """X with a per-row scale (so a row mix-up shows), W around 1, Y pre-filled with NaN."""
    tdtype = _DTYPES[dtype][1]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    scale = torch.exp(torch.randn(batch, 1, device="cuda", generator=gen))
    x = (torch.randn(batch, hidden, device="cuda", generator=gen) * scale).to(tdtype)
    w = (1.0 + 0.5 * torch.randn(hidden, device="cuda", generator=gen)).to(tdtype)
    y = torch.full_like(x, float("nan"))
    return x, w, y


def reference(x, w, eps=1e-6):
    """fp32 RMSNorm of the (rounded) inputs."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def _assert_close(out, ref, what, dtype):
    # One output rounding: |err| <= 1/2 ulp <= 2^-8 (bf16) / 2^-11 (fp16) relative. fp32
    # sums in a different order can flip a tie, so allow one full ulp, plus an absolute
    # floor for fp16 subnormals.
    rtol = 2.0**-7 if dtype == "bfloat16" else 2.0**-10
    err = (out.float() - ref.float()).abs()
    bad = ~(err <= rtol * ref.float().abs() + 1e-6)  # NaN (an unwritten Y) is bad
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(
            f"rmsnorm vs {what}: {int(bad.sum())} mismatches, max error {float(err.max()):.3g}; "
            f"first at {idx}: got {float(out[idx]):.6g}, expected {float(ref[idx]):.6g}"
        )


def run_test(batch, hidden, dtype="bfloat16", eps=1e-6, **_):
    """One launch vs fp32 torch, and vs FlashInfer's rmsnorm when it is installed."""
    import importlib.util
    import unittest

    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        raise unittest.SkipTest(f"needs one of {KERNEL_META['archs']}, have {toolchain.gpu_arch()}")
    ex = _compiled(hidden, dtype, eps)
    x, w, y = prepare_data(batch, hidden, dtype)
    ex(x, w, y)
    torch.cuda.synchronize()
    _assert_close(y, reference(x, w, eps), "torch fp32", dtype)
    if importlib.util.find_spec("flashinfer") is not None:
        import flashinfer

        _assert_close(y, flashinfer.norm.rmsnorm(x, w, eps), "flashinfer", dtype)


def run_bench(
    batch,
    hidden,
    dtype="bfloat16",
    eps=1e-6,
    *,
    warmup=None,
    repeat=None,
    timer=None,
    rounds=1,
    cooldown_s=1.0,
    **_,
):
    """Kernel time (us) of ours, torch ``F.rms_norm`` and FlashInfer.

    Without FlashInfer installed, its builder's ImportError makes the bench report that
    reference as skipped, with the reason.
    """
    ex = _compiled(hidden, dtype, eps)
    x, w, y = prepare_data(batch, hidden, dtype)

    def build_torch():
        return lambda: torch.nn.functional.rms_norm(x, (hidden,), w, eps)

    def build_flashinfer():
        import flashinfer

        out = torch.empty_like(x)
        flashinfer.norm.rmsnorm(x, w, eps, out=out)  # JIT outside the timing
        return lambda: flashinfer.norm.rmsnorm(x, w, eps, out=out)

    return toolchain.bench(
        {"tirx": lambda: ex(x, w, y)},
        references={"torch": build_torch, "flashinfer": build_flashinfer},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )
