# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fixtures the family's GPU tests share: an sm_90a GPU, and the torch.compile backends."""

import importlib.util

import pytest


@pytest.fixture
def hopper():
    """Skip unless the visible GPU is an sm_90a one (the kernels are built for it)."""
    from tirx_kernels.core import toolchain

    if toolchain.gpu_arch() != "sm_90a":
        pytest.skip(f"needs an sm_90a GPU, found {toolchain.gpu_arch()}")


@pytest.fixture(
    params=[
        "aot_eager",
        pytest.param(
            "inductor",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("triton") is None, reason="inductor needs triton"
            ),
        ),
    ]
)
def backend(request):
    """A torch.compile backend of the fullgraph tests."""
    return request.param
