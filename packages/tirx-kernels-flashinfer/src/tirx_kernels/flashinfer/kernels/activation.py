# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fused gated activation: ``out[t, :] = act(x[t, :d]) * x[t, d:]`` (``act_and_mul``).

Port of FlashInfer's ``act_and_mul_kernel`` and of its Python wrappers ``silu_and_mul``,
``gelu_and_mul`` and ``gelu_tanh_and_mul``. Upstream sources (FlashInfer @ fb28d724):

- ``include/flashinfer/activation.cuh``: ``act_and_mul_kernel`` (one CTA per token, 16-byte
  vectors, fp32 math).
- ``flashinfer/jit/activation.py``: the launcher template and the three activation bodies.
- ``flashinfer/activation.py``: the Python wrappers and their input checks.

The formulas and numerics are identical in flashinfer-python 0.7.2.post1 (git beabf500), the
build used as the reference on the H200.

Numerics (as upstream, whose JIT builds with ``-use_fast_math``, as TIRx does): bf16/fp16 in and
out, fp32 math, output rounded to nearest.

- ``silu``:      ``v / (1 + __expf(-v))``
- ``gelu``:      ``v * 0.5 * (1 + erff(v * M_SQRT1_2))`` (exact erf form)
- ``gelu_tanh``: ``v * (0.5 * (1 + tanh.approx.f32(0.7978845608028654 * (v + 0.044715 v^3))))``
  (PTX ``tanh.approx.f32``, max relative error 2^-11, like upstream ``math::tanh``)

Schedule (ours, not upstream's, which walks a row with one CTA per token): the
``tokens * d / vec`` output vectors form one flat index space, so with few tokens a row is
spread over several CTAs (one DRAM round trip instead of upstream's serial walk).
``flat`` (silu, gelu_tanh): one 16-byte vector per thread, grid over all vectors.
``stream`` (gelu, whose erf costs ~30 instructions per element): at most the resident CTAs,
each thread strides over vectors with a register double buffer, so the next vector's loads
are in flight while the current one's math runs. Either schedule can be forced with
``schedule=``; the per-activation choice was measured on the H200 (see ``SCHEDULE``).

Dispatch domain (checked; anything else raises ValueError): input ``(..., 2 * d)`` contiguous,
16-byte aligned, dtype bfloat16 or float16; ``d % 4 == 0`` (upstream's wrapper requires the
row to be a multiple of 16 bytes, ``2 * d * 2 % 16 == 0``); ``tokens * 2 * d < 2**31``
(int32 indexing); ``act`` in ``silu``, ``gelu``, ``gelu_tanh``. ``d % 8 == 0`` uses 16-byte
vectors, ``d % 8 == 4`` 8-byte vectors (upstream handles that tail with scalar accesses).
"""

from __future__ import annotations

import functools
import unittest

import torch

from tirx_kernels.core import toolchain

from .._checks import assert_within

KERNEL_META = {
    "name": "act_and_mul",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "act(x[:, :d]) * x[:, d:] for silu / gelu / gelu_tanh (FlashInfer port)",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS: tuple[str, ...] = ()  # declared by the op layer (contract v2)

CONFIGS = [
    {"label": "silu_bf16_t1_d4096", "act": "silu", "dtype": "bfloat16", "tokens": 1, "d": 4096},
    {
        "label": "silu_bf16_t4113_d11008",
        "act": "silu",
        "dtype": "bfloat16",
        "tokens": 4113,
        "d": 11008,
    },
    {
        "label": "silu_fp16_t127_d14336",
        "act": "silu",
        "dtype": "float16",
        "tokens": 127,
        "d": 14336,
    },
    {"label": "silu_bf16_t7_d3420", "act": "silu", "dtype": "bfloat16", "tokens": 7, "d": 3420},
    {"label": "gelu_bf16_t33_d18944", "act": "gelu", "dtype": "bfloat16", "tokens": 33, "d": 18944},
    {
        "label": "gelu_fp16_t1001_d4096",
        "act": "gelu",
        "dtype": "float16",
        "tokens": 1001,
        "d": 4096,
    },
    {
        "label": "gelu_tanh_bf16_t16_d14336",
        "act": "gelu_tanh",
        "dtype": "bfloat16",
        "tokens": 16,
        "d": 14336,
    },
    {
        "label": "gelu_tanh_fp16_t2049_d11008",
        "act": "gelu_tanh",
        "dtype": "float16",
        "tokens": 2049,
        "d": 11008,
    },
]

BENCH_CONFIGS = [
    {"label": "silu_bf16_t1_d14336", "act": "silu", "dtype": "bfloat16", "tokens": 1, "d": 14336},
    {"label": "silu_bf16_t16_d14336", "act": "silu", "dtype": "bfloat16", "tokens": 16, "d": 14336},
    {
        "label": "silu_bf16_t512_d14336",
        "act": "silu",
        "dtype": "bfloat16",
        "tokens": 512,
        "d": 14336,
    },
    {
        "label": "silu_bf16_t16384_d14336",
        "act": "silu",
        "dtype": "bfloat16",
        "tokens": 16384,
        "d": 14336,
    },
    {
        "label": "gelu_fp16_t4096_d11008",
        "act": "gelu",
        "dtype": "float16",
        "tokens": 4096,
        "d": 11008,
    },
    {
        "label": "gelu_tanh_bf16_t16384_d4096",
        "act": "gelu_tanh",
        "dtype": "bfloat16",
        "tokens": 16384,
        "d": 4096,
    },
    {
        "label": "silu_fp16_t16383_d18944",
        "act": "silu",
        "dtype": "float16",
        "tokens": 16383,
        "d": 18944,
    },
]

ACTS = ("silu", "gelu", "gelu_tanh")
DTYPES = ("bfloat16", "float16")
THREADS = 256
STREAM_CTAS_PER_SM = 6  # launch bound of the streaming kernel: <= 40 registers, 1536 threads/SM
SCHEDULES = ("stream", "flat")
# Measured on the H200 (proton): streaming pays only where the math is heavy (erf: gelu fp16
# t4096 d11008 74.9 us vs flat 79.6); for silu / gelu_tanh flat is faster (silu bf16 t16384
# d14336: 323 us vs 342).
SCHEDULE = {"silu": "flat", "gelu": "stream", "gelu_tanh": "flat"}


def _check_static(act, dtype, d):
    if act not in ACTS:
        raise ValueError(f"act_and_mul: act must be one of {ACTS}, got {act!r}")
    if dtype not in DTYPES:
        raise ValueError(f"act_and_mul: dtype must be one of {DTYPES}, got {dtype!r}")
    if not isinstance(d, int) or d <= 0 or d % 4 != 0:
        raise ValueError(f"act_and_mul: hidden size d must be a positive multiple of 4, got {d!r}")


def _gelu_tanh_inner(v):
    T = toolchain.T
    return T.float32(0.7978845608028654) * (v + T.float32(0.044715) * v * v * v)


def _activation(act, v, tanh_inner):
    """The upstream activation bodies, fp32 in and out (a TIRx expression).

    ``tanh_inner`` is ``tanh.approx(_gelu_tanh_inner(v))``, used by ``gelu_tanh`` only.
    """
    T = toolchain.T
    one, half = T.float32(1.0), T.float32(0.5)
    if act == "silu":
        return v / (one + T.call_pure_extern("__expf", -v, ty="float32"))
    if act == "gelu":
        alpha = T.float32(0.70710678118654752440)  # M_SQRT1_2
        return v * half * (one + T.call_pure_extern("erff", v * alpha, ty="float32"))
    return v * (half * (one + tanh_inner))


def get_kernel(act="silu", dtype="bfloat16", d=4096, schedule=None, threads=THREADS, **_):
    """The TIRx kernel for one (act, dtype, d); the token count is dynamic.

    ``stream``: a grid of at most the resident CTAs (runtime scalar ``ctas``) strides over the
    output vectors, prefetching the next vector's inputs before computing the current one,
    so loads overlap the math (erf is ~30 instructions per element). ``flat``: one vector per
    thread, grid over all vectors.
    """
    _check_static(act, dtype, d)
    schedule = schedule or SCHEDULE[act]
    if schedule not in SCHEDULES:
        raise ValueError(f"act_and_mul: schedule must be one of {SCHEDULES}, got {schedule!r}")
    T = toolchain.T
    f32 = "float32"
    vec = 8 if d % 8 == 0 else 4
    nv = d // vec  # vectors per output row
    use_tanh = act == "gelu_tanh"  # a Python bool: the branch below is resolved at trace time
    n = T.dynamic("n")

    # g >= 0: C division (trunc) skips the sign fix-ups of floor division.
    @T.inline
    def load(X, g, xa, xb):
        row, col = T.truncdiv(g, nv), T.truncmod(g, nv) * vec
        xa[T.Ramp(0, 1, vec)] = X[row, T.Ramp(col, 1, vec)]
        xb[T.Ramp(0, 1, vec)] = X[row, T.Ramp(d + col, 1, vec)]

    @T.inline
    def compute_store(Y, g, xa, xb, yo, th):
        for i in T.unroll(vec):
            v = T.cast(xa[i], f32)
            if use_tanh:  # PTX asm writes its result through a local register
                T.ptx.tanh.approx.f32(th[0], _gelu_tanh_inner(v))
            yo[i] = T.cast(_activation(act, v, th[0]) * T.cast(xb[i], f32), dtype)
        Y[T.truncdiv(g, nv), T.Ramp(T.truncmod(g, nv) * vec, 1, vec)] = yo[T.Ramp(0, 1, vec)]

    @T.function
    def act_and_mul_flat(X: T.Tensor((n, 2 * d), dtype), Y: T.Tensor((n, d), dtype)):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n * nv, threads), block=threads))
        g = T.cuda.block_idx("x") * threads + T.cuda.thread_idx("x")
        xa = T.alloc_local((vec,), dtype)
        xb = T.alloc_local((vec,), dtype)
        yo = T.alloc_local((vec,), dtype)
        th = T.alloc_local((1,), f32)
        if g < n * nv:
            load(X, g, xa, xb)
            compute_store(Y, g, xa, xb, yo, th)

    @T.function
    def act_and_mul_stream(
        X: T.Tensor((n, 2 * d), dtype), Y: T.Tensor((n, d), dtype), ctas: T.int32
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=ctas, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=STREAM_CTAS_PER_SM),
        )
        g0 = T.cuda.block_idx("x") * threads + T.cuda.thread_idx("x")
        stride = ctas * threads
        total = n * nv
        xa0 = T.alloc_local((vec,), dtype)
        xb0 = T.alloc_local((vec,), dtype)
        xa1 = T.alloc_local((vec,), dtype)
        xb1 = T.alloc_local((vec,), dtype)
        yo = T.alloc_local((vec,), dtype)
        th = T.alloc_local((1,), f32)
        if g0 < total:
            load(X, g0, xa0, xb0)
            # Two vectors per trip, register double buffer: each load is issued one
            # vector ahead of its math.
            for it in range(T.ceildiv(T.ceildiv(total - g0, stride), 2)):
                g = g0 + it * 2 * stride
                if g + stride < total:
                    load(X, g + stride, xa1, xb1)
                compute_store(Y, g, xa0, xb0, yo, th)
                if g + 2 * stride < total:
                    load(X, g + 2 * stride, xa0, xb0)
                if g + stride < total:
                    compute_store(Y, g + stride, xa1, xb1, yo, th)

    return act_and_mul_stream if schedule == "stream" else act_and_mul_flat


@functools.cache
def _compiled(act, dtype, d, schedule):
    return toolchain.compile(get_kernel(act, dtype, d, schedule=schedule))


def _launcher(act, dtype, d, schedule, tokens, device_index=0):
    """``f(x2d, out2d)`` launching the kernel for ``tokens`` rows (grid size bound here)."""
    schedule = schedule or SCHEDULE[act]
    ex = _compiled(act, dtype, d, schedule)
    if schedule == "flat":
        return ex
    nv = d // (8 if d % 8 == 0 else 4)
    ctas = min(-(-tokens * nv // THREADS), toolchain.sm_count(device_index) * STREAM_CTAS_PER_SM)
    return lambda x2, o2: ex(x2, o2, ctas)


def act_and_mul(x, act="silu", out=None, *, schedule=None):
    """``act(x[..., :d]) * x[..., d:]`` into ``out`` (allocated when None); returns ``out``."""
    if not isinstance(x, torch.Tensor) or not x.is_cuda:
        raise ValueError("act_and_mul: x must be a CUDA tensor")
    dtype = str(x.dtype).removeprefix("torch.")
    if x.dim() < 1 or x.shape[-1] % 2 != 0:
        raise ValueError(f"act_and_mul: last dim must be even (2 * d), got shape {tuple(x.shape)}")
    d = x.shape[-1] // 2
    _check_static(act, dtype, d)
    if not x.is_contiguous() or x.data_ptr() % 16 != 0:
        raise ValueError("act_and_mul: x must be contiguous and 16-byte aligned")
    tokens = x.numel() // (2 * d)
    if tokens * 2 * d >= 2**31:
        raise ValueError(f"act_and_mul: tokens * 2 * d = {tokens * 2 * d} exceeds int32 indexing")
    if out is None:
        out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
    elif (
        out.shape != (*x.shape[:-1], d)
        or out.dtype != x.dtype
        or out.device != x.device
        or not out.is_contiguous()
        or out.data_ptr() % 16 != 0
    ):
        raise ValueError("act_and_mul: out must be a contiguous, aligned (..., d) tensor like x")
    if tokens:
        launch = _launcher(act, dtype, d, schedule, tokens, x.device.index or 0)
        launch(x.view(tokens, 2 * d), out.view(tokens, d))
    return out


def prepare_data(act="silu", dtype="bfloat16", tokens=1, d=4096, **_):
    g = torch.Generator(device="cuda").manual_seed(1234 + tokens + d)
    x = torch.randn(tokens, 2 * d, generator=g, device="cuda", dtype=torch.float32)
    x = x.to(getattr(torch, dtype))
    out = torch.empty(tokens, d, device="cuda", dtype=x.dtype)
    return x, out


def reference(x, act):
    """torch fp32 reference: act(x[:, :d]) * x[:, d:]."""
    d = x.shape[-1] // 2
    a, b = x[..., :d].float(), x[..., d:].float()
    if act == "silu":
        y = torch.nn.functional.silu(a)
    elif act == "gelu":
        y = torch.nn.functional.gelu(a)
    else:
        y = torch.nn.functional.gelu(a, approximate="tanh")
    return y * b


def _flashinfer_fn(act):
    import flashinfer.activation as fa

    fns = {"silu": fa.silu_and_mul, "gelu": fa.gelu_and_mul, "gelu_tanh": fa.gelu_tanh_and_mul}
    return fns[act]


def _tolerances(act, dtype):
    # rtol: about one ulp of the output type; atol: tanh.approx (rel. error 2^-11) near
    # saturation shifts 0.5 * (1 + tanh) by up to ~2.5e-4 * |v|, i.e. ~1e-2 on randn data.
    rtol = 2**-7 if dtype == "bfloat16" else 2**-9
    atol = 1.5e-2 if act == "gelu_tanh" else 2e-3
    return atol, rtol


def run_test(act="silu", dtype="bfloat16", tokens=1, d=4096, schedule=None, **_):
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        raise unittest.SkipTest(f"needs one of {KERNEL_META['archs']}, have {toolchain.gpu_arch()}")
    x, out = prepare_data(act, dtype, tokens, d)
    act_and_mul(x, act, out, schedule=schedule)
    torch.cuda.synchronize()
    atol, rtol = _tolerances(act, dtype)
    report = {"max_err_torch": assert_within(out, reference(x, act), atol, rtol, "vs torch fp32")}
    try:
        fn = _flashinfer_fn(act)
    except ImportError:
        return report
    # Same formulas and fast-math intrinsics as upstream: at most one output ulp apart.
    want = fn(x)
    report["max_err_flashinfer"] = assert_within(out, want, 1e-6, rtol, "vs flashinfer")
    return report


def run_bench(
    act="silu",
    dtype="bfloat16",
    tokens=1,
    d=4096,
    *,
    warmup=None,
    repeat=None,
    timer=None,
    rounds=1,
    cooldown_s=1.0,
    **_,
):
    x, out = prepare_data(act, dtype, tokens, d)
    launch = _launcher(act, dtype, d, None, tokens, x.device.index or 0)
    x2, out2 = x.view(tokens, 2 * d), out.view(tokens, d)

    def tirx():
        launch(x2, out2)

    def build_flashinfer():
        fn = _flashinfer_fn(act)
        out_fi = torch.empty_like(out)
        fn(x, out=out_fi)  # JIT build and load outside timing
        return lambda: fn(x, out=out_fi)

    def build_torch():
        F = torch.nn.functional
        a, b = x[:, :d], x[:, d:]
        out_t = torch.empty_like(out)
        if act == "silu":
            return lambda: torch.mul(F.silu(a), b, out=out_t)
        if act == "gelu":
            return lambda: torch.mul(F.gelu(a), b, out=out_t)
        return lambda: torch.mul(F.gelu(a, approximate="tanh"), b, out=out_t)

    return toolchain.bench(
        {"tirx": tirx},
        references={"flashinfer": build_flashinfer, "torch": build_torch},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )
