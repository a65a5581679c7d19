# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FP8 GEMM ``d = (a * sfa) @ (b * sfb)^T`` (NT, bf16 out) for sm_90a: the kernel module.

Port of DeepGEMM's sm90 1D2D kernel (``deep_gemm/include/deep_gemm/impls/
sm90_fp8_gemm_1d2d.cuh``; API ``csrc/apis/gemm.hpp``; test recipe ``tests/test_fp8_fp4.py``).
a (M, K) and b (N, K) are float8_e4m3fn with fp32 scales per 1x128 block of a (sfa) and
per 128x128 block of b (sfb); each K block's exact e4m3 products are summed in fp32 by the
tensor cores, scaled by sfa * sfb and added into an fp32 accumulator, rounded once to bf16.
Domain: N, K multiples of 128, any M (a kernel per (N, K, tile shape)). The public op is
``tirx_kernels.deepgemm.fp8_gemm_nt`` (``torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt``);
schedules in ``_gemm_1d2d_tirx`` (``prefetch``, default) and ``_gemm_tirx`` (``basic``,
``TIRX_DEEPGEMM_SCHEDULE=basic``). run_test checks the selected one with DeepGEMM's
``calc_diff`` against the fp32 product of the dequantized fp8 data; run_bench times it
beside the other schedule (``tirx_basic``), ``deep_gemm.fp8_gemm_nt`` (when sgl-deep-gemm is
installed) and torch's blockwise ``F.scaled_mm``.
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d
from tirx_kernels.deepgemm._gemm_schedule import (
    WIDE_BM,
    multicast,
    num_sms,
    pick_bn,
    pick_layout,
    pick_normal_layout,
    pick_wide_layout,
    schedule,
)
from tirx_kernels.deepgemm._gemm_tirx import make_fp8_gemm_nt
from tirx_kernels.deepgemm._quant import (
    calc_diff,
    get_mn_major_tma_aligned_tensor,
    per_block_cast_to_fp8,
    per_token_cast_to_fp8,
    sfa_rows,
)
from tirx_kernels.deepgemm.fp8_gemm import (
    compiled_fp8_gemm_nt,
    compiled_gemm_1d2d,
    fp8_gemm_nt,
    no_index,
    normal_options,
)

KERNEL_META = {
    "name": "deepgemm_fp8_gemm_nt",
    "category": "deepgemm",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FP8 e4m3 GEMM NT with 1x128 / 128x128 fp32 block scales (1D2D), bf16 out",
}

PUBLIC_OPS = ("deepgemm_fp8_gemm_nt",)

MAX_DIFF = 1e-5  # calc_diff bound (DeepGEMM's tests use 0.001 vs a bf16 reference)


_TEST_SHAPES = [
    (1, 4096, 4096),
    (7, 4096, 7168),
    (129, 128, 128),
    (333, 256, 384),
    (128, 7168, 7168),
    (1000, 2048, 7168),
    (4096, 4096, 4096),
    (4096, 7168, 7168),
]
_BENCH_SHAPES = [(128, 4096, 4096), (128, 7168, 7168), (4096, 4096, 4096), (4096, 7168, 7168)]

CONFIGS = [
    {"label": f"e4m3_m{m}_n{n}_k{k}", "dtype": "float8_e4m3fn", "M": m, "N": n, "K": k}
    for m, n, k in _TEST_SHAPES
]

BENCH_CONFIGS = [
    {"label": f"e4m3_m{m}_n{n}_k{k}", "dtype": "float8_e4m3fn", "M": m, "N": n, "K": k}
    for m, n, k in _BENCH_SHAPES
]


def get_kernel(M, N, K, **_):
    """The kernel the op launches for this shape under the selected schedule."""
    if schedule() == "basic":
        return make_fp8_gemm_nt(N, K, pick_bn(M, N, num_sms()))
    bm, bn, cluster, multicast_a = pick_normal_layout(M, N, K, num_sms(), multicast())
    options = normal_options(bm, bn)
    return make_gemm_1d2d(
        "normal", N, K, bm, bn, cluster=cluster, multicast_a=multicast_a, **options
    )


def prepare_data(M, N, K, seed=0, **_):
    """DeepGEMM's test data: a, b ~ N(0, 1) in bf16, cast per token (1x128) and per block
    (128x128) to e4m3 with fp32 scales; sfa in the MN-major TMA-aligned layout; d = NaN."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(N, K, device="cuda", generator=gen).to(torch.bfloat16)
    aq, sfa = per_token_cast_to_fp8(a)
    bq, sfb = per_block_cast_to_fp8(b)
    d = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    return aq, get_mn_major_tma_aligned_tensor(sfa), bq, sfb, d


def reference(aq, sfa, bq, sfb):
    """fp32 product of the dequantized operands (the exact values the kernel multiplies)."""
    a = aq.float() * sfa.repeat_interleave(128, dim=1)[:, : aq.shape[1]]
    bs = sfb.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    b = bq.float() * bs[: bq.shape[0], : bq.shape[1]]
    return a @ b.t()


def run_test(M, N, K, **_):
    """The public op vs the dequantized fp32 product (calc_diff <= 1e-5, no NaN); without an
    sm_90a GPU, compile to a cubin and skip."""
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        toolchain.compile_cubin(get_kernel(M, N, K))
        raise unittest.SkipTest(f"compiled to a cubin; no {KERNEL_META['archs']} GPU to run on")
    aq, sfa, bq, sfb, d = prepare_data(M, N, K)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    torch.cuda.synchronize()
    want = reference(aq, sfa, bq, sfb)
    if not torch.isfinite(d).all():
        raise AssertionError(f"deepgemm_fp8_gemm_nt M={M} N={N} K={K}: non-finite outputs")
    diff = calc_diff(d, want)
    if not diff <= MAX_DIFF:
        raise AssertionError(
            f"deepgemm_fp8_gemm_nt M={M} N={N} K={K}: calc_diff {diff:.3g} > {MAX_DIFF}"
        )
    max_abs = float((d.float() - want).abs().max())
    return {"calc_diff": diff, "max_abs_err": max_abs}


def scaled_mm_scales(sfa, sfb):
    """``(scale_a, scale_b)`` in the layouts torch's blockwise ``F.scaled_mm`` checks for
    ``scaled_mm(a, b.t(), ...)`` (ATen ``_check_deepseek_scale_stride``): ``scale_a``
    (M, K/128) column-major with stride (1, M) exactly (BlockWise1x128 on a), ``scale_b``
    (K/128, N/128) whose transpose is row-major (BlockWise128x128 on b.t()'s transpose)."""
    M, kb = sfa.shape
    scale_a = torch.empty_strided((M, kb), (1, M), dtype=torch.float32, device=sfa.device)
    scale_a.copy_(sfa)
    return scale_a, sfb.contiguous().t()


def scaled_mm_padded_b_scales(sfb):
    """``scale_b`` as torch's meta function for the recipe describes it: (L4, N/128) with
    stride (1, L4), L4 = K/128 rounded up to 4 (zero rows appended); the same tensor as
    :func:`scaled_mm_scales`' when K/128 % 4 == 0 (every DeepSeek-V3 K)."""
    nb, kb = sfb.shape
    l4 = -(-kb // 4) * 4
    padded = torch.zeros((nb, l4), dtype=torch.float32, device=sfb.device)
    padded[:, :kb] = sfb
    return padded.t()


def _build_scaled_mm(aq, sfa, bq, sfb):
    """torch's blockwise ``F.scaled_mm`` (1x128 x 128x128) launch, checked against the
    dequantized product; raises (recorded as the reference's error) where torch lacks it."""
    F = torch.nn.functional
    scaling = getattr(F, "ScalingType", None)
    if not hasattr(F, "scaled_mm") or scaling is None or not hasattr(scaling, "BlockWise1x128"):
        raise RuntimeError(f"torch {torch.__version__} has no blockwise F.scaled_mm")
    scale_a, scale_b = scaled_mm_scales(sfa, sfb)
    want = reference(aq, sfa, bq, sfb)
    errors = []
    # ATen's check (ScaledBlas.cpp) first; the meta function's K/128-padded B scales where
    # they differ (K/128 % 4 != 0)
    layouts = [scale_b]
    if sfb.shape[1] % 4:
        layouts.append(scaled_mm_padded_b_scales(sfb))
    for sb in layouts:

        def call(sb=sb):
            return F.scaled_mm(
                aq,
                bq.t(),
                scale_a,
                scaling.BlockWise1x128,
                sb,
                scaling.BlockWise128x128,
                output_dtype=torch.bfloat16,
            )

        try:
            diff = calc_diff(call(), want)
        except Exception as err:  # noqa: BLE001 - recorded, the next layout is tried
            errors.append(f"scale_b {tuple(sb.shape)}: {str(err).splitlines()[0]}")
            continue
        if diff <= 1e-3:
            return call
        errors.append(f"scale_b {tuple(sb.shape)}: calc_diff {diff:.3g} > 1e-3")
    raise RuntimeError("F.scaled_mm blockwise: " + "; ".join(errors))


def _builder(aq, sfa, bq, sfb, d, bm, bn, cluster=1, multicast_a=False, **options):
    """A bench builder of the prefetch kernel with this tile, CTA pair and options."""

    def build():
        N, K = bq.shape
        kernel = compiled_gemm_1d2d("normal", N, K, bm, bn, 1, cluster, multicast_a, **options)
        args = (aq, bq, sfa_rows(sfa), sfb, torch.empty_like(d), no_index(aq.device))
        return lambda: kernel(*args)

    return build


def run_bench(M, N, K, **options):
    """Kernel time (us) of ours (the selected schedule), the basic schedule (``tirx_basic``),
    the prefetch schedule with the other multicast choice where the model would pair CTAs
    (``tirx_multicast``, or ``tirx_no_multicast`` under ``TIRX_DEEPGEMM_MULTICAST=1``), the
    default's tiles without the L2 promotion and the TMA epilogue (``tirx_direct_store``)
    and with the opt-in lean K loop (``tirx_lean``),
    from M = 256 on the BLOCK_M the model did not pick (``tirx_bm256``, with its CTA pair, or
    ``tirx_narrow``, the 64- or 128-row tiles), where
    the pick is BLOCK_M 64 the same tile on one math warpgroup (``tirx_one_wg``, upstream's
    256-thread kernel),
    ``deep_gemm.fp8_gemm_nt`` and torch ``F.scaled_mm``."""
    aq, sfa, bq, sfb, d = prepare_data(M, N, K)
    data = (aq, sfa, bq, sfb, d)
    references = {}
    pick = pick_normal_layout(M, N, K, num_sms(), multicast())
    if schedule() != "basic":  # the tiles as before the L2 promotion and the TMA epilogue
        references["tirx_direct_store"] = _builder(*data, *pick)
        # and with the opt-in lean K loop
        lean = {**normal_options(*pick[:2]), "lean_loop": True}
        references["tirx_lean"] = _builder(*data, *pick, **lean)
    bm, bn, cluster = pick_layout(M, N, K, num_sms(), True)
    paired = cluster if multicast() else 1
    if schedule() != "basic" and cluster > 1:  # the model pairs CTAs: time the other choice
        other = 1 if multicast() else 2
        key = "tirx_no_multicast" if multicast() else "tirx_multicast"
        references[key] = _builder(*data, bm, bn, other, **normal_options(bm, bn))
    if schedule() != "basic" and bm == 64:  # one math warpgroup of m64nBN, timed beside
        one_wg = normal_options(bm, bn, consumers=1)
        references["tirx_one_wg"] = _builder(*data, bm, bn, consumers=1, **one_wg)
    if schedule() != "basic" and M >= WIDE_BM:  # the BLOCK_M the model did not pick
        if pick[0] == WIDE_BM:
            references["tirx_narrow"] = _builder(*data, bm, bn, paired, **normal_options(bm, bn))
        else:
            wide = pick_wide_layout(M, N, K, num_sms(), allow_b_pairs=multicast())
            references["tirx_bm256"] = _builder(*data, *wide, **normal_options(*wide[:2]))
    if schedule() != "basic":

        def build_basic():
            kernel = compiled_fp8_gemm_nt(N, K, pick_bn(M, N, num_sms()))
            sfa_t = sfa_rows(sfa)
            out = torch.empty_like(d)
            return lambda: kernel(aq, bq, sfa_t, sfb, out)

        references["tirx_basic"] = build_basic
    if testing.available("deep_gemm"):

        def build_deep_gemm():
            import deep_gemm

            out = torch.empty_like(d)
            return lambda: deep_gemm.fp8_gemm_nt((aq, sfa), (bq, sfb), out)

        references["deep_gemm"] = build_deep_gemm
    # lazy: a torch without the recipe (or a layout it rejects) fails only this entry
    references["torch_scaled_mm"] = lambda: _build_scaled_mm(aq, sfa, bq, sfb)
    return testing.bench(lambda: fp8_gemm_nt((aq, sfa), (bq, sfb), d), references, **options)


def public_calls(batch):
    """Our op for ``batch`` x 4096 x 4096 (per-call cost), beside ``deep_gemm.fp8_gemm_nt``
    where it is installed and torch's blockwise ``F.scaled_mm`` where this torch has it;
    each call returns the product."""
    aq, sfa, bq, sfb, d = prepare_data(batch, 4096, 4096)

    def ours():
        fp8_gemm_nt((aq, sfa), (bq, sfb), d)
        return d

    calls = {"tirx": ours}
    if testing.available("deep_gemm"):
        import deep_gemm

        def deep_gemm_call():
            deep_gemm.fp8_gemm_nt((aq, sfa), (bq, sfb), d)
            return d

        calls["deep_gemm"] = deep_gemm_call
    try:
        calls["torch_scaled_mm"] = _build_scaled_mm(aq, sfa, bq, sfb)
    except RuntimeError:  # no blockwise recipe in this torch: ours and DeepGEMM's only
        pass
    return calls
