# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Kernels built from tirx_kernels.core.sm90 blocks lower, generate the expected PTX and
assemble to sm_90a cubins with nvcc (no GPU needed). GPU runs: test_sm90_gpu.py."""

import shutil

import pytest

from tirx_kernels.core import toolchain
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.selftest import make_row_copy_kernel, make_tile_kernel
from tirx_kernels.core.sm90.wgmma import kmajor_descriptor_base

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


@pytest.mark.parametrize("mode", list(Swizzle))
def test_tile_kernel_source(mode):
    src = toolchain.cuda_source(toolchain.compile(make_tile_kernel(128, 64, mode)))
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in src
    assert "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes" in src
    assert "mbarrier.try_wait.parity" in src and "mbarrier.arrive.expect_tx" in src
    assert "cvt.rn.bf16x2.f32" in src
    # both descriptors carry our constant fields (LBO/SBO/layout type)
    for rows in (64, 128):
        assert f"{kmajor_descriptor_base(mode, rows)}ULL" in src
    # one TMA box per atom column block: 64 bf16 columns = 128 B / span per operand
    assert src.count("(&(tile_tensormap") == 2 * 128 // mode.span


@needs_nvcc
@pytest.mark.parametrize(
    "mode, n, k, dtype", [(Swizzle.B128, 256, 64, "bfloat16"), (Swizzle.B64, 64, 128, "float16")]
)
def test_tile_kernel_cubin(mode, n, k, dtype):
    assert len(toolchain.compile_cubin(make_tile_kernel(n, k, mode, dtype))) > 0


@needs_nvcc
def test_row_copy_kernel_bulk_stores_each_row():
    kernel = make_row_copy_kernel(64, 520)
    src = toolchain.cuda_source(toolchain.compile(kernel))
    assert "cp.async.bulk.global.shared::cta.bulk_group" in src
    assert "tirx_kernels_bulk_store((&(Y_ptr[(((int)threadIdx.x) * 520)]))" in src
    assert len(toolchain.compile_cubin(kernel)) > 0
    with pytest.raises(ValueError, match="multiple of 4"):
        make_row_copy_kernel(8, 6)


@needs_nvcc
def test_gemm_tail_shape_cubin():
    """The warp-specialized persistent GEMM (all blocks together) on a shape with M, N and
    K tails assembles without spills; its source has both register budgets, which fit the
    168 registers ptxas gives each of its 384 threads, and the ring protocol."""
    gemm = pytest.importorskip("tirx_kernels.basic._gemm_tirx")
    func = gemm.make_gemm(520, 264, "bfloat16")  # M is a run-time argument
    src, registers, spilled, serialized = toolchain.ptxas_report(func)
    assert (registers, spilled, serialized) == (168, 0, False)
    assert toolchain.setmaxnreg_shortfall(src, registers) == 0
    assert "__launch_bounds__(384, 1)" in src
    assert "setmaxnreg.dec.sync.aligned.u32 40" in src
    assert "setmaxnreg.inc.sync.aligned.u32 232" in src
    assert "wgmma.wait_group.sync.aligned 1" in src
    # TMA-store epilogue: stmatrix into swizzled staging, bulk tensor store, bulk groups
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in src
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in src
    assert "cp.async.bulk.wait_group.read" in src


@needs_nvcc
def test_gemm_cluster_multicast_cubin():
    """The cluster_m=2 variant: multicast TMA, remote mbarrier arrive, cluster barrier."""
    gemm = pytest.importorskip("tirx_kernels.basic._gemm_tirx")
    func = gemm.make_gemm(1000, 1000, "float16", cluster_m=2)
    src = toolchain.cuda_source(toolchain.compile(func))
    assert ".multicast::cluster" in src and "mapa.shared::cluster.u32" in src
    assert "mbarrier.arrive.shared::cluster.b64" in src and "barrier.cluster.wait" in src
    assert len(toolchain.compile_cubin(func)) > 0


def test_gemm_rejects_unsupported_shapes():
    gemm = pytest.importorskip("tirx_kernels.basic._gemm_tirx")
    for bad in [dict(N=64, K=100), dict(N=100, K=64), dict(N=0, K=64), dict(N=65536, K=65536)]:
        with pytest.raises(ValueError):
            gemm.make_gemm(dtype="bfloat16", **bad)
    with pytest.raises(ValueError):
        gemm.make_gemm(64, 64, "fp32")


@pytest.mark.parametrize(
    "producer, consumer, threads, registers, shortfall",
    [
        (24, 240, 384, 168, 0),  # upstream FA3's two consumers: 504 of 504
        (40, 232, 384, 168, 0),  # the GEMMs' split
        (32, 240, 384, 168, 8),  # 512 of 504: setmaxnreg.inc waits forever
        (32, 160, 512, 128, 0),  # three consumers
        (32, 168, 512, 128, 24),
    ],
)
def test_setmaxnreg_shortfall_counts_what_the_pool_lacks(
    producer, consumer, threads, registers, shortfall
):
    source = (
        f'extern "C" __global__ void __launch_bounds__({threads}, 1) k() {{\n'
        f'  asm volatile("setmaxnreg.dec.sync.aligned.u32 {producer};");\n'
        f'  asm volatile("setmaxnreg.inc.sync.aligned.u32 {consumer};");\n}}'
    )
    assert toolchain.setmaxnreg_shortfall(source, registers) == shortfall
    assert toolchain.setmaxnreg_shortfall(source.replace("setmaxnreg", "nop"), registers) == 0


def test_fence_registers_is_one_empty_asm_per_32_registers():
    """fence_registers passes each register by reference as an in-out operand ("+f" for
    fp32, "+r" for u32) of an empty asm volatile, 32 per statement: nvcc then keeps their
    computations on the side of a wgmma fence or wait where the program puts them."""
    from tirx_kernels.core.sm90 import dsl
    from tirx_kernels.core.toolchain import T

    @T.function
    def fenced(C: T.Tensor((64,), "float32"), D: T.Tensor((64,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        acc = T.alloc_local((40,), "float32")
        frag = T.alloc_local((5,), "uint32")
        for i in T.unroll(40):
            acc[i] = T.float32(i)
        for i in T.unroll(5):
            frag[i] = T.uint32(i)
        dsl.fence_registers(acc, 40)
        dsl.fence_registers(frag, 5)
        C[T.cuda.thread_idx("x")] = acc[3] + acc[39]
        D[T.cuda.thread_idx("x")] = frag[4]

    src = toolchain.cuda_source(toolchain.compile(fenced))
    assert '"+f"(r31) :: "memory")' in src and '"+f"(r32)' not in src
    assert "tirx_kernels_fence_f8(acc_ptr[32]," in src and "acc_ptr[39]);" in src
    assert "uint32_t& r4" in src and '"+r"(r4) :: "memory")' in src
    assert src.count("tirx_kernels_fence_f32(acc_ptr[0],") == 1


def test_ptxas_notes_of_serialized_wgmmas_are_recognized():
    note = (
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to non wgmma instructions defining accumulator registers of a wgmma "
        "between start and end of the pipeline stage in the function 'k'"
    )
    assert toolchain.WGMMA_SERIALIZED.search(note)
    assert not toolchain.WGMMA_SERIALIZED.search("ptxas info    : Used 58 registers")


@needs_nvcc
def test_tile_kernel_wgmmas_are_not_serialized():
    _, _, spilled, serialized = toolchain.ptxas_report(make_tile_kernel(128, 64, Swizzle.B128))
    assert (spilled, serialized) == (0, False)
