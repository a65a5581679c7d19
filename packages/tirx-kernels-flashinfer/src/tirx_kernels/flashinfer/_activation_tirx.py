# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The fused gated activation kernels in TIRx: ``out[t, :] = act(x[t, :d]) * x[t, d:]``.

Port of FlashInfer's ``act_and_mul_kernel`` (``include/flashinfer/activation.cuh``) and of
the three activation bodies of ``flashinfer/jit/activation.py`` (FlashInfer @ fb28d724); the
numerics are stated in :mod:`.activation`.

Schedule (ours, not upstream's, which walks a row with one CTA per token): the
``tokens * d / vec`` output vectors form one flat index space, so with few tokens a row is
spread over several CTAs (one DRAM round trip instead of upstream's serial walk).
``flat`` (silu, gelu_tanh): one 16-byte vector per thread, grid over all vectors.
``stream`` (gelu, whose erf costs ~30 instructions per element): at most the resident CTAs,
each thread strides over vectors with a register double buffer, so the next vector's loads
are in flight while the current one's math runs. ``SCHEDULE`` is the host's choice per
activation; either can be forced with ``schedule=``. ``d % 8 == 0`` uses 16-byte vectors,
``d % 8 == 4`` 8-byte vectors (upstream handles that tail with scalar accesses).
"""

from __future__ import annotations

from tirx_kernels.core import toolchain

ACTS = ("silu", "gelu", "gelu_tanh")
DTYPES = ("bfloat16", "float16")
THREADS = 256
STREAM_CTAS_PER_SM = 6  # launch bound of the streaming kernel: <= 40 registers, 1536 threads/SM
SCHEDULES = ("stream", "flat")
# Streaming pays only where the math is heavy (erf); see docs/activation.md#schedule.
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


def get_act_and_mul_kernel(act="silu", dtype="bfloat16", d=4096, schedule=None, threads=THREADS):
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
    align = 2 * vec  # a vector's bytes: what the loads need (TIRx would ask 64 by default)
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
    def act_and_mul_flat(
        X: T.Tensor((n, 2 * d), dtype, align=align), Y: T.Tensor((n, d), dtype, align=align)
    ):
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
        X: T.Tensor((n, 2 * d), dtype, align=align),
        Y: T.Tensor((n, d), dtype, align=align),
        ctas: T.int32,
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
