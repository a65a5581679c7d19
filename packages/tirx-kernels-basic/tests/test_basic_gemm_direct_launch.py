# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The GEMM kernel through the direct launcher's TMA path (``launch_spec.TensorMap``, on
unless ``TIRX_KERNELS_DIRECT_LAUNCH_TMA=0``): the descriptors it reads from the host code
describe the caller's tensors, a dry call hands each descriptor the right tensor's address,
and on a GPU the bound launcher writes what the host function writes."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.basic import gemm
from tirx_kernels.basic._gemm_schedule import pick_config
from tirx_kernels.core import direct_launch, host, launch_spec, toolchain

M, N, K = 256, 4096, 4096
CU_BFLOAT16, SWIZZLE_128B = 9, 3


@pytest.fixture
def kernel():
    return gemm.compiled_gemm(N, K, "bfloat16", pick_config(M, N, K, 132))


def _operands(device="cpu"):
    a = torch.randn(M, K, dtype=torch.bfloat16, device=device)
    b = torch.randn(N, K, dtype=torch.bfloat16, device=device)
    return a, b, torch.zeros(M, N, dtype=torch.bfloat16, device=device)


def test_tma_kernels_keep_the_host_function_unless_switched_on(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", False)
    assert launch_spec.launch_spec(toolchain.host_code(kernel), _operands()) is None


def test_each_descriptor_describes_its_tensor(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    operands = _operands()
    (launch,) = launch_spec.launch_spec(toolchain.host_code(kernel), operands)
    assert sorted(m.arg for m in launch.maps) == [0, 1, 2]  # a, b and out
    for m in launch.maps:
        t = operands[m.arg]
        assert m.dims == list(t.shape)[::-1]  # innermost first
        assert m.strides == [t.shape[1] * t.element_size()]
        assert m.dtype == CU_BFLOAT16 and m.swizzle == SWIZZLE_128B and m.element_strides == [1, 1]
        assert all(0 < box <= dim for box, dim in zip(m.box, m.dims))
    assert launch.smem > 48 * 1024 and launch.cluster == [1, 1, 1]
    kinds = [kind for kind, _ in launch.params]
    assert kinds.count(launch_spec.TENSOR_MAP) == 3


def test_a_dry_call_hands_each_descriptor_its_tensors_address(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    operands = _operands()
    bound = direct_launch.bound(kernel, *operands, dry=True)
    assert bound is not None
    fresh = _operands()
    words = list(bound(*fresh))
    (launch,) = launch_spec.launch_spec(toolchain.host_code(kernel), operands)
    for (kind, value), word in zip(launch.params, words):
        if kind == launch_spec.TENSOR_MAP:
            assert word == fresh[launch.maps[value].arg].data_ptr()
    with pytest.raises(ValueError):  # another M is another launch
        bound(fresh[0][:128], fresh[1], fresh[2][:128])


@pytest.mark.skipif(toolchain.gpu_arch() != "sm_90a", reason="needs an sm_90a GPU")
def test_on_the_gpu_the_tma_launch_writes_what_the_host_function_writes(kernel, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    a, b, out = _operands("cuda")
    want = torch.zeros_like(out)
    host.main_of(kernel)(a, b, want)
    bound = direct_launch.bound(kernel, a, b, out)
    assert bound is not None
    bound(a, b, out)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
