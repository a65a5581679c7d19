# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""M-grouped FP8 GEMM, contiguous layout (MoE prefill), for sm_90a: the kernel module.

Port of DeepGEMM's sm90 1D2D kernel with ``GemmType::MGroupedContiguous``
(``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh``,
``deep_gemm/include/deep_gemm/scheduler/gemm.cuh``; API ``csrc/apis/gemm.hpp``; test data as
``tests/generators.py`` ``generate_m_grouped_contiguous``). The groups' rows of a (M, K) e4m3
are concatenated, each group padded to a multiple of 128 rows; ``m_indices`` (M,) int32
names each row's expert (-1: padding); b (G, N, K) e4m3; fp32 1x128 / 128x128 scales; bf16
d (M, N). The public op is ``tirx_kernels.deepgemm.m_grouped_fp8_gemm_nt_contiguous``.
run_test checks it with DeepGEMM's ``calc_diff`` (rows -1 excluded, as upstream's test
zeroes them) against the fp32 products of the dequantized data; run_bench times it beside
``deep_gemm.m_grouped_fp8_gemm_nt_contiguous`` when sgl-deep-gemm is installed.
Configs: DeepSeek-V3 MoE GEMMs (N x K = 4096 x 7168 up-projection, 7168 x 2048 down).
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d
from tirx_kernels.deepgemm._gemm_schedule import num_sms, pick_block
from tirx_kernels.deepgemm._quant import calc_diff, per_block_cast_to_fp8, per_token_cast_to_fp8
from tirx_kernels.deepgemm.m_grouped import m_grouped_fp8_gemm_nt_contiguous

KERNEL_META = {
    "name": "deepgemm_m_grouped_fp8_gemm_nt_contiguous",
    "category": "deepgemm",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "M-grouped FP8 e4m3 GEMM NT, contiguous layout (MoE), 1D2D scales, bf16 out",
}

PUBLIC_OPS = ("deepgemm_m_grouped_fp8_gemm_nt_contiguous",)

MAX_DIFF = 1e-5
ALIGN = 128


# (groups, expected rows per group, N, K)
_TEST_SHAPES = [
    (4, 128, 4096, 7168),
    (8, 200, 7168, 2048),
    (32, 64, 4096, 7168),
    (2, 100, 256, 384),
]
_BENCH_SHAPES = [
    (4, 8192, 4096, 7168),
    (4, 8192, 7168, 2048),
    (8, 4096, 4096, 7168),
    (8, 4096, 7168, 2048),
    (32, 256, 4096, 7168),
    (32, 256, 7168, 2048),
]

# one config matrix per shape table: the tests' and the bench sweep's
_MATRICES = {
    table: [
        {
            "label": f"e4m3_g{g}_m{m}_n{n}_k{k}",
            "dtype": "float8_e4m3fn",
            "num_groups": g,
            "expected_m": m,
            "N": n,
            "K": k,
        }
        for g, m, n, k in shapes
    ]
    for table, shapes in (("test", _TEST_SHAPES), ("bench", _BENCH_SHAPES))
}
CONFIGS = _MATRICES["test"]
BENCH_CONFIGS = _MATRICES["bench"]


def group_rows(num_groups, expected_m, seed=0):
    """Each group's rows (upstream's generator: uniform in [0.7, 1.3] x expected_m) and
    the padded row count of the concatenation."""
    gen = torch.Generator().manual_seed(seed)
    rows = [
        int(expected_m * (0.7 + 0.6 * torch.rand((), generator=gen).item()))
        for _ in range(num_groups)
    ]
    return rows, sum(-(-r // ALIGN) * ALIGN for r in rows)


def get_kernel(num_groups, expected_m, N, K, **_):
    _, M = group_rows(num_groups, expected_m)
    _, bn = pick_block(M, N, K, num_sms(), bms=(ALIGN,))
    return make_gemm_1d2d("contiguous", N, K, ALIGN, bn, num_groups)


def prepare_data(num_groups, expected_m, N, K, seed=0, **_):
    """DeepGEMM's test data: a ~ N(0, 1) per token, b ~ N(0, 1) per 128x128 block, cast to
    e4m3 with fp32 scales; m_indices g on group g's rows, -1 on its padding; d = NaN."""
    rows, M = group_rows(num_groups, expected_m, seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(num_groups, N, K, device="cuda", generator=gen).to(torch.bfloat16)
    m_indices = torch.full((M,), -1, dtype=torch.int32)
    start = 0
    for g, r in enumerate(rows):
        m_indices[start : start + r] = g
        start += -(-r // ALIGN) * ALIGN
    aq, sfa = per_token_cast_to_fp8(a)
    bq = torch.empty(num_groups, N, K, device="cuda", dtype=torch.float8_e4m3fn)
    sfb = torch.empty(num_groups, N // 128, K // 128, device="cuda", dtype=torch.float32)
    for g in range(num_groups):
        bq[g], sfb[g] = per_block_cast_to_fp8(b[g])
    d = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    return aq, sfa, bq, sfb, d, m_indices.cuda()


def reference(aq, sfa, bq, sfb, m_indices):
    """fp32 products of the dequantized operands, row by row with its group's weights
    (rows -1: zero)."""
    a = aq.float() * sfa.repeat_interleave(128, dim=1)
    out = torch.zeros(a.shape[0], bq.shape[1], device=a.device)
    for g in range(bq.shape[0]):
        rows = m_indices == g
        b = bq[g].float() * sfb[g].repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
        out[rows] = a[rows] @ b.t()
    return out


def check(d, want, m_indices, what):
    """calc_diff over the rows that belong to a group (upstream zeroes rows -1 in both)."""
    valid = m_indices >= 0
    got = d.float()[valid]
    if not torch.isfinite(got).all():
        raise AssertionError(f"{what}: non-finite outputs")
    diff = calc_diff(got, want[valid])
    if not diff <= MAX_DIFF:
        raise AssertionError(f"{what}: calc_diff {diff:.3g} > {MAX_DIFF}")
    return diff


def run_test(num_groups, expected_m, N, K, **_):
    """The public op vs the dequantized fp32 products (calc_diff <= 1e-5 on group rows);
    without an sm_90a GPU, compile to a cubin and skip."""
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        toolchain.compile_cubin(get_kernel(num_groups, expected_m, N, K))
        raise unittest.SkipTest(f"compiled to a cubin; no {KERNEL_META['archs']} GPU to run on")
    aq, sfa, bq, sfb, d, m_indices = prepare_data(num_groups, expected_m, N, K)
    m_grouped_fp8_gemm_nt_contiguous((aq, sfa), (bq, sfb), d, m_indices)
    torch.cuda.synchronize()
    what = f"{KERNEL_META['name']} G={num_groups} M={d.shape[0]} N={N} K={K}"
    diff = check(d, reference(aq, sfa, bq, sfb, m_indices), m_indices, what)
    return {"calc_diff": diff}


def run_bench(num_groups, expected_m, N, K, **options):
    """Kernel time (us) of ours and ``deep_gemm.m_grouped_fp8_gemm_nt_contiguous``."""
    aq, sfa, bq, sfb, d, m_indices = prepare_data(num_groups, expected_m, N, K)
    references = {}
    if testing.available("deep_gemm"):

        def build_deep_gemm():
            import deep_gemm

            fn = deep_gemm.m_grouped_fp8_gemm_nt_contiguous
            out = torch.empty_like(d)
            fn((aq, sfa), (bq, sfb), out, m_indices)
            return lambda: fn((aq, sfa), (bq, sfb), out, m_indices)

        references["deep_gemm"] = build_deep_gemm
    return testing.bench(
        lambda: m_grouped_fp8_gemm_nt_contiguous((aq, sfa), (bq, sfb), d, m_indices),
        references,
        **options,
    )
