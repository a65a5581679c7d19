# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The sm90 FP8 GEMM with 1D2D block scaling, ``D = (A * sfa) @ (B * sfb)^T`` in bf16.

Port of ``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh`` (the kernel) and
``csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp`` (its launch).

Numerics (as upstream): per 128-wide K block ``kb``, ``wgmma m64n128k32 e4m3`` accumulates
the block's products exactly into fp32 registers (``accum``); the block's sum is then
promoted into a second fp32 accumulator as ``final += sfa[row, kb] * sfb[n_blk, kb] *
accum`` -- the scales apply per K block, never once at the end. ``final`` is rounded once
to bf16 (round to nearest even).

Operands: A (M, K) e4m3 and B (N, K) e4m3, both K-major; ``sfa_t`` (K/128, MP >= M) fp32
holds A's 1x128 scales MN-major (``sfa_t[kb, m] = sfa[m, kb]``; MP is the row stride: M, or
M rounded up to 4 in upstream's ``get_mn_major_tma_aligned_tensor`` layout); ``sfb``
(N/128, K/128) fp32 holds B's 128x128 scales; D (M, N) bf16. M is a run-time size
(``T.dynamic``): one kernel per (N, K, BN). N % 128 == 0 and K % 128 == 0 (see ``fp8_gemm.py``
for what upstream allows).

Schedule (upstream's, reduced): 384 threads. Warpgroup 0 is the producer (``setmaxnreg``
40): one thread TMA-loads the A and B K-blocks (128 x 128 and BN x 128 e4m3, 128B swizzle)
into a full/empty mbarrier ring. Warpgroups 1 and 2 (``setmaxnreg`` 232) each own 64 rows
of the 128 x BN tile (BN = 128, or 64 for skinny M): per K block they read their two rows'
A scales and the tile's B scale (a 128-column scale block holds the whole tile) from global
memory before waiting for the data, issue 4 wgmmas ``m64nBNk32``, wait for them, free the
slot and promote. Persistent grid (one CTA per SM), tiles in grouped order; the epilogue stores
bf16 pairs from registers, clipped at M.
"""

from __future__ import annotations

import functools

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.wgmma import kmajor_descriptor_base, kstep_offset
from tirx_kernels.core.toolchain import T

from ._gemm_schedule import A_BYTES, BK, BM, BNS, GROUP_M, pick_stages
from ._gemm_schedule import num_sms as default_num_sms

FP8 = "float8_e4m3fn"
_PRODUCER_REGS, _CONSUMER_REGS = 40, 232
_MMA_K = 32  # e4m3 wgmma K per instruction (32 bytes, as a k16 step of 16-bit data)


def check_domain(N: int, K: int) -> None:
    """ValueError unless (N, K) is in the kernel's compile-time domain."""
    for name, v in (("N", N), ("K", K)):
        if not isinstance(v, int) or v < BK or v % BK:
            raise ValueError(f"fp8_gemm_nt: {name} must be a positive multiple of 128, got {v!r}")
    if N * K >= 2**31:
        raise ValueError("fp8_gemm_nt: N*K must be < 2^31 (int32 indexing)")


@functools.cache
def make_fp8_gemm_nt(
    N: int, K: int, bn: int = 128, num_sms: int | None = None, stages: int | None = None
):
    """The PrimFunc ``(a, b, sfa_t, sfb, d)`` for one (N, K) and N tile ``bn`` (128 or 64);
    M is a run-time size."""
    check_domain(N, K)
    if bn not in BNS:
        raise ValueError(f"fp8_gemm_nt: bn must be one of {BNS}, got {bn!r}")
    BN = bn
    B_BYTES = BN * BK
    num_sms = num_sms or default_num_sms()
    stages = stages or pick_stages(BN)
    smem = stages * (A_BYTES + B_BYTES)
    kb_count, nb_count = K // BK, N // BN
    sf_n_count = N // 128
    mode = Swizzle.B128
    desc = kmajor_descriptor_base(mode, BM)
    desc_b = kmajor_descriptor_base(mode, BN)
    a_steps = [kstep_offset(k, rows=BM, elem_bytes=1, mode=mode) for k in range(BK // _MMA_K)]
    b_steps = [kstep_offset(k, rows=BN, elem_bytes=1, mode=mode) for k in range(BK // _MMA_K)]
    M = T.dynamic("M")
    MP = T.dynamic("MP")  # sfa_t row stride: M, or M rounded up (TMA-aligned layout)

    @T.function
    def fp8_gemm_nt(
        A: T.Tensor((M, K), FP8, align=16),
        B: T.Tensor((N, K), FP8, align=16),
        SFA: T.Tensor((kb_count, MP), "float32", align=4),
        SFB: T.Tensor((sf_n_count, kb_count), "float32", align=4),
        D: T.Tensor((M, N), "bfloat16", align=16),
    ):
        dsl.persistent_entry(num_sms, 1, smem)
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        first = T.cuda.block_idx("x")
        num_m = T.truncdiv(M + (BM - 1), BM)
        total = num_m * nb_count
        arena = T.alloc_shared((smem,), FP8, scope="shared.dyn", align=1024)
        ring = dsl.Ring(stages)
        ring.setup(tid)
        if wg == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(_PRODUCER_REGS)
            if tid == 0:
                for t in T.serial(first, total, step=num_sms):
                    tm, tn = dsl.grouped_tile(t, num_m, nb_count, GROUP_M)
                    for kb in T.serial(kb_count):
                        ring.producer_acquire()
                        ring.producer_expect(A_BYTES + B_BYTES)
                        sa = dsl.smem_view(arena, ring.stage * A_BYTES, (BM, BK), FP8, mode)
                        dsl.tma_load_tile(sa, A, ring.full_bar(), (tm * BM, kb * BK), mode, 1)
                        sb = dsl.smem_view(
                            arena, stages * A_BYTES + ring.stage * B_BYTES, (BN, BK), FP8, mode
                        )
                        dsl.tma_load_tile(sb, B, ring.full_bar(), (tn * BN, kb * BK), mode, 1)
                        ring.advance()
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(_CONSUMER_REGS)
            acc = T.alloc_local((BN // 2,), "float32")
            final = T.alloc_local((BN // 2,), "float32")
            scale = T.alloc_local((2,), "float32")
            packed = T.local_scalar("uint32")
            lane = tid % 32
            base = dsl.smem_addr(arena)
            a_wg = T.uint32((wg - 1) * 64 * BK)  # this warpgroup's 64 rows of the A tile
            t_in = tid % 128
            r_in = (wg - 1) * 64 + 16 * (t_in // 32) + (t_in % 32) // 4
            for t in T.serial(first, total, step=num_sms):
                tm, tn = dsl.grouped_tile(t, num_m, nb_count, GROUP_M)
                # rows past M read row M - 1's scales; their outputs are never stored
                row0 = T.min(tm * BM + r_in, M - 1)
                row1 = T.min(tm * BM + r_in + 8, M - 1)
                for i in T.unroll(BN // 2):
                    final[i] = T.float32(0)
                for kb in T.serial(kb_count):
                    sfb = SFB[T.truncdiv(tn * BN, 128), kb]
                    scale[0] = SFA[kb, row0] * sfb
                    scale[1] = SFA[kb, row1] * sfb
                    ring.consumer_wait()
                    da = dsl.descriptor(desc, base + T.cast(ring.stage * A_BYTES, "uint32") + a_wg)
                    db = dsl.descriptor(
                        desc_b, base + T.cast(stages * A_BYTES + ring.stage * B_BYTES, "uint32")
                    )
                    dsl.wgmma_fence()
                    dsl.mma_ksteps(acc, da, db, a_steps, b_steps, T.bool(False), BN, FP8)
                    dsl.wgmma_commit()
                    dsl.wgmma_wait(0)
                    if lane == 0:
                        ring.consumer_release(ring.stage)
                    # registers 4j, 4j+1 are row r_in, 4j+2, 4j+3 row r_in + 8 (acc_coord)
                    for i in T.unroll(BN // 2):
                        final[i] = final[i] + scale[(i // 2) % 2] * acc[i]
                    ring.advance()
                dsl.store_acc(
                    final, D, tm * BM + (wg - 1) * 64, tn * BN, BN, M, N, True, False, packed
                )

    return fp8_gemm_nt
