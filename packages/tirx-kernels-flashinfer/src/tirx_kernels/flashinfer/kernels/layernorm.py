# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer LayerNorm on sm_90a: ``out = (x - mean) / sqrt(var + eps) * gamma + beta``.

Port of ``flashinfer.norm.layernorm`` (``flashinfer/norm/__init__.py`` ->
``csrc/norm.cu::layernorm`` -> ``include/flashinfer/norm.cuh``: ``LayerNorm`` launcher,
``generalLayerNorm`` without quantization, ``USE_DIFF_OF_SQUARES = false``; the kernel is
TensorRT-LLM's, carried by FlashInfer). Public function: ``tirx_kernels.flashinfer.norm.layernorm``.

Numerics (as upstream): bfloat16 input and output, float32 gamma and beta (the upstream
binding accepts only these), fp32 math; mean = sum(x) / d, then var = sum((x - mean)^2) / d
(two-pass, with the row kept on chip), ``out = bf16((x - mean) * rsqrt(var + eps) * gamma
+ beta)``. eps is a runtime fp32 argument (default 1e-6, FlashInfer's default).

Dispatch domain: bfloat16 x, 2D; ``1 <= hidden <= 16384`` (vectors of ``gcd(8, hidden)``
elements, as upstream's ``VEC_SIZE``); any token count; strided rows through contiguous
copies. Anything else raises ValueError (see ``_norm_schedule.check_domain``).
"""

from __future__ import annotations

import torch

from tirx_kernels.core import testing

from .. import norm  # declares the public ops named in PUBLIC_OPS
from .._norm_schedule import check_domain
from ._norm_configs import NORM_OP_CONFIGS

KERNEL_META = {
    "name": "flashinfer_layernorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer LayerNorm (norm.cuh generalLayerNorm), bf16 x, fp32 gamma/beta",
}

TEST_SHAPES = [
    (1, 4096),
    (7, 2048),
    (16, 16384),
    (127, 5120),
    (4113, 11008),
    (16384, 8192),
    (8193, 2048),  # 4 rows per CTA, the last CTA with 1 row
    (8195, 1000),  # 4 rows per CTA (last: 3), tail lanes in every row
    (9001, 4096),  # 2 rows per CTA, the last CTA with 1 row
    (1025, 16384),  # lean rows, 3 CTAs per SM
    (300, 9000),  # lean rows with tail lanes, 5 CTAs per SM
    (5, 111),  # upstream's gcd vectors: 1 element
    (9000, 500),  # 4 elements, a large batch
]
BENCH_SHAPES = [
    (1, 4096),
    (16, 4096),
    (1, 16384),
    (16, 8192),
    (1024, 4096),
    (4113, 11008),
    (16384, 2048),
    (16384, 4096),
    (16384, 8192),
    (16384, 16384),
]
PUBLIC_OPS: tuple[str, ...] = ("flashinfer_layernorm",)

CONFIGS = [
    {"label": f"bf16_t{t}_h{h}", "dtype": "bfloat16", "tokens": t, "hidden": h}
    for t, h in TEST_SHAPES
]
BENCH_CONFIGS = [
    {"label": f"bf16_t{t}_h{h}", "dtype": "bfloat16", "tokens": t, "hidden": h}
    for t, h in BENCH_SHAPES
] + NORM_OP_CONFIGS

EPS = norm.EPS  # FlashInfer's default eps


def get_kernel(dtype, hidden, tokens=None, **_):
    """The TIRx PrimFunc the host launches for ``tokens`` rows (``_norm_schedule.schedule``).

    Tokens are dynamic; their count picks the schedule.
    """
    check_domain(dtype, hidden, bf16_only=True)
    return norm.kernel_for("layernorm", dtype, hidden, tokens)


def prepare_data(dtype, tokens, hidden, **_):
    return {
        # an offset mean makes the two-pass variance matter
        "x": testing.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden, shift=0.5),
        "gamma": testing.randn((hidden,), "float32", seed=hidden + 1, scale=0.5, shift=1.0),
        "beta": testing.randn((hidden,), "float32", seed=hidden + 2, scale=0.5),
    }


def reference(x, gamma, beta, eps=EPS):
    """fp32 torch LayerNorm (unrounded)."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = (xf - mean).square().mean(-1, keepdim=True)
    return (xf - mean) * torch.rsqrt(var + eps) * gamma + beta


def run_test(dtype, tokens, hidden, **_):
    """Through the public function (``norm.layernorm``), vs torch fp32 and FlashInfer."""
    testing.skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, tokens, hidden)
    out = norm.layernorm(data["x"], data["gamma"], data["beta"])
    torch.cuda.synchronize()
    testing.assert_close("vs torch fp32", out, reference(**data), **testing.dtype_tols(dtype))
    if testing.available("flashinfer.norm"):
        import flashinfer

        want = flashinfer.norm.layernorm(data["x"], data["gamma"], data["beta"], eps=EPS)
        testing.assert_close("vs flashinfer", out, want, **testing.ulp_tols(dtype))


def run_bench(dtype, tokens, hidden, mode="kernel", **options):
    """The kernel launch beside FlashInfer's, or (``mode`` eager | graph) the public op."""
    if mode != "kernel":
        return testing.bench_calls(public_calls(tokens, dtype, hidden), mode, **options)
    data = prepare_data(dtype, tokens, hidden)
    x, gamma, beta = data["x"], data["gamma"], data["beta"]
    out = torch.empty_like(x)
    run = norm.launcher("layernorm", dtype, hidden, tokens)  # the host's schedule

    def build_flashinfer():
        import flashinfer

        flashinfer.norm.layernorm(x, gamma, beta, eps=EPS)  # JIT outside timing
        return lambda: flashinfer.norm.layernorm(x, gamma, beta, eps=EPS)

    def build_torch():
        F = torch.nn.functional
        try:  # mixed bf16 input / fp32 affine, as FlashInfer takes it
            F.layer_norm(x, (hidden,), gamma, beta, EPS)
            g, b = gamma, beta
        except RuntimeError:
            g, b = gamma.to(x.dtype), beta.to(x.dtype)
        return lambda: F.layer_norm(x, (hidden,), g, b, EPS)

    return testing.bench(
        lambda: run(x, gamma, beta, out, EPS),
        {"flashinfer": build_flashinfer, "torch": build_torch},
        **options,
    )


def public_calls(batch, dtype="bfloat16", hidden=4096):
    """Our layernorm, FlashInfer's and torch's on ``batch`` rows."""
    x, gamma, beta = prepare_data(dtype, batch, hidden).values()
    g16, b16 = gamma.to(x.dtype), beta.to(x.dtype)
    calls = {
        "tirx": lambda: norm.layernorm(x, gamma, beta),
        "torch": lambda: torch.nn.functional.layer_norm(x, (x.shape[-1],), g16, b16, EPS),
    }
    if testing.available("flashinfer.norm"):
        import flashinfer.norm

        calls["flashinfer"] = lambda: flashinfer.norm.layernorm(x, gamma, beta)
    return calls
