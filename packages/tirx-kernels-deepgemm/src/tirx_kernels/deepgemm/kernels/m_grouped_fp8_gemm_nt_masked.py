# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""M-grouped FP8 GEMM, masked layout (MoE decode, CUDA graphs), for sm_90a: the kernel module.

Port of DeepGEMM's sm90 1D2D kernel with ``GemmType::MGroupedMasked``
(``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh``,
``deep_gemm/include/deep_gemm/scheduler/gemm.cuh``; API ``csrc/apis/gemm.hpp``; test data as
``tests/generators.py`` ``generate_m_grouped_masked``). a (G, M, K) e4m3, b (G, N, K) e4m3,
fp32 1x128 / 128x128 scales, bf16 d (G, M, N); only the first ``masked_m[g]`` rows of group g
(an int32 device tensor) are computed and written. The public op is
``tirx_kernels.deepgemm.m_grouped_fp8_gemm_nt_masked``. run_test checks the valid rows with
DeepGEMM's ``calc_diff`` against the fp32 products of the dequantized data (and that rows
past ``masked_m`` are left alone); run_bench times it beside
``deep_gemm.m_grouped_fp8_gemm_nt_masked`` when sgl-deep-gemm is installed. Configs:
DeepSeek-V3 MoE GEMMs (N x K = 4096 x 7168, 7168 x 2048), 4-32 groups.
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d
from tirx_kernels.deepgemm._gemm_schedule import num_sms, pick_block
from tirx_kernels.deepgemm._quant import calc_diff, per_block_cast_to_fp8, per_token_cast_to_fp8
from tirx_kernels.deepgemm.m_grouped import m_grouped_fp8_gemm_nt_masked

KERNEL_META = {
    "name": "deepgemm_m_grouped_fp8_gemm_nt_masked",
    "category": "deepgemm",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "M-grouped FP8 e4m3 GEMM NT, masked layout (MoE decode), 1D2D, bf16 out",
}

PUBLIC_OPS = ("deepgemm_m_grouped_fp8_gemm_nt_masked",)

MAX_DIFF = 1e-5


# (groups, rows per group, expected valid rows per group, N, K)
_TEST_SHAPES = [
    (4, 256, 64, 4096, 7168),
    (8, 256, 128, 7168, 2048),
    (32, 128, 32, 4096, 7168),
    (3, 96, 40, 256, 384),
]
_BENCH_SHAPES = [
    (4, 256, 128, 4096, 7168),
    (4, 256, 128, 7168, 2048),
    (16, 256, 64, 4096, 7168),
    (16, 256, 64, 7168, 2048),
    (32, 256, 32, 4096, 7168),
    (32, 256, 32, 7168, 2048),
]

# one config matrix per shape table: the tests' and the bench sweep's
_MATRICES = {
    table: [
        {
            "label": f"e4m3_g{g}_m{m}_e{e}_n{n}_k{k}",
            "dtype": "float8_e4m3fn",
            "num_groups": g,
            "max_m": m,
            "expected_m": e,
            "N": n,
            "K": k,
        }
        for g, m, e, n, k in shapes
    ]
    for table, shapes in (("test", _TEST_SHAPES), ("bench", _BENCH_SHAPES))
}
CONFIGS = _MATRICES["test"]
BENCH_CONFIGS = _MATRICES["bench"]


def group_rows(num_groups, max_m, expected_m, seed=0):
    """Valid rows per group (upstream's generator: uniform in [0.7, 1.3] x expected_m,
    at most max_m); group 1 of the small config is empty to cover masked_m == 0."""
    gen = torch.Generator().manual_seed(seed)
    rows = [
        min(max_m, int(expected_m * (0.7 + 0.6 * torch.rand((), generator=gen).item())))
        for _ in range(num_groups)
    ]
    if max_m < 128 and num_groups > 1:
        rows[1] = 0
    return rows


def _block(num_groups, max_m, expected_m, N, K):
    return pick_block(min(expected_m, max_m), N, K, num_sms(), groups=num_groups)


def get_kernel(num_groups, max_m, expected_m, N, K, **_):
    bm, bn = _block(num_groups, max_m, expected_m, N, K)
    return make_gemm_1d2d("masked", N, K, bm, bn, num_groups)


def prepare_data(num_groups, max_m, expected_m, N, K, seed=0, **_):
    """DeepGEMM's test data: a ~ N(0, 1) per token, b ~ N(0, 1) per 128x128 block, cast to
    e4m3 with fp32 scales (sfa as (G, M, K/128)); masked_m on the device; d = NaN."""
    rows = group_rows(num_groups, max_m, expected_m, seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(num_groups * max_m, K, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(num_groups, N, K, device="cuda", generator=gen).to(torch.bfloat16)
    aq, sfa = per_token_cast_to_fp8(a)
    bq = torch.empty(num_groups, N, K, device="cuda", dtype=torch.float8_e4m3fn)
    sfb = torch.empty(num_groups, N // 128, K // 128, device="cuda", dtype=torch.float32)
    for g in range(num_groups):
        bq[g], sfb[g] = per_block_cast_to_fp8(b[g])
    d = torch.full((num_groups, max_m, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    masked_m = torch.tensor(rows, dtype=torch.int32, device="cuda")
    return (
        aq.view(num_groups, max_m, K),
        sfa.view(num_groups, max_m, K // 128),
        bq,
        sfb,
        d,
        masked_m,
    )


def reference(aq, sfa, bq, sfb, rows):
    """fp32 products of the dequantized operands for each group's first ``rows[g]`` rows."""
    out = []
    for g, r in enumerate(rows):
        a = aq[g, :r].float() * sfa[g, :r].repeat_interleave(128, dim=1)
        b = bq[g].float() * sfb[g].repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
        out.append(a @ b.t())
    return out


def run_test(num_groups, max_m, expected_m, N, K, **_):
    """The public op vs the dequantized fp32 products (calc_diff <= 1e-5 over the valid
    rows; rows past masked_m stay NaN); without an sm_90a GPU, compile to a cubin and skip."""
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        toolchain.compile_cubin(get_kernel(num_groups, max_m, expected_m, N, K))
        raise unittest.SkipTest(f"compiled to a cubin; no {KERNEL_META['archs']} GPU to run on")
    aq, sfa, bq, sfb, d, masked_m = prepare_data(num_groups, max_m, expected_m, N, K)
    m_grouped_fp8_gemm_nt_masked((aq, sfa), (bq, sfb), d, masked_m, expected_m)
    torch.cuda.synchronize()
    rows = masked_m.tolist()
    what = f"{KERNEL_META['name']} G={num_groups} M={max_m} N={N} K={K} masked_m={rows}"
    got = torch.cat([d[g, :r].float() for g, r in enumerate(rows)])
    want = torch.cat(reference(aq, sfa, bq, sfb, rows))
    if not torch.isfinite(got).all():
        raise AssertionError(f"{what}: non-finite outputs")
    for g, r in enumerate(rows):
        if not torch.isnan(d[g, r:]).all():
            raise AssertionError(f"{what}: group {g} rows past masked_m were written")
    diff = calc_diff(got, want)
    if not diff <= MAX_DIFF:
        raise AssertionError(f"{what}: calc_diff {diff:.3g} > {MAX_DIFF}")
    return {"calc_diff": diff}


def run_bench(num_groups, max_m, expected_m, N, K, **options):
    """Kernel time (us) of ours and ``deep_gemm.m_grouped_fp8_gemm_nt_masked``."""
    aq, sfa, bq, sfb, d, masked_m = prepare_data(num_groups, max_m, expected_m, N, K)
    references = {}
    if testing.available("deep_gemm"):

        def build_deep_gemm():
            import deep_gemm

            fn = deep_gemm.m_grouped_fp8_gemm_nt_masked
            out = torch.empty_like(d)
            fn((aq, sfa), (bq, sfb), out, masked_m, expected_m)
            return lambda: fn((aq, sfa), (bq, sfb), out, masked_m, expected_m)

        references["deep_gemm"] = build_deep_gemm
    return testing.bench(
        lambda: m_grouped_fp8_gemm_nt_masked((aq, sfa), (bq, sfb), d, masked_m, expected_m),
        references,
        **options,
    )
