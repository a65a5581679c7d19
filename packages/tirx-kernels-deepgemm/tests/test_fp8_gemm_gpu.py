# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The op on an sm_90a GPU (skipped elsewhere): DeepGEMM's calc_diff against the fp32
product of the dequantized data, for several M through one compiled kernel."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import testing
from tirx_kernels.deepgemm._quant import calc_diff
from tirx_kernels.deepgemm.fp8_gemm import compiled_fp8_gemm_nt, fp8_gemm_nt
from tirx_kernels.deepgemm.kernels import fp8_gemm_nt as kernel


@pytest.fixture(autouse=True)
def _gpu():
    try:
        testing.skip_unless_gpu(kernel.KERNEL_META)
    except Exception as skip:  # unittest.SkipTest
        pytest.skip(str(skip))


@pytest.mark.parametrize("M", [1, 7, 128, 129, 300])
def test_every_m_through_one_kernel(M):
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 256, 384, seed=M)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    want = kernel.reference(aq, sfa, bq, sfb)
    assert torch.isfinite(d).all()
    assert calc_diff(d, want) <= kernel.MAX_DIFF
    assert compiled_fp8_gemm_nt.cache_info().currsize == 1  # N tile 64 for all of them


@pytest.mark.parametrize("bn", [128, 64])
@pytest.mark.parametrize("M", [1, 300])
def test_both_n_tiles(M, bn):
    aq, sfa, bq, sfb, d = kernel.prepare_data(M, 384, 256, seed=M)
    sfa_t = sfa.as_strided((sfa.shape[1], sfa.stride(1)), (sfa.stride(1), 1))
    compiled_fp8_gemm_nt(384, 256, bn)(aq, bq, sfa_t, sfb, d)
    want = kernel.reference(aq, sfa, bq, sfb)
    assert calc_diff(d, want) <= kernel.MAX_DIFF


def test_row_major_sfa_gives_the_same_result_and_m0_is_a_no_op():
    aq, sfa, bq, sfb, d = kernel.prepare_data(65, 256, 384)
    fp8_gemm_nt((aq, sfa), (bq, sfb), d)
    d2 = torch.empty_like(d)
    torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt(d2, aq, sfa.contiguous(), bq, sfb)
    assert torch.equal(d, d2)
    empty = torch.empty(0, 256, dtype=torch.bfloat16, device="cuda")
    fp8_gemm_nt((aq[:0], sfa[:0]), (bq, sfb), empty)
