# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The split combines of dense MLA decode (port of ``csrc/smxx/decode/combine/combine.cu``).

Both merge the request's splits ``NSPL[b] .. NSPL[b + 1]`` of ``OACC`` / ``LACC`` with
log-sum-exp weights into ``OUT`` and ``LSE`` and skip a request of one split (the decode
kernel wrote it); ``$TIRX_FLASHMLA_COMBINE`` picks one (``_mla_decode_schedule``).

``make_combine`` ("row") -- one CTA of 128 threads per (request, query row),
each thread four of the 512 columns.

``make_combine_warp_rows`` ("warp", the default) -- one warp per
(request ``b``, query row ``r``), ``ROWS`` rows per CTA. The lanes share the splits' LSEs
for the max and the sum (warp reductions), then each lane owns 16 of the 512 output
columns (four 16-byte loads per split, coalesced over the warp) and stores them as 8-byte
bf16/fp16 quads.
"""

from __future__ import annotations

import functools
import math

from tirx_kernels.core.toolchain import T

from ._mla_decode_tirx import _CVT, D_V, check_static

ROWS = 8  # query rows (warps) of a combine CTA


@functools.cache
def make_combine_warp_rows(dtype="bfloat16", h_q=128, s_q=1):
    """Combine PrimFunc, a warp per row: out[b, r] = sum_i exp(lse_i - lse) O_i over the
    request's splits."""
    check_static(dtype, h_q, s_q)
    R = s_q * h_q
    B = T.dynamic("B")
    B1 = T.dynamic("B1")
    TOT = T.dynamic("TOT")
    f32 = "float32"
    quads = D_V // 128  # 4-column groups of a lane
    cvt = getattr(T.ptx.cvt.rn, _CVT[dtype]).f32

    @T.function
    def mla_combine_warp_rows(
        NSPL: T.Tensor((B1,), "int32", align=4),
        OACC: T.Tensor((TOT, R, D_V), f32, align=16),
        LACC: T.Tensor((TOT, R), f32),
        OUT: T.Tensor((B, R, D_V), dtype, align=8),
        LSE: T.Tensor((B, R), f32),
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=((R + ROWS - 1) // ROWS, B), block=32 * ROWS)
        )
        tid = T.cuda.thread_idx("x")
        lane = tid % 32
        r = T.cuda.block_idx("x") * ROWS + tid // 32
        b = T.cuda.block_idx("y")
        # a request of one split was written by the decode kernel (upstream skips it too)
        # (the last CTA's spare warps, where ROWS does not divide R, have no row)
        if (NSPL[b + 1] - NSPL[b] != 1) & (r < R):
            first = T.min(T.max(NSPL[b], 0), TOT)  # device-side guard: splits of OACC only
            last = T.min(T.max(NSPL[b + 1], first), TOT)
            mx = T.local_scalar(f32)
            mx = T.float32(-math.inf)
            for s in T.serial(first + lane, last, step=32):
                mx = T.max(mx, LACC[s, r])
            mx = T.cuda.warp_max(mx)
            safe = T.if_then_else(mx == T.float32(-math.inf), T.float32(0), mx)
            tot = T.local_scalar(f32)
            tot = T.float32(0)
            for s in T.serial(first + lane, last, step=32):
                tot = tot + T.exp(LACC[s, r] - safe)
            tot = T.cuda.warp_sum(tot)
            empty = tot == T.float32(0)
            lse = T.if_then_else(empty, T.float32(math.inf), safe + T.log(tot))
            acc = T.alloc_local((4 * quads,), f32)
            part = T.alloc_local((4 * quads,), f32)  # one split's columns: loads in flight together
            packed = T.alloc_local((2,), "uint32")
            for i in T.unroll(4 * quads):
                acc[i] = T.float32(0)
            if not empty:
                for s in T.serial(first, last):
                    w = T.exp(LACC[s, r] - lse)
                    for q in T.unroll(quads):
                        T.ptx["ld.global.v4.f32"](
                            part[4 * q],
                            part[4 * q + 1],
                            part[4 * q + 2],
                            part[4 * q + 3],
                            OACC.ptr_to([s, r, 128 * q + 4 * lane]),
                        )
                    for i in T.unroll(4 * quads):
                        acc[i] = acc[i] + w * part[i]
            for q in T.unroll(quads):
                cvt(packed[0], acc[4 * q + 1], acc[4 * q])
                cvt(packed[1], acc[4 * q + 3], acc[4 * q + 2])
                T.ptx["st.global.v2.b32"](
                    OUT.ptr_to([b, r, 128 * q + 4 * lane]), packed[0], packed[1]
                )
            if lane == 0:
                LSE[b, r] = lse

    return mla_combine_warp_rows


@functools.cache
def make_combine(dtype="bfloat16", h_q=128, s_q=1):
    """Combine PrimFunc: out[b, r] = sum_i exp(lse_i - lse) O_i over the request's splits."""
    check_static(dtype, h_q, s_q)
    R = s_q * h_q
    B = T.dynamic("B")
    B1 = T.dynamic("B1")
    TOT = T.dynamic("TOT")
    f32 = "float32"
    per = D_V // 128

    @T.function
    def mla_combine(
        NSPL: T.Tensor((B1,), "int32", align=4),
        OACC: T.Tensor((TOT, R, D_V), f32),
        LACC: T.Tensor((TOT, R), f32),
        OUT: T.Tensor((B, R, D_V), dtype),
        LSE: T.Tensor((B, R), f32),
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(R, B), block=128))
        tid = T.cuda.thread_idx("x")
        r = T.cuda.block_idx("x")
        b = T.cuda.block_idx("y")
        # a request of one split was written by the decode kernel (upstream skips it too)
        if NSPL[b + 1] - NSPL[b] != 1:
            first = T.min(T.max(NSPL[b], 0), TOT)  # device-side guard: splits of OACC only
            last = T.min(T.max(NSPL[b + 1], first), TOT)
            mx = T.local_scalar("float32")
            mx = T.float32(-math.inf)
            for s in T.serial(first, last):
                mx = T.max(mx, LACC[s, r])
            safe = T.if_then_else(mx == T.float32(-math.inf), T.float32(0), mx)
            tot = T.local_scalar(f32)
            tot = T.float32(0)
            for s in T.serial(first, last):
                tot = tot + T.exp(LACC[s, r] - safe)
            empty = tot == T.float32(0)
            lse = T.if_then_else(empty, T.float32(math.inf), safe + T.log(tot))
            acc = T.alloc_local((per,), f32)
            for v in T.unroll(per):
                acc[v] = T.float32(0)
            if not empty:
                for s in T.serial(first, last):
                    w = T.exp(LACC[s, r] - lse)
                    for v in T.unroll(per):
                        acc[v] = acc[v] + w * OACC[s, r, v * 128 + tid]
            for v in T.unroll(per):
                OUT[b, r, v * 128 + tid] = T.cast(acc[v], dtype)
            if tid == 0:
                LSE[b, r] = lse

    return mla_combine
