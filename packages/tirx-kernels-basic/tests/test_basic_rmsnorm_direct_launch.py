# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The basic RMSNorm's eager plan launches through the direct launcher
(``tirx_kernels.core.direct_launch``): its host code is one the launcher reproduces, and a
dry call hands each kernel parameter the caller's tensor it should. On the CPU; the GPU op
tests run the same launcher."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.basic import norm
from tirx_kernels.core import direct_launch, launch_spec, toolchain


@pytest.mark.parametrize("tokens, hidden", [(1, 4096), (7, 8192), (300, 16384)])
def test_the_rmsnorm_kernel_gets_a_direct_launcher(tokens, hidden):
    kernel = norm.compiled_rmsnorm(hidden, "bfloat16", 1e-6)
    x = torch.zeros(tokens, hidden, dtype=torch.bfloat16)
    w = torch.zeros(hidden, dtype=torch.bfloat16)
    y = torch.zeros_like(x)
    (spec,) = launch_spec.launch_spec(toolchain.host_code(kernel), (x, w, y))
    launch = direct_launch.bound(kernel, x, w, y, dry=True)
    assert launch is not None
    x2, y2 = x.clone(), y.clone()
    words = list(launch(x2, w, y2))
    pointers = {(x2, w, y2)[v].data_ptr() for k, v in spec.params if k == launch_spec.POINTER}
    got = {word for (k, _), word in zip(spec.params, words) if k == launch_spec.POINTER}
    assert got == pointers and len(pointers) == 3
    assert words[len(spec.params)] == tokens  # one row per CTA
