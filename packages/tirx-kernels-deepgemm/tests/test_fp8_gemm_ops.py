# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``fp8_gemm_nt`` / ``torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt``: registration, argument
checks, the scale layouts and quantization helpers (CPU), the kernel's codegen."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core.ops import is_registered
from tirx_kernels.deepgemm import _gemm_schedule as schedule
from tirx_kernels.deepgemm._quant import (
    calc_diff,
    get_mn_major_tma_aligned_tensor,
    per_block_cast_to_fp8,
    per_token_cast_to_fp8,
)
from tirx_kernels.deepgemm.fp8_gemm import _check, fp8_gemm_nt, sfa_rows
from tirx_kernels.deepgemm.kernels import fp8_gemm_nt as kernel

E4M3, F32, BF16 = torch.float8_e4m3fn, torch.float32, torch.bfloat16


def test_the_op_is_registered_and_named_by_the_kernel_module():
    assert kernel.PUBLIC_OPS == ("deepgemm_fp8_gemm_nt",)
    assert is_registered("deepgemm_fp8_gemm_nt")


def _args(M=4, N=256, K=384, **over):
    args = {
        "d": torch.empty(M, N, dtype=BF16),
        "a": torch.zeros(M, K, dtype=E4M3),
        "sfa": torch.ones(M, K // 128, dtype=F32),
        "b": torch.zeros(N, K, dtype=E4M3),
        "sfb": torch.ones(N // 128, K // 128, dtype=F32),
    }
    args.update(over)
    return args


BAD = {
    "a_dtype": ({"a": torch.zeros(4, 384, dtype=BF16)}, "a must be torch.float8_e4m3fn"),
    "b_dtype": ({"b": torch.zeros(256, 384, dtype=BF16)}, "b must be torch.float8_e4m3fn"),
    "sfa_dtype": ({"sfa": torch.ones(4, 3, dtype=BF16)}, "sfa must be torch.float32"),
    "sfb_dtype": ({"sfb": torch.ones(2, 3, dtype=torch.int32)}, "sfb must be torch.float32"),
    "d_dtype": ({"d": torch.empty(4, 256, dtype=F32)}, "d must be torch.bfloat16"),
    "a_rank": ({"a": torch.zeros(384, dtype=E4M3)}, "a must be 2-D"),
    "b_k": ({"b": torch.zeros(256, 256, dtype=E4M3)}, "b must be 2-D .N, K. with a's K"),
    "k_align": (
        {
            "a": torch.zeros(4, 200, dtype=E4M3),
            "b": torch.zeros(256, 200, dtype=E4M3),
        },
        "K = a.shape.1. must be a positive multiple of 128",
    ),
    "n_align": (
        {"b": torch.zeros(200, 384, dtype=E4M3), "d": torch.empty(4, 200, dtype=BF16)},
        "N = b.shape.0. must be a positive multiple of 128",
    ),
    "sfa_shape": ({"sfa": torch.ones(4, 2, dtype=F32)}, r"sfa must be \(M, K/128\) = \(4, 3\)"),
    "sfb_shape": ({"sfb": torch.ones(3, 2, dtype=F32)}, r"sfb must be \(N/128, K/128\)"),
    "d_shape": ({"d": torch.empty(4, 128, dtype=BF16)}, r"d must be \(M, N\) = \(4, 256\)"),
    "cpu": ({}, "a must be a CUDA tensor"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_value_error_naming_them(case):
    over, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        _check(**_args(**over))


def test_the_op_and_the_wrapper_check_before_launching():
    args = _args(a=torch.zeros(4, 384, dtype=BF16))
    with pytest.raises(ValueError, match="a must be torch.float8_e4m3fn"):
        torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt(*args.values())
    good = _args()
    with pytest.raises(ValueError, match="c must be None"):
        fp8_gemm_nt((good["a"], good["sfa"]), (good["b"], good["sfb"]), good["d"], c=good["d"])
    with pytest.raises(ValueError, match="recipe must be None or"):
        fp8_gemm_nt(
            (good["a"], good["sfa"]), (good["b"], good["sfb"]), good["d"], recipe=(1, 1, 128)
        )
    with pytest.raises(ValueError, match="a must be a pair"):
        fp8_gemm_nt(good["a"], (good["b"], good["sfb"]), good["d"])


def test_aligned_mn_major_sfa_is_read_in_place_and_row_major_is_copied_aligned():
    """The kernel copies each K block's A scales as one 16-byte-aligned row: MP is M
    rounded up to 4 floats, in place or in a copy."""
    sfa = torch.arange(5 * 3, dtype=F32).view(5, 3)
    aligned = get_mn_major_tma_aligned_tensor(sfa)
    assert aligned.stride() == (1, 8) and torch.equal(aligned, sfa)
    view = sfa_rows(aligned)
    assert view.shape == (3, 8) and view.data_ptr() == aligned.data_ptr()
    assert torch.equal(view[:, :5], sfa.t())
    copied = sfa_rows(sfa)
    assert copied.shape == (3, 8) and torch.equal(copied[:, :5], sfa.t())
    assert sfa_rows(torch.empty(16, dtype=F32)[1:].view(5, 3)).data_ptr() % 16 == 0
    assert get_mn_major_tma_aligned_tensor(aligned) is aligned


def test_quantization_recipes_round_trip_within_e4m3_precision():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 256, generator=gen)
    q, sf = per_token_cast_to_fp8(x)
    assert q.dtype == E4M3 and sf.shape == (3, 2)
    back = q.float() * sf.repeat_interleave(128, dim=1)
    assert (back - x).abs().max() <= 2.0**-3 * x.abs().max()  # e4m3 keeps 3 mantissa bits
    w = torch.randn(256, 384, generator=gen)
    qw, sw = per_block_cast_to_fp8(w)
    assert sw.shape == (2, 3)
    assert float(qw.float().abs().max()) == 448.0  # each block's amax maps to e4m3's max


def test_calc_diff_is_zero_for_equal_and_positive_for_different():
    x = torch.randn(64, 64)
    assert calc_diff(x, x) == pytest.approx(0.0, abs=1e-12)
    assert calc_diff(x, -x) == pytest.approx(2.0)
    assert calc_diff(torch.zeros(3), torch.zeros(3)) == 0.0


def test_reference_applies_block_scales():
    aq = torch.ones(2, 256, dtype=E4M3)
    bq = torch.ones(128, 256, dtype=E4M3)
    sfa = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    sfb = torch.tensor([[0.5, 0.25]])
    want = torch.tensor([128 * (1 * 0.5 + 2 * 0.25), 128 * (3 * 0.5 + 4 * 0.25)])
    got = kernel.reference(aq, sfa, bq, sfb)
    assert torch.equal(got[:, 0], want) and torch.equal(got[:, 127], want)


@pytest.mark.parametrize("bn", schedule.BNS)
def test_ring_fits_shared_memory(bn):
    stages = schedule.pick_stages(bn)
    assert 4 <= stages <= schedule.MAX_STAGES
    assert stages * (schedule.A_BYTES + bn * schedule.BK) <= schedule.SMEM_BUDGET


def test_skinny_m_takes_the_narrow_n_tile():
    assert schedule.pick_bn(4096, 4096, 132) == 128
    assert schedule.pick_bn(128, 4096, 132) == 64
    assert schedule.pick_bn(1, 7168, 132) == 64
    assert schedule.pick_bn(512, 4224, 132) == 128  # 4 x 33 tiles: every SM has one


def test_block_choice_follows_upstreams_wave_model():
    assert schedule.pick_block(4096, 4096, 4096, 132) == (128, 128)
    assert schedule.pick_block(4096, 7168, 7168, 132) == (128, 128)
    assert schedule.pick_block(128, 4096, 4096, 132) == (64, 64)  # 128 CTAs, not 32
    assert schedule.pick_block(1, 4096, 4096, 132) == (64, 32)
    assert schedule.pick_block(256, 7168, 2048, 132, groups=8, bms=(128,))[0] == 128
    assert schedule.pick_block(1, 384, 256, 132)[1] in (32, 128)  # N % BLOCK_N == 0


@pytest.mark.parametrize("bm", schedule.BLOCK_MS)
@pytest.mark.parametrize("bn", schedule.BLOCK_NS)
def test_prefetch_ring_fits_shared_memory(bm, bn):
    stages = schedule.prefetch_stages(bm, bn)
    assert 4 <= stages <= schedule.PREFETCH_MAX_STAGES
    assert stages * (bm + bn) * schedule.BK <= schedule.SMEM_BUDGET


def test_schedule_switch(monkeypatch):
    monkeypatch.delenv("TIRX_DEEPGEMM_SCHEDULE", raising=False)
    assert schedule.schedule() == "prefetch"
    monkeypatch.setenv("TIRX_DEEPGEMM_SCHEDULE", "basic")
    assert schedule.schedule() == "basic"
    from tirx_kernels.deepgemm._gemm_tirx import make_fp8_gemm_nt

    bn = schedule.pick_bn(4096, 256, schedule.num_sms())
    assert kernel.get_kernel(4096, 256, 384) is make_fp8_gemm_nt(256, 384, bn)
    monkeypatch.setenv("TIRX_DEEPGEMM_SCHEDULE", "fast")
    with pytest.raises(ValueError, match="TIRX_DEEPGEMM_SCHEDULE must be one of"):
        schedule.schedule()


def test_the_normal_layout_ranks_256_row_tiles_from_m_256_on():
    """Upstream's rank of BLOCK_M 256 beside 64 and 128 (DeepGEMM's JIT picked 256 x 128
    with A shared by a CTA pair at M 4096 on the H200); below M 256, never; CTA pairs
    sharing B only with multicast allowed."""
    assert schedule.pick_normal_layout(4096, 4096, 4096, 132, False) == (256, 128, 2, True)
    assert schedule.pick_normal_layout(4096, 7168, 7168, 132, False) == (256, 128, 2, True)
    assert schedule.pick_normal_layout(1024, 4096, 4096, 132, False) == (256, 128, 1, False)
    assert schedule.pick_normal_layout(128, 4096, 4096, 132, True) == (64, 64, 1, False)
    assert schedule.pick_normal_layout(300, 4096, 7168, 132, False) == (128, 128, 1, False)
    for m, n, k in ((8192, 2112, 7168), (4096, 4096, 4096), (520, 7168, 2048)):
        bm, bn, cluster, multicast_a = schedule.pick_normal_layout(m, n, k, 132, False)
        assert cluster == 1 or multicast_a or bm != schedule.WIDE_BM
    assert schedule.pick_normal_layout(8192, 2112, 7168, 132, True) == (256, 64, 2, False)


def test_multicast_pairs_ctas_only_past_one_wave_and_is_opt_in(monkeypatch):
    assert schedule.pick_layout(4096, 4096, 4096, 132, True) == (128, 128, 2)
    assert schedule.pick_layout(128, 4096, 4096, 132, True)[2] == 1  # one wave: no pairs
    assert schedule.pick_layout(4096, 4096, 4096, 132, False) == (128, 128, 1)
    assert schedule.pick_layout(4096, 4096, 4096, 131, True)[2] == 1  # odd SM count
    assert schedule.block_cycles(128, 4096, 4096, 1, 128, 128, 132, cluster=2) == float("inf")
    monkeypatch.delenv("TIRX_DEEPGEMM_MULTICAST", raising=False)
    assert not schedule.multicast()
    monkeypatch.setenv("TIRX_DEEPGEMM_MULTICAST", "1")
    assert schedule.multicast()
    monkeypatch.setenv("TIRX_DEEPGEMM_MULTICAST", "yes")
    with pytest.raises(ValueError, match="TIRX_DEEPGEMM_MULTICAST must be 0 or 1"):
        schedule.multicast()


def test_multicast_kernel_launches_pairs_and_frees_slots_in_both_ctas():
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d

    src = toolchain.cuda_source(
        toolchain.compile(make_gemm_1d2d("normal", 256, 384, 128, 64, cluster=2))
    )
    assert "multicast__cluster" in src and "mapa" in src and "barrier_cluster_wait" in src
    with pytest.raises(ValueError, match="cluster must be 1, or 2 for the normal GEMM"):
        make_gemm_1d2d("masked", 256, 384, 128, 64, 2, cluster=2)


def test_scales_reach_the_consumers_through_shared_memory():
    """Upstream's scale path: the producer copies each K block's A scales with the stage
    (bulk copy on the stage's mbarrier), the consumers stage the tile's B scales between two
    barriers of theirs, and no global scale load is left in their K loop (one there stalled
    the next wgmma issue on its latency)."""
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d

    src = toolchain.cuda_source(toolchain.compile(make_gemm_1d2d("normal", 256, 384, 64, 64)))
    assert "m64n32k32_f32_e4m3_e4m3" in src  # BLOCK_M 64: each warpgroup half the columns
    producer, consumers = src.split("setmaxnreg_inc_sync_aligned_u32_232();")
    assert "complete_tx::bytes" in src  # the copy's definition, then the producer's one call
    assert producer.count("tirx_kernels_bulk_load(") == 2
    assert "SFA_ptr[" not in consumers and consumers.count("SFB_ptr[") == 1
    assert consumers.count("bar_sync_count_sync((uint)1, (uint)256);") == 2
    with pytest.raises(ValueError, match=r"\(bm, bn\) must be in"):
        make_gemm_1d2d("normal", 256, 384, 128, 256)


def test_kernel_issues_e4m3_k32_wgmma_and_takes_a_runtime_m():
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_tirx import make_fp8_gemm_nt

    src = toolchain.cuda_source(toolchain.compile(make_fp8_gemm_nt(256, 384, 128)))
    assert "m64n128k32_f32_e4m3_e4m3" in src
    narrow = toolchain.cuda_source(toolchain.compile(make_fp8_gemm_nt(256, 384, 64)))
    assert "m64n64k32_f32_e4m3_e4m3" in narrow
    assert "int M" in src and "int MP" in src  # one kernel for every M
    with pytest.raises(ValueError, match="K must be a positive multiple of 128"):
        make_fp8_gemm_nt(256, 200)


def test_scaled_mm_reference_gets_the_scale_layouts_torch_checks():
    sfa = get_mn_major_tma_aligned_tensor(torch.arange(6 * 3, dtype=F32).view(6, 3))
    sfb = torch.arange(2 * 3, dtype=F32).view(2, 3)
    scale_a, scale_b = kernel.scaled_mm_scales(sfa, sfb)
    assert scale_a.shape == (6, 3) and scale_a.stride() == (1, 6)  # stride (1, M), not MP
    assert torch.equal(scale_a, sfa)
    assert scale_b.shape == (3, 2) and scale_b.t().is_contiguous()
    assert torch.equal(scale_b.t(), sfb)
    padded = kernel.scaled_mm_padded_b_scales(sfb)
    assert padded.shape == (4, 2) and padded.stride() == (1, 4)  # K/128 = 3 rounded up to 4
    assert torch.equal(padded[:3], scale_b) and not padded[3].any()


def test_scaled_mm_reference_failure_is_one_runtime_error_naming_the_layouts():
    """Where torch cannot run the recipe (here: the CPU build), building the reference raises
    one RuntimeError (bench records it for that entry only) instead of aborting the bench."""
    gen = torch.Generator().manual_seed(0)
    aq, sfa = per_token_cast_to_fp8(torch.randn(4, 256, generator=gen))
    bq, sfb = per_block_cast_to_fp8(torch.randn(128, 256, generator=gen))
    try:
        call = kernel._build_scaled_mm(aq, sfa, bq, sfb)
    except RuntimeError as err:
        assert "scaled_mm" in str(err)
    else:
        assert calc_diff(call(), kernel.reference(aq, sfa, bq, sfb)) <= 1e-3
