# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Single-tile kernels that exercise every block once; for tests and first device runs.

``make_tile_kernel(n, k, mode, dtype)``: one CTA of one warpgroup computes
``C[64, n] = A[64, k] @ B[n, k]^T`` (16-bit in and out, f32 accumulation): TMA loads of both
operands in the ``mode`` tile format (one box per atom), an mbarrier ``Ring`` of one slot,
``k / 16`` wgmma steps with descriptors from :mod:`.wgmma`, and the ``store_acc`` epilogue.
A wrong swizzle, descriptor stride or fragment mapping shows as a wrong result (or an
illegal address: run it in a child process).
"""

from __future__ import annotations

from ..toolchain import T
from . import dsl
from .layouts import Swizzle, check_tile
from .wgmma import kmajor_descriptor_base, kstep_offset


def make_tile_kernel(
    n: int = 128, k: int = 64, mode: Swizzle = Swizzle.B128, dtype: str = "bfloat16"
):
    mode = Swizzle(mode)
    check_tile(64, k, 2, mode)
    check_tile(n, k, 2, mode)
    a_bytes, b_bytes = 64 * k * 2, n * k * 2
    b_off = -(-a_bytes // 1024) * 1024
    desc_a, desc_b = kmajor_descriptor_base(mode, 64), kmajor_descriptor_base(mode, n)
    ka = [kstep_offset(i, rows=64, elem_bytes=2, mode=mode) for i in range(k // 16)]
    kb = [kstep_offset(i, rows=n, elem_bytes=2, mode=mode) for i in range(k // 16)]

    # TIRx script: the parameter annotations are buffer specs (calls), not Python types.
    @T.function
    def tile_gemm(
        A: T.Tensor((64, k), dtype, align=16),  # type: ignore[valid-type]
        B: T.Tensor((n, k), dtype, align=16),  # type: ignore[valid-type]
        C: T.Tensor((64, n), dtype, align=16),  # type: ignore[valid-type]
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=b_off + b_bytes)
        )
        tid = T.cuda.thread_idx("x")
        arena = T.alloc_shared(((b_off + b_bytes) // 2,), dtype, scope="shared.dyn", align=1024)
        ring = dsl.Ring(1)
        if tid == 0:
            ring.init(1)
            ring.fence_init()
        T.cuda.cta_sync()
        ring.reset()
        acc = T.alloc_local((n // 2,), "float32")
        packed = T.local_scalar("uint32")
        if tid == 0:
            ring.producer_acquire()
            ring.producer_expect(a_bytes + b_bytes)
            sa = dsl.smem_view(arena, 0, (64, k), dtype, mode)
            sb = dsl.smem_view(arena, b_off, (n, k), dtype, mode)
            dsl.tma_load_tile(sa, A, ring.full_bar(), (0, 0), mode)
            dsl.tma_load_tile(sb, B, ring.full_bar(), (0, 0), mode)
        ring.consumer_wait()
        base = dsl.smem_addr(arena)
        dsl.wgmma_fence()
        dsl.mma_ksteps(
            acc,
            dsl.descriptor(desc_a, base),
            dsl.descriptor(desc_b, base + T.uint32(b_off)),
            ka,
            kb,
            T.bool(False),
            n,
            dtype,
        )
        dsl.wgmma_commit()
        dsl.wgmma_wait(0)
        dsl.store_acc(acc, C, 0, 0, n, 64, n, False, False, packed)

    return tile_gemm
