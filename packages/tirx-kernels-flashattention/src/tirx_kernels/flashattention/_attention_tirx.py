# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The sm_90a forward attention kernel, after FlashAttention-3's Hopper forward
(``hopper/flash_fwd_kernel_sm90.h``, ``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``,
``hopper/softmax.h``, ``hopper/mask.h``, ``hopper/epilogue_fwd.hpp``).

``O = softmax(Q K^T * scale) V`` per (batch, head), fp32 softmax and accumulation, bf16/fp16
in and out, plus ``LSE = log(sum(exp(Q K^T * scale)))`` per query row in fp32.

Tensors are passed as 2D views: Q ``[batch * seqlen_q, heads_q * d]``, K
``[batch * seqlen_k, heads_kv * d]``, V ``[batch * seqlen_k, heads_kv * dv]``, ``Out`` like Q
with dv, LSE ``[batch * heads_q * seqlen_q]`` (the contiguous ``(batch, heads, seqlen)``).

Schedule: one CTA per (128-row Q tile, head, batch), 384 threads = 3 warpgroups.
Warpgroup 0 is the producer: one thread TMA-loads the Q tile once and then K and V tiles
(kBlockN rows, 128B swizzle) into a ``stages``-slot full/empty mbarrier ring. Warpgroups 1
and 2 each own 64 Q rows: S = Q K^T with ``wgmma`` SS (both K-major), the masks (keys past
seqlen_k; causal, bottom-right aligned) and the online softmax on the f32 accumulator
fragment (rows reduced over the 4 lanes of a quad), P rounded to 16 bits in registers as the
A operand of ``wgmma`` RS for O += P V, with V read MN-major from the same shared tile
(``imm-trans-b``). Epilogue: O / rowsum and LSE stored from registers, clipped at seqlen_q.
A tile's K/V rows past seqlen_k belong to the next batch (or are zero-filled by TMA at the
end): they are masked to -inf in S, so their P is exactly 0.
"""

from __future__ import annotations

import functools
import math

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.wgmma import (
    kmajor_descriptor_base,
    kstep_offset,
    mnmajor_descriptor_base,
    mnmajor_kstep_offset,
)
from tirx_kernels.core.toolchain import T

from ._attention_schedule import BM, pick_tiles

DTYPES = ("bfloat16", "float16")
_PRODUCER_REGS, _CONSUMER_REGS = 40, 232
_CVT = {"bfloat16": "bf16x2", "float16": "f16x2"}
LOG2E = 1.4426950408889634


@functools.cache
def make_flash_fwd(
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv, dtype, causal, scale, bn=None, stages=None
):
    """The PrimFunc for one static problem (every size a positive int; ``scale`` a float)."""
    if dtype not in DTYPES:
        raise ValueError(f"flash_attn_fwd: dtype must be one of {DTYPES}, got {dtype!r}")
    for name, v in (
        ("batch", batch),
        ("seqlen_q", seqlen_q),
        ("seqlen_k", seqlen_k),
        ("heads_q", heads_q),
        ("heads_kv", heads_kv),
    ):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"flash_attn_fwd: {name} must be a positive int, got {v!r}")
    if heads_q % heads_kv:
        raise ValueError("flash_attn_fwd: heads_q must be a multiple of heads_kv")
    BN, nstages = pick_tiles(d, dv)
    BN, nstages = bn or BN, stages or nstages
    group = heads_q // heads_kv
    mode = Swizzle.B128
    q_bytes = BM * d * 2
    k_bytes = BN * d * 2
    v_bytes = BN * dv * 2
    stage_bytes = k_bytes + v_bytes
    smem = q_bytes + nstages * stage_bytes
    num_m = -(-seqlen_q // BM)
    total_n = -(-seqlen_k // BN)
    shift = seqlen_k - seqlen_q  # bottom-right causal alignment
    scale_log2 = float(scale) * LOG2E
    desc_q = kmajor_descriptor_base(mode, BM)
    desc_k = kmajor_descriptor_base(mode, BN)
    desc_v = mnmajor_descriptor_base(mode, BN)
    q_steps = [kstep_offset(k, rows=BM, elem_bytes=2, mode=mode) for k in range(d // 16)]
    k_steps = [kstep_offset(k, rows=BN, elem_bytes=2, mode=mode) for k in range(d // 16)]
    v_steps = [mnmajor_kstep_offset(k, mode=mode) for k in range(BN // 16)]
    cvt = getattr(T.ptx.cvt.rn, _CVT[dtype]).f32
    ninf = -math.inf

    @T.function
    def flash_fwd(
        Q: T.Tensor((batch * seqlen_q, heads_q * d), dtype, align=16),
        K: T.Tensor((batch * seqlen_k, heads_kv * d), dtype, align=16),
        V: T.Tensor((batch * seqlen_k, heads_kv * dv), dtype, align=16),
        Out: T.Tensor((batch * seqlen_q, heads_q * dv), dtype, align=16),
        LSE: T.Tensor((batch * heads_q * seqlen_q,), "float32", align=16),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(
                grid=(num_m, heads_q, batch), block=384, dynamic_smem_bytes=smem
            ),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        mb = num_m - 1 - T.cuda.block_idx("x")  # longest causal tiles first
        h = T.cuda.block_idx("y")
        b = T.cuda.block_idx("z")
        hk = h // group
        arena = T.alloc_shared((smem // 2,), dtype, scope="shared.dyn", align=1024)
        qbar = T.alloc_shared((1,), "uint64", align=8)
        ring = dsl.Ring(nstages)
        if tid == 0:
            ring.init(8)  # one elected lane per consumer warp
            T.ptx.mbarrier.init.shared.b64(qbar.ptr_to([0]), T.uint32(1))
            ring.fence_init()
        T.cuda.cta_sync()
        ring.reset()
        if T.constexpr(causal):
            n_blocks = T.min(total_n, (T.max(mb * BM + BM + shift, 0) + (BN - 1)) // BN)
        else:
            n_blocks = total_n
        if wg == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(_PRODUCER_REGS)
            if tid == 0:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(qbar.ptr_to([0]), T.uint32(q_bytes))
                _load_tile(
                    arena, 0, BM, d, Q, qbar.ptr_to([0]), b * seqlen_q + mb * BM, h * d, dtype
                )
                for it in T.serial(n_blocks):
                    ring.producer_acquire()
                    ring.producer_expect(stage_bytes)
                    slot = q_bytes + ring.stage * stage_bytes
                    kv_row = b * seqlen_k + it * BN
                    _load_tile(arena, slot, BN, d, K, ring.full_bar(), kv_row, hk * d, dtype)
                    _load_tile(
                        arena, slot + k_bytes, BN, dv, V, ring.full_bar(), kv_row, hk * dv, dtype
                    )
                    ring.advance()
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(_CONSUMER_REGS)
            s = T.alloc_local((BN // 2,), "float32")
            o = T.alloc_local((dv // 2,), "float32")
            p = T.alloc_local((BN // 4,), "uint32")
            m = T.alloc_local((2,), "float32")
            lsum = T.alloc_local((2,), "float32")
            corr = T.alloc_local((2,), "float32")
            mx = T.local_scalar("float32")
            msc = T.local_scalar("float32")
            rs = T.local_scalar("float32")
            packed = T.local_scalar("uint32")
            t = tid - 128 * wg
            lane = tid % 32
            row = mb * BM + (wg - 1) * 64 + 16 * (t // 32) + (t % 32) // 4  # query index, + 8 hh
            col = 2 * (t % 4)  # key column in the block, + 8 j + e
            base = dsl.smem_addr(arena)
            for i in T.unroll(dv // 2):
                o[i] = T.float32(0)
            for hh in T.unroll(2):
                m[hh] = T.float32(ninf)
                lsum[hh] = T.float32(0)
            T.cuda.mbarrier_wait(qbar.ptr_to([0]), 0)
            dq = dsl.descriptor(desc_q, base + T.uint32((wg - 1) * 64 * 128))
            for it in T.serial(n_blocks):
                ring.consumer_wait()
                kbase = base + T.cast(q_bytes + ring.stage * stage_bytes, "uint32")
                dk = dsl.descriptor(desc_k, kbase)
                dvd = dsl.descriptor(desc_v, kbase + T.uint32(k_bytes))
                # S = Q K^T
                dsl.wgmma_fence()
                dsl.mma_ksteps(s, dq, dk, q_steps, k_steps, T.bool(False), BN, dtype)
                dsl.wgmma_commit()
                dsl.wgmma_wait(0)
                # masks: keys past seqlen_k; causal (bottom-right aligned)
                for j in T.unroll(BN // 8):
                    for hh in T.unroll(2):
                        for e in T.unroll(2):
                            if T.constexpr(causal):
                                if (it * BN + 8 * j + col + e >= seqlen_k) | (
                                    it * BN + 8 * j + col + e > row + 8 * hh + shift
                                ):
                                    s[4 * j + 2 * hh + e] = T.float32(ninf)
                            else:
                                if it * BN + 8 * j + col + e >= seqlen_k:
                                    s[4 * j + 2 * hh + e] = T.float32(ninf)
                # online softmax (hopper/softmax.h), exponents in base 2
                for hh in T.unroll(2):
                    mx = m[hh]
                    for j in T.unroll(BN // 8):
                        for e in T.unroll(2):
                            mx = T.max(mx, s[4 * j + 2 * hh + e])
                    mx = T.cuda.warp_max(mx, 4)
                    msc = T.if_then_else(mx == T.float32(ninf), T.float32(0), mx * scale_log2)
                    corr[hh] = T.exp2(m[hh] * T.float32(scale_log2) - msc)
                    m[hh] = mx
                    rs = T.float32(0)
                    for j in T.unroll(BN // 8):
                        for e in T.unroll(2):
                            s[4 * j + 2 * hh + e] = T.exp2(
                                s[4 * j + 2 * hh + e] * T.float32(scale_log2) - msc
                            )
                            rs = rs + s[4 * j + 2 * hh + e]
                    lsum[hh] = lsum[hh] * corr[hh] + rs
                for j in T.unroll(dv // 8):
                    for hh in T.unroll(2):
                        for e in T.unroll(2):
                            o[4 * j + 2 * hh + e] = o[4 * j + 2 * hh + e] * corr[hh]
                # P to 16 bits: the k16 slice kk of S is the A fragment of P V's k-step kk
                for kk in T.unroll(BN // 16):
                    for r in T.unroll(4):
                        cvt(p[4 * kk + r], s[8 * kk + 2 * r + 1], s[8 * kk + 2 * r])
                # O += P V (V MN-major)
                dsl.wgmma_fence()
                _pv_ksteps(o, p, dvd, v_steps, dv, dtype)
                dsl.wgmma_commit()
                dsl.wgmma_wait(0)
                if lane == 0:
                    ring.consumer_release(ring.stage)
                ring.advance()
            # epilogue (hopper/softmax.h finalize, hopper/epilogue_fwd.hpp)
            for hh in T.unroll(2):
                rs = T.cuda.warp_sum(lsum[hh], 4)
                if (rs == T.float32(0)) | (rs != rs):
                    corr[hh] = T.float32(0)
                    msc = T.float32(ninf)
                else:
                    corr[hh] = T.float32(1) / rs
                    msc = m[hh] * T.float32(scale) + T.log(rs)
                if (t % 4 == 0) & (row + 8 * hh < seqlen_q):
                    LSE[(b * heads_q + h) * seqlen_q + row + 8 * hh] = msc
            for j in T.unroll(dv // 8):
                for hh in T.unroll(2):
                    for e in T.unroll(2):
                        o[4 * j + 2 * hh + e] = o[4 * j + 2 * hh + e] * corr[hh]
            dsl.store_acc(
                o,
                Out,
                b * seqlen_q + mb * BM + (wg - 1) * 64,
                h * dv,
                dv,
                b * seqlen_q + seqlen_q,
                heads_q * dv,
                True,
                False,
                packed,
            )

    return flash_fwd


def _load_tile(arena, offset, rows, cols, src, bar, row, col, dtype):
    """TMA-load ``src[row : row + rows, col : col + cols]`` into the K-major tile format at
    ``arena + offset``: one ``[rows, 64]`` 128B-swizzled view and box per 64-column block,
    block j at ``offset + j * rows * 128`` (Python-unrolled)."""
    mode = Swizzle.B128
    for j in range(cols // 64):
        view = dsl.smem_view(arena, offset + j * rows * 128, (rows, 64), dtype, mode)
        dsl.tma_load_tile(view, src, bar, (row, col + 64 * j), mode)


def _pv_ksteps(o, p, dvd, v_steps, dv, dtype):
    """O += P V over one K/V block: one ``wgmma`` RS per k16 step (Python-unrolled)."""
    for kk, off in enumerate(v_steps):
        dsl.mma_rs(o, p, 4 * kk, dvd + T.uint64(off >> 4), T.bool(True), dv, dtype, 1)
