# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Every kernel an eager drop-in call launches as it is (the kernel-checked plans of norm,
activation and RoPE) gets a direct launcher (``tirx_kernels.core.direct_launch``): its host
code is one the launcher reproduces, and a dry call hands each kernel parameter the
caller's tensor it should. On the CPU; the GPU op tests run the same launchers."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import direct_launch, launch_spec, toolchain
from tirx_kernels.flashinfer import activation, norm, rope

BF16 = torch.bfloat16


def _norm_cases():
    for tokens in (1, 4, 300):
        x, w = torch.zeros(tokens, 4096, dtype=BF16), torch.zeros(4096, dtype=BF16)
        yield "rmsnorm", norm.launcher("rmsnorm", "bfloat16", 4096, tokens), (x, w, x.clone(), 1e-6)
        yield (
            "fused_add_rmsnorm",
            norm.launcher("fused_add_rmsnorm", "bfloat16", 4096, tokens),
            (x, x.clone(), w, 1e-6),
        )
        g = torch.zeros(4096)
        yield (
            "layernorm",
            norm.launcher("layernorm", "bfloat16", 4096, tokens),
            (x, g, g.clone(), x.clone(), 1e-6),
        )


def _act_cases():
    for tokens in (1, 16):
        x, out = torch.zeros(tokens, 2 * 11008, dtype=BF16), torch.zeros(tokens, 11008, dtype=BF16)
        schedule = activation.SCHEDULE["silu"]
        extra = () if schedule == "flat" else (activation._stream_ctas(11008, tokens, 0),)
        yield (
            "silu_and_mul",
            activation._compiled("silu", "bfloat16", 11008, schedule),
            (x, out, *extra),
        )


def _rope_cases():
    for nnz in (1, 16):
        q, k = torch.zeros(nnz, 32, 128, dtype=BF16), torch.zeros(nnz, 8, 128, dtype=BF16)
        pos = torch.zeros(nnz, dtype=torch.int32)
        walk, grid = rope.plan(nnz, 128, 40, 132)
        shape = ("bfloat16", 128, 32, 8, False, "int32", walk, 128)
        yield "rope", rope._compiled(*shape), (q, k, pos, grid, 1.0, 1e-4)
        outs = (q.clone(), k.clone())
        yield "rope_out", rope._compiled(*shape, outs=True), (q, k, *outs, pos, grid, 1.0, 1e-4)


CASES = [*_norm_cases(), *_act_cases(), *_rope_cases()]


@pytest.mark.parametrize("name, executable, examples", CASES, ids=[c[0] for c in CASES])
def test_each_drop_in_kernel_gets_a_direct_launcher(name, executable, examples):
    (spec,) = launch_spec.launch_spec(toolchain.host_code(executable), examples)
    launch = direct_launch.bound(executable, *examples, dry=True)
    assert launch is not None, name
    fresh = tuple(e.clone() if isinstance(e, torch.Tensor) else e for e in examples)
    words = list(launch(*fresh))
    for (kind, value), word in zip(spec.params, words):
        if kind == launch_spec.POINTER:
            assert word == fresh[value].data_ptr()
    tensors = sum(isinstance(e, torch.Tensor) for e in examples)
    assert sum(kind == launch_spec.POINTER for kind, _ in spec.params) == tensors
