# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Single-tile kernels that exercise every block once; for tests and first device runs.

``make_tile_kernel(n, k, mode, dtype)``: one CTA of one warpgroup computes
``C[64, n] = A[64, k] @ B[n, k]^T`` (16-bit in and out, f32 accumulation): TMA loads of both
operands in the ``mode`` tile format (one box per atom), an mbarrier ``Ring`` of one slot,
``k / 16`` wgmma steps with descriptors from :mod:`.wgmma`, and the ``store_acc`` epilogue.
A wrong swizzle, descriptor stride or fragment mapping shows as a wrong result (or an
illegal address: run it in a child process).

``make_row_copy_kernel(rows, cols)``: one CTA stages ``X[rows, cols]`` (fp32) in shared
memory, rows padded by 4 words, and writes each row to ``Y`` with one ``dsl.bulk_store``;
``Y == X`` checks the bulk copy's addresses and its wait.
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


def make_row_copy_kernel(rows: int = 64, cols: int = 520):
    if not (0 < rows <= 128 and cols > 0 and cols % 4 == 0):
        raise ValueError(f"rows in 1..128 and cols a positive multiple of 4, got {rows}, {cols}")
    stride = cols + 4  # words: keeps each row 16-byte aligned, as a bulk copy needs
    n = rows * cols

    @T.function
    def row_copy(
        X: T.Tensor((rows, cols), "float32", align=16),  # type: ignore[valid-type]
        Y: T.Tensor((rows, cols), "float32", align=16),  # type: ignore[valid-type]
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=rows * stride * 4)
        )
        tid = T.cuda.thread_idx("x")
        arena = T.alloc_shared((rows * stride,), "float32", scope="shared.dyn", align=128)
        for i in T.serial((n + 127) // 128):
            idx = i * 128 + tid
            if idx < n:
                arena[idx // cols * stride + idx % cols] = X[idx // cols, idx % cols]
        T.ptx.fence.proxy.async_.shared__cta()  # generic-proxy writes -> the copies' reads
        T.cuda.cta_sync()
        if tid < rows:
            src = dsl.smem_addr(arena) + T.cast(tid * stride * 4, "uint32")
            dsl.bulk_store(Y.ptr_to([tid, 0]), src, cols * 4)
            dsl.bulk_commit()
            dsl.bulk_wait(0)

    return row_copy
