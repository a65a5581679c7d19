# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The op on an sm_90a GPU (skipped elsewhere): DeepGEMM's calc_diff against the fp32
product of the dequantized data, for several M, both schedules and every tile shape."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import testing
from tirx_kernels.deepgemm import _gemm_schedule as schedule
from tirx_kernels.deepgemm import fp8_gemm as fp8_gemm_module
from tirx_kernels.deepgemm._quant import calc_diff
from tirx_kernels.deepgemm.fp8_gemm import (
    compiled_fp8_gemm_nt,
    compiled_gemm_1d2d,
    fp8_gemm_nt,
    no_index,
    sfa_rows,
)
from tirx_kernels.deepgemm.kernels import fp8_gemm_nt as kernel

pytestmark = testing.needs_gpu(kernel.KERNEL_META)


@pytest.mark.parametrize("name", schedule.SCHEDULES)
@pytest.mark.parametrize("M", [1, 7, 128, 129, 300])
def test_every_m_under_each_schedule(M, name, monkeypatch):
    monkeypatch.setenv("TIRX_DEEPGEMM_SCHEDULE", name)
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 256, 384, seed=M)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


def test_basic_schedule_serves_every_m_with_one_kernel(monkeypatch):
    monkeypatch.setenv("TIRX_DEEPGEMM_SCHEDULE", "basic")
    compiled_fp8_gemm_nt.cache_clear()
    monkeypatch.setattr(fp8_gemm_module, "_PLANS", {})  # plans of earlier tests hold their kernels
    for M in (1, 129, 300):
        aq, sfa, bq, sfb, d = kernel.prepare_data(M, 256, 384, seed=M)
        fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    assert compiled_fp8_gemm_nt.cache_info().currsize == 1  # N tile 64 for all of them


@pytest.mark.parametrize("bn", [128, 64])
@pytest.mark.parametrize("M", [1, 300])
def test_basic_n_tiles(M, bn):
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 384, 256, seed=M)
    compiled_fp8_gemm_nt(384, 256, bn)(aq, bq, sfa_rows(sfa), sfb, d)
    want = kernel.reference(aq, sfa, bq, sfb)
    assert calc_diff(d, want) <= kernel.MAX_DIFF


@pytest.mark.parametrize("K", [256, 384])  # even and odd K-block counts (the unroll by two)
@pytest.mark.parametrize("bn", schedule.BLOCK_NS)
@pytest.mark.parametrize("bm", schedule.BLOCK_MS)
@pytest.mark.parametrize("M", [1, 300])
def test_prefetch_tile_shapes(M, bm, bn, K):
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 384, K, seed=M)
    compiled_gemm_1d2d("normal", 384, K, bm, bn)(aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device))
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("M", [1, 65, 300])
def test_one_math_warpgroup(M, bn):
    """Upstream's BLOCK_M 64 kernel: one consumer warpgroup over the whole N tile."""
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 512, 384, seed=M)
    compiled_gemm_1d2d("normal", 512, 384, 64, bn, consumers=1)(
        aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device)
    )
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


@pytest.mark.parametrize("bm, bn, consumers", [(128, 128, 2), (256, 128, 2), (64, 64, 1)])
@pytest.mark.parametrize("M", [1, 300, 520])
def test_lean_loop(M, bm, bn, consumers):
    """The opt-in lean K loop (ring barriers by address, scales read after the wgmma issue)
    with the op's defaults."""
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 512, 384, seed=M)
    options = {"l2_promotion": 3, "tma_store": True, "lean_loop": True}
    compiled_gemm_1d2d("normal", 512, 384, bm, bn, consumers=consumers, **options)(
        aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device)
    )
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


@pytest.mark.parametrize("bm, bn, consumers", [(128, 128, 2), (256, 128, 2), (64, 128, 1)])
@pytest.mark.parametrize("M", [1, 65, 300, 520])
def test_tma_store(M, bm, bn, consumers):
    """D through shared memory by TMA stores, clipped at M (a multi-tile walk per CTA at 520:
    the staging tiles reused while earlier stores drain)."""
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 512, 384, seed=M)
    compiled_gemm_1d2d("normal", 512, 384, bm, bn, consumers=consumers, tma_store=True)(
        aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device)
    )
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


@pytest.mark.parametrize("bm, bn", [(128, 128), (64, 32)])
@pytest.mark.parametrize("M", [1, 300, 520])  # 300: an odd M-tile count, a spare tile per pair
def test_multicast_pairs(M, bm, bn):
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 512, 384, seed=M)
    compiled_gemm_1d2d("normal", 512, 384, bm, bn, cluster=2)(
        aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device)
    )
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF


def test_multicast_pairs_ctas_for_a_multi_wave_shape(monkeypatch):
    monkeypatch.delenv("TIRX_DEEPGEMM_SCHEDULE", raising=False)
    monkeypatch.setenv("TIRX_DEEPGEMM_MULTICAST", "1")
    M, N, K = 2048, 2048, 1024
    assert schedule.pick_layout(M, N, K, schedule.num_sms(), True)[2] == 2
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, N, K)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    assert calc_diff(d, kernel.reference(aq, sfa, bq, sfb)) <= kernel.MAX_DIFF


def test_row_major_sfa_gives_the_same_result_and_m0_is_a_no_op():
    aq, sfa, bq, sfb, d = kernel.prepare_data(65, 256, 384)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    d2 = torch.empty_like(d)
    torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt(d2, aq, sfa.contiguous(), bq, sfb)
    assert torch.equal(d, d2)
    empty = torch.empty(0, 256, dtype=torch.bfloat16, device="cuda")
    fp8_gemm_nt((aq[:0], sfa[:0]), (bq, sfb), empty)


@pytest.mark.parametrize("cluster, multicast_a", [(1, False), (2, False), (2, True)])
@pytest.mark.parametrize("K", [256, 384])
@pytest.mark.parametrize("M", [1, 300, 520])  # a half-empty second half; a spare pair tile
def test_wide_tiles_both_halves(M, K, cluster, multicast_a):
    """BLOCK_M 256 (opt-in): each 128-row half of every tile, not only the whole, matches."""
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 512, K, seed=M + K)
    compiled_gemm_1d2d("normal", 512, K, schedule.WIDE_BM, 128, 1, cluster, multicast_a)(
        aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device)
    )
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    for rows in torch.arange(M, device=d.device).split(128):
        assert calc_diff(d[rows], want[rows]) <= kernel.MAX_DIFF, f"rows {int(rows[0])}.."


@pytest.mark.parametrize("cluster, multicast_a", [(1, False), (2, False), (2, True)])
def test_wide_tiles_walked_by_few_ctas(cluster, multicast_a):
    """BLOCK_M 256 on a 4-CTA grid: each CTA walks four tiles (a partial last M tile among
    them) of eight K blocks, so every slot of the 4-stage ring is used and reused."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d

    M, N, K = 1000, 512, 1024
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, N, K, seed=cluster)
    func = make_gemm_1d2d(
        "normal", N, K, schedule.WIDE_BM, 128, num_sms=4, cluster=cluster, multicast_a=multicast_a
    )
    toolchain.compile(func)(aq, bq, sfa_rows(sfa), sfb, d, no_index(aq.device))
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    for rows in torch.arange(M, device=d.device).split(128):
        assert calc_diff(d[rows], want[rows]) <= kernel.MAX_DIFF, f"rows {int(rows[0])}.."


@pytest.mark.parametrize("batch", [1, 16])
def test_public_calls_compute_the_same_product(batch):
    """Each callable the per-call table times (ours, DeepGEMM's and torch's blockwise
    scaled_mm where installed) gives the dequantized product: they time the same work."""
    want = kernel.reference(*kernel.prepare_data(batch, 4096, 4096)[:4])
    for name, call in kernel.public_calls(batch).items():
        got = call().clone()  # ours and DeepGEMM's write the same output tensor
        bound = 1e-3 if name == "torch_scaled_mm" else kernel.MAX_DIFF  # _build_scaled_mm's
        assert calc_diff(got, want) <= bound, name
