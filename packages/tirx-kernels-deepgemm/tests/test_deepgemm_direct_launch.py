# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""deepgemm's CTA-pair kernel through the direct launcher's TMA and cluster path
(on unless ``TIRX_KERNELS_DIRECT_LAUNCH_TMA=0``; the GPU test here passed first):
the cluster shape and descriptors it reads from the host code, a dry call, and on a GPU the
same output as the host function's launch."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import direct_launch, host, launch_spec, toolchain
from tirx_kernels.deepgemm import fp8_gemm

M, N, K = 256, 4096, 4096
CU_UINT8 = 0  # FP8 operands travel as bytes


@pytest.fixture
def kernel():
    return fp8_gemm.compiled_gemm_1d2d("normal", N, K, 128, 128, cluster=2)


def _arguments(device="cpu"):
    fp8 = torch.float8_e4m3fn
    return (
        torch.randn(M, K, device=device).to(fp8),
        torch.randn(N, K, device=device).to(fp8),
        torch.rand(K // 128, M, device=device) + 0.5,  # SFA, MN-major
        torch.rand(K // 128, N // 128, device=device) + 0.5,  # SFB
        torch.zeros(M, N, dtype=torch.bfloat16, device=device),
        torch.zeros(1, dtype=torch.int32, device=device),
    )


def test_the_pair_launches_as_a_cluster_with_byte_descriptors(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    args = _arguments()
    (launch,) = launch_spec.launch_spec(toolchain.host_code(kernel), args)
    assert launch.cluster == [2, 1, 1] and launch.smem > 48 * 1024
    assert sorted(m.arg for m in launch.maps) == [0, 1]  # A and B through TMA
    assert all(m.dtype == CU_UINT8 and m.dims == list(args[m.arg].shape)[::-1] for m in launch.maps)
    words = list(direct_launch.bound(kernel, *args, dry=True)(*args))
    for (kind, value), word in zip(launch.params, words):
        if kind == launch_spec.TENSOR_MAP:
            assert word == args[launch.maps[value].arg].data_ptr()


@pytest.mark.skipif(toolchain.gpu_arch() != "sm_90a", reason="needs an sm_90a GPU")
def test_on_the_gpu_the_cluster_launch_writes_what_the_host_function_writes(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    args = _arguments("cuda")
    want = args[4].clone()
    host.main_of(kernel)(*args[:4], want, args[5])
    bound = direct_launch.bound(kernel, *args)
    assert bound is not None
    bound(*args)
    torch.testing.assert_close(args[4], want, rtol=0, atol=0)
