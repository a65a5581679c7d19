# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The ops' kernel arguments against the kernels' parameters, on the CPU.

Each public op runs its checks and scale-layout code on CPU tensors and hands its launch
arguments to a stand-in for the compiled kernel, which compares them with the kernel's
(uncompiled) parameters as the launch on the GPU does. The contiguous m-grouped op once
passed scales of the wrong shape, found only on the GPU."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import host, testing
from tirx_kernels.deepgemm import fp8_gemm, m_grouped
from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d
from tirx_kernels.deepgemm._gemm_tirx import make_fp8_gemm_nt
from tirx_kernels.deepgemm._quant import sfa_rows

E4M3, F32, BF16, I32 = torch.float8_e4m3fn, torch.float32, torch.bfloat16, torch.int32


@pytest.fixture
def launched(monkeypatch):
    """The kernels the ops launched; memory checks off (the tensors live on the CPU)."""
    funcs: list = []

    def gemm_1d2d(kind, N, K, bm, bn, num_groups=1, cluster=1, multicast_a=False, **options):
        return make_gemm_1d2d(
            kind, N, K, bm, bn, num_groups, cluster=cluster, multicast_a=multicast_a, **options
        )

    for module in (fp8_gemm, m_grouped):
        monkeypatch.setattr(
            module, "compiled_gemm_1d2d", testing.checked_launches(gemm_1d2d, funcs)
        )
        monkeypatch.setattr(module, "check_memory", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        fp8_gemm, "compiled_fp8_gemm_nt", testing.checked_launches(make_fp8_gemm_nt, funcs)
    )
    monkeypatch.setattr(host, "main_of", lambda executable: executable)
    for module in (fp8_gemm, m_grouped):  # plans of real kernels from other tests
        monkeypatch.setattr(module, "_PLANS", {})
    return funcs


@pytest.mark.parametrize("schedule", ["prefetch", "basic"])
@pytest.mark.parametrize("M", [1, 200, 1024])
def test_fp8_gemm_nt_launch_matches_the_kernel(launched, monkeypatch, schedule, M):
    monkeypatch.setenv("TIRX_DEEPGEMM_SCHEDULE", schedule)
    N, K = 256, 384
    a = (torch.zeros(M, K, dtype=E4M3), torch.ones(M, K // 128, dtype=F32))
    b = (torch.zeros(N, K, dtype=E4M3), torch.ones(N // 128, K // 128, dtype=F32))
    fp8_gemm.fp8_gemm_nt(a, b, torch.empty(M, N, dtype=BF16))
    assert len(launched) == 1


def test_fp8_gemm_nt_picks_its_kernel_once_per_call_signature(launched, monkeypatch):
    """The tile model runs on the first call of a signature only; a new M runs it again."""
    picks = []

    def pick_normal_layout(*args):
        picks.append(args[0])
        return (128, 128, 1, False)

    monkeypatch.setattr(fp8_gemm, "pick_normal_layout", pick_normal_layout)
    N, K = 256, 384
    b = (torch.zeros(N, K, dtype=E4M3), torch.ones(N // 128, K // 128, dtype=F32))
    for M in (200, 200, 200, 64):
        a = (torch.zeros(M, K, dtype=E4M3), torch.ones(M, K // 128, dtype=F32))
        fp8_gemm.fp8_gemm_nt(a, b, torch.empty(M, N, dtype=BF16))
    assert picks == [200, 64]
    assert len(launched) == 4


@pytest.mark.parametrize("G", [1, 3])
def test_m_grouped_contiguous_launch_matches_the_kernel(launched, G):
    M, N, K = 256, 256, 384
    a = (torch.zeros(M, K, dtype=E4M3), torch.ones(M, K // 128, dtype=F32))
    b = (torch.zeros(G, N, K, dtype=E4M3), torch.ones(G, N // 128, K // 128, dtype=F32))
    m_indices = torch.arange(M, dtype=I32) % G
    m_grouped.m_grouped_fp8_gemm_nt_contiguous(a, b, torch.empty(M, N, dtype=BF16), m_indices)
    assert len(launched) == 1


@pytest.mark.parametrize("expected_m", [1, 64, 256])
def test_m_grouped_masked_launch_matches_the_kernel(launched, expected_m):
    G, Mg, N, K = 3, 256, 256, 384
    a = (torch.zeros(G, Mg, K, dtype=E4M3), torch.ones(G, Mg, K // 128, dtype=F32))
    b = (torch.zeros(G, N, K, dtype=E4M3), torch.ones(G, N // 128, K // 128, dtype=F32))
    d = torch.empty(G, Mg, N, dtype=BF16)
    masked_m = torch.full((G,), expected_m, dtype=I32)
    m_grouped.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
    assert len(launched) == 1


def test_m_grouped_masked_picks_its_kernel_once_per_call(launched, monkeypatch):
    """The tile model runs on the first call of a signature and expected_m only."""
    picks = []

    def pick_block(m, *args, **kwargs):
        picks.append(m)
        return (64, 128)

    monkeypatch.setattr(m_grouped, "pick_block", pick_block)
    G, Mg, N, K = 3, 256, 256, 384
    a = (torch.zeros(G, Mg, K, dtype=E4M3), torch.ones(G, Mg, K // 128, dtype=F32))
    b = (torch.zeros(G, N, K, dtype=E4M3), torch.ones(G, N // 128, K // 128, dtype=F32))
    d = torch.empty(G, Mg, N, dtype=BF16)
    masked_m = torch.full((G,), 64, dtype=I32)
    for expected_m in (64, 64, 32):
        m_grouped.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
    assert picks == [64, 32]
    assert len(launched) == 3


def test_each_plan_binds_the_direct_launcher_on_its_first_call(launched, monkeypatch):
    """Dense, contiguous and masked: one bind per call signature, with the kernel's six
    arguments, then every call through the bound launcher."""
    binds, calls = [], []

    def direct_launcher(executable, *args):
        binds.append(len(args))
        return lambda *args: calls.append(len(args))

    monkeypatch.setattr(host, "direct_launcher", direct_launcher)
    monkeypatch.delenv("TIRX_DEEPGEMM_SCHEDULE", raising=False)
    G, M, N, K = 2, 256, 256, 384
    a = (torch.zeros(M, K, dtype=E4M3), torch.ones(M, K // 128, dtype=F32))
    b = (torch.zeros(N, K, dtype=E4M3), torch.ones(N // 128, K // 128, dtype=F32))
    bg = (torch.zeros(G, N, K, dtype=E4M3), torch.ones(G, N // 128, K // 128, dtype=F32))
    ag = (torch.zeros(G, M, K, dtype=E4M3), torch.ones(G, M, K // 128, dtype=F32))
    m_indices = torch.arange(M, dtype=I32) % G
    masked_m = torch.full((G,), 64, dtype=I32)
    for _ in range(2):
        fp8_gemm.fp8_gemm_nt(a, b, torch.empty(M, N, dtype=BF16))
        m_grouped.m_grouped_fp8_gemm_nt_contiguous(a, bg, torch.empty(M, N, dtype=BF16), m_indices)
        m_grouped.m_grouped_fp8_gemm_nt_masked(
            ag, bg, torch.empty(G, M, N, dtype=BF16), masked_m, 64
        )
    assert binds == [6, 6, 6] and calls == [6] * 6 and not launched


@pytest.mark.parametrize("cluster, multicast_a", [(1, False), (2, False), (2, True)])
@pytest.mark.parametrize("M", [1, 300])
def test_wide_tile_launch_matches_the_kernel(launched, M, cluster, multicast_a):
    """BLOCK_M 256 (opt-in, the bench's tirx_bm256): launched as the op launches its tiles."""
    N, K = 512, 384
    sfa = torch.ones(M, K // 128, dtype=F32)
    args = (torch.zeros(M, K, dtype=E4M3), torch.zeros(N, K, dtype=E4M3))
    args += (sfa_rows(sfa), torch.ones(N // 128, K // 128, dtype=F32))
    args += (torch.empty(M, N, dtype=BF16), torch.zeros(1, dtype=I32))
    fp8_gemm.compiled_gemm_1d2d("normal", N, K, 256, 128, 1, cluster, multicast_a)(*args)
    assert len(launched) == 1


def test_wide_tiles_are_for_the_normal_gemm_and_compile():
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_schedule import WIDE_BM, pick_layout

    with pytest.raises(ValueError, match="bm = 256 is for the normal GEMM only"):
        make_gemm_1d2d("masked", 512, 384, 256, 128, 4)
    assert pick_layout(4096, 4096, 4096, 132, True, bms=(WIDE_BM,))[0] == WIDE_BM
    assert toolchain.compile_cubin(make_gemm_1d2d("normal", 4096, 4096, 256, 128, cluster=2))


def test_a_sharing_pairs_take_the_n_tiles_two_by_two():
    """Upstream's cluster_n: the pair's CTAs load half of one A tile each and multicast it;
    the model prefers it for the large shapes, and it needs an even N-tile count."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_schedule import block_cycles, pick_wide_layout

    func = make_gemm_1d2d("normal", 4096, 4096, 256, 128, cluster=2, multicast_a=True)
    source = toolchain.cuda_source(toolchain.compile(func))
    assert source.count(", (ushort)3);") == 1  # one multicast TMA a K block: the A half
    assert toolchain.compile_cubin(func)
    with pytest.raises(ValueError, match="N / bn must be even"):
        make_gemm_1d2d("normal", 384, 256, 256, 128, cluster=2, multicast_a=True)
    assert pick_wide_layout(4096, 4096, 4096, 132) == (256, 128, 2, True)
    assert pick_wide_layout(4096, 384, 4096, 132)[3] is False  # 3 N tiles of 128: no pairs
    shared_b = block_cycles(4096, 4096, 4096, 1, 256, 128, 132, 2)
    shared_a = block_cycles(4096, 4096, 4096, 1, 256, 128, 132, 2, multicast_a=True)
    assert shared_a < shared_b < block_cycles(4096, 4096, 4096, 1, 256, 128, 132)


@pytest.mark.parametrize("bn", [32, 64, 128])
@pytest.mark.parametrize(("bm", "consumers"), [(64, 1), (64, 2), (128, 2), (256, 2)])
def test_the_consumer_warpgroups_cover_a_tile_once(bm, consumers, bn):
    """Every (row, column) of a tile belongs to one consumer warpgroup and wave: the BLOCK_M
    256 kernel once gave its second warpgroup a 64-row tile's column offset."""
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import warpgroup_origin, warpgroup_shape

    cover = torch.zeros(bm, bn, dtype=torch.int32)
    columns, waves = warpgroup_shape(bm, bn, consumers)
    for w in range(consumers):
        row, col = warpgroup_origin(bm, bn, w, consumers)
        for wave in range(waves):
            first = row + 128 * wave
            cover[first : first + 64, col : col + columns] += 1
    assert torch.equal(cover, torch.ones(bm, bn, dtype=torch.int32))


@pytest.mark.parametrize("bn", [64, 128])
def test_one_math_warpgroup_runs_256_threads_of_full_width_wgmmas(bn):
    """``consumers=1`` (upstream's BLOCK_M 64 kernel): a producer and one consumer
    warpgroup, ``m64nBN`` wgmmas, the B scales staged by 128 threads, four consumer warps
    freeing each slot; setmaxnreg within what the launch gave, the wgmmas asynchronous."""
    from tirx_kernels.core import toolchain

    func = make_gemm_1d2d("normal", 4096, 512, 64, bn, consumers=1)
    source, registers, spilled, serialized = toolchain.ptxas_report(func)
    assert f"m64n{bn}k32_f32_e4m3_e4m3" in source and f"m64n{bn // 2}k32" not in source
    assert source.count("bar_sync_count_sync((uint)1, (uint)128);") == 2
    assert "__launch_bounds__(256, 1)" in source
    assert not spilled and not serialized
    assert toolchain.setmaxnreg_shortfall(source, registers) == 0
    with pytest.raises(ValueError, match="consumers must be 2, or 1 with bm = 64"):
        make_gemm_1d2d("normal", 4096, 512, 128, 128, consumers=1)


def test_l2_promotion_reaches_the_operands_tensor_maps():
    """``l2_promotion=3`` (upstream's 256-byte L2 fills) on A's and B's tensor maps only;
    the default kernel's maps keep none."""
    from tirx_kernels.core import launch_spec, toolchain

    M, N, K = 256, 256, 384
    args = (torch.zeros(M, K, dtype=E4M3), torch.zeros(N, K, dtype=E4M3))
    args += (sfa_rows(torch.ones(M, K // 128, dtype=F32)), torch.ones(N // 128, K // 128))
    args += (torch.empty(M, N, dtype=BF16), torch.zeros(1, dtype=I32))

    def promotions(**options):
        func = make_gemm_1d2d("normal", N, K, 128, 128, **options)
        (launch,) = launch_spec.launch_spec(toolchain.host_code(toolchain.compile(func)), args)
        return sorted(m.l2_promotion for m in launch.maps)

    assert promotions() == [0, 0]
    assert promotions(l2_promotion=3) == [3, 3]


@pytest.mark.parametrize("bm, bn, consumers", [(128, 128, 2), (256, 128, 2), (64, 128, 1)])
def test_tma_store_stages_d_through_shared_memory(bm, bn, consumers):
    """``tma_store``: each consumer warpgroup stmatrixes its 64-column chunks into its own
    two staging tiles after the ring and stores them by TMA (a D tensor map beside A's and
    B's), synchronising on its own named barrier; the ring gives up what the tiles take."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.core.sm90.dsl import STAGING_BYTES
    from tirx_kernels.deepgemm._gemm_schedule import prefetch_stages

    K = 512
    func = make_gemm_1d2d("normal", 4096, K, bm, bn, consumers=consumers, tma_store=True)
    source, registers, spilled, serialized = toolchain.ptxas_report(func)
    chunks = (bm // 128 or 1) * (bn // consumers if bm == 64 else bn) // 64
    assert source.count("stmatrix_sync_aligned_m8n8_x4") == 4 * chunks + 1  # + decl
    assert source.count("tvm_builtin_ptx_cp_async_bulk_tensor_s2g") == chunks + 1  # + decl
    assert "st_global_b32(" not in source
    assert not spilled and not serialized
    assert toolchain.setmaxnreg_shortfall(source, registers) == 0
    staging = consumers * 2 * STAGING_BYTES
    assert prefetch_stages(bm, bn, K // 128, staging) < prefetch_stages(bm, bn, K // 128)


def test_tma_store_takes_the_normal_gemm_with_whole_chunks():
    for kind, bm, bn in (("masked", 128, 128), ("normal", 64, 64), ("normal", 128, 32)):
        with pytest.raises(ValueError, match="tma_store is for the normal GEMM"):
            make_gemm_1d2d(kind, 4096, 512, bm, bn, tma_store=True)


def test_the_op_stores_by_tma_where_warpgroups_own_whole_chunks():
    """The normal GEMM's defaults: 256-byte L2 fills always, the TMA epilogue where each
    consumer warpgroup's share is whole 64-column chunks."""
    from tirx_kernels.deepgemm.fp8_gemm import normal_options

    assert normal_options(128, 128) == {"l2_promotion": 3, "tma_store": True}
    assert normal_options(256, 64)["tma_store"] and normal_options(64, 128)["tma_store"]
    assert not normal_options(64, 64)["tma_store"]  # two warpgroups of 32 columns
    assert normal_options(64, 64, consumers=1)["tma_store"]
    assert not normal_options(128, 32)["tma_store"]


def test_lean_loop_addresses_the_ring_and_reads_scales_after_the_issue():
    """``lean_loop``: the ring's waits and arrivals take shared addresses taken once (no
    generic pointer converted per call), the scales are read after the first wgmma issue
    (as many reads as the default loop's: on 2026-12-06 a constexpr test of the unrolled
    wave index dropped them, and every output was NaN) and the kernel still assembles
    without spills."""
    from tirx_kernels.core import toolchain

    def scale_reads_and_issue(source):
        consumers = source.split("setmaxnreg_inc")[-1]  # the math warpgroups' branch
        reads = consumers.count("sfa_s_ptr[")
        return reads, consumers.index("sfa_s_ptr[") > consumers.index("mma_async")

    func = make_gemm_1d2d("normal", 4096, 512, 128, 128, tma_store=True, lean_loop=True)
    source, registers, spilled, serialized = toolchain.ptxas_report(func)
    default = toolchain.cuda_source(
        toolchain.compile(make_gemm_1d2d("normal", 4096, 512, 128, 128, tma_store=True))
    )
    assert scale_reads_and_issue(source) == (2, True)
    assert scale_reads_and_issue(default) == (2, False)
    assert "tirx_kernels_mbarrier_wait_at(" in source
    assert "tvm_builtin_cuda_mbarrier_wait(" not in source.split("__global__")[-1]
    assert not spilled and not serialized
    assert toolchain.setmaxnreg_shortfall(source, registers) == 0


def test_the_timeline_build_marks_each_phase_and_keeps_the_schedule():
    """``timeline=True`` (scripts/gemm_timeline.py) adds a buffer argument and begin/end
    marks of every event, without spills or serialized wgmmas; the default build's code is
    the same as without the option."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import EVENTS

    options = {"cluster": 2, "l2_promotion": 3, "tma_store": True}
    func = make_gemm_1d2d("normal", 4096, 512, 256, 128, timeline=True, **options)
    default = make_gemm_1d2d("normal", 4096, 512, 256, 128, **options)
    assert len(func.params) == len(default.params) + 1
    source, registers, spilled, serialized = toolchain.ptxas_report(func)
    assert not spilled and not serialized
    assert toolchain.setmaxnreg_shortfall(source, registers) == 0
    for event in EVENTS:
        assert source.count(f"timer_start_cuda({event},") == 1
        assert source.count(f"timer_end_cuda({event},") == 1
    assert "timer" not in default.script()
