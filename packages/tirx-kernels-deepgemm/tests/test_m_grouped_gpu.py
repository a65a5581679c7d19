# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The m-grouped ops on an sm_90a GPU (skipped elsewhere): DeepGEMM's calc_diff against the
fp32 products of the dequantized data; masked under CUDA-graph replay with new masked_m."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import testing
from tirx_kernels.deepgemm._quant import calc_diff
from tirx_kernels.deepgemm.kernels import m_grouped_fp8_gemm_nt_contiguous as contiguous
from tirx_kernels.deepgemm.kernels import m_grouped_fp8_gemm_nt_masked as masked
from tirx_kernels.deepgemm.m_grouped import (
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)

pytestmark = testing.needs_gpu(contiguous.KERNEL_META)


@pytest.mark.parametrize("N, K", [(256, 384), (384, 256)])
@pytest.mark.parametrize("groups, m", [(2, 100), (5, 300)])
def test_contiguous(groups, m, N, K):
    aq, sfa, bq, sfb, d, m_indices = contiguous.prepare_data(groups, m, N, K, seed=m)
    m_grouped_fp8_gemm_nt_contiguous((aq, sfa), (bq, sfb), d, m_indices)
    want = contiguous.reference(aq, sfa, bq, sfb, m_indices)
    contiguous.check(d, want, m_indices, f"G={groups} m={m} N={N} K={K}")


def test_contiguous_padding_halves_store_zeros():
    aq, sfa, bq, sfb, d, m_indices = contiguous.prepare_data(2, 40, 256, 384)
    m_grouped_fp8_gemm_nt_contiguous((aq, sfa), (bq, sfb), d, m_indices)
    # 28..52 rows per group in 128-row blocks: rows 64..127 of each block are all padding
    assert torch.equal(d[64:128], torch.zeros_like(d[64:128]))


@pytest.mark.parametrize("N, K", [(256, 384), (384, 256)])
@pytest.mark.parametrize("groups, max_m, expected_m", [(3, 96, 40), (4, 256, 200)])
def test_masked(groups, max_m, expected_m, N, K):
    aq, sfa, bq, sfb, d, masked_m = masked.prepare_data(groups, max_m, expected_m, N, K)
    m_grouped_fp8_gemm_nt_masked((aq, sfa), (bq, sfb), d, masked_m, expected_m)
    rows = masked_m.tolist()
    got = torch.cat([d[g, :r].float() for g, r in enumerate(rows)])
    want = torch.cat(masked.reference(aq, sfa, bq, sfb, rows))
    assert calc_diff(got, want) <= masked.MAX_DIFF
    assert all(torch.isnan(d[g, r:]).all() for g, r in enumerate(rows))


def test_masked_replays_in_a_cuda_graph_with_new_masked_m():
    aq, sfa, bq, sfb, d, masked_m = masked.prepare_data(4, 128, 64, 256, 384)
    m_grouped_fp8_gemm_nt_masked((aq, sfa), (bq, sfb), d, masked_m, 64)  # compile outside
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        m_grouped_fp8_gemm_nt_masked((aq, sfa), (bq, sfb), d, masked_m, 64)
    rows = [128, 0, 7, 65]
    masked_m.copy_(torch.tensor(rows, dtype=torch.int32))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    got = torch.cat([d[g, :r].float() for g, r in enumerate(rows)])
    want = torch.cat(masked.reference(aq, sfa, bq, sfb, rows))
    assert calc_diff(got, want) <= masked.MAX_DIFF
