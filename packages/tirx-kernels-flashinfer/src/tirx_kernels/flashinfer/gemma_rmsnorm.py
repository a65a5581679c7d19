# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer Gemma RMSNorm on sm_90a: ``out = x / sqrt(mean(x^2) + eps) * (1 + w)``.

Port of ``flashinfer.norm.gemma_rmsnorm`` for 2D input (``flashinfer/norm/__init__.py`` ->
``csrc/norm.cu::gemma_rmsnorm`` -> ``include/flashinfer/norm.cuh``: ``GemmaRMSNorm``
launcher, ``RMSNormKernel`` with ``weight_bias = 1``). Shared TIRx code: ``_norm.py``.

Numerics (as upstream): bf16/fp16 in and out, fp32 math; per-thread fp32 sum of squares,
warp then CTA reduction, ``rms_rcp = rsqrt(sum_sq / d + eps)``,
``out = T(float(x) * rms_rcp * (1 + float(w)))``. eps is a runtime fp32 argument (default 1e-6,
FlashInfer's default).

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path, ``gcd(16 / sizeof(T), d) == 8``), ``8 <= hidden <= 16384``; any token count;
contiguous rows. Anything else raises ValueError (see ``_norm.check_domain``).
"""

from __future__ import annotations

import torch

from . import _norm
from ._norm import NORM_BENCH_CONFIGS, NORM_CONFIGS

KERNEL_META = {
    "name": "flashinfer_gemma_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer Gemma RMSNorm, weight applied as (1 + w); bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

# the matrices the four RMSNorm-family kernels share (read statically from _norm.py)
CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

EPS = 1e-6
WEIGHT_BIAS = 1.0  # RMSNormKernel's weight_bias for Gemma: (1 + w)


def get_kernel(dtype, hidden, tokens=None, **_):
    """The TIRx PrimFunc the host launches for ``tokens`` rows (``_norm.schedule``).

    Tokens are dynamic; their count picks the schedule. A persistent kernel takes a trailing
    ``ctas`` grid size: launch through ``_norm.launcher``, which passes it.
    """
    return _norm.kernel_for("rmsnorm", dtype, hidden, tokens, WEIGHT_BIAS)


def apply(x, w, eps=EPS, out=None):
    """``flashinfer.norm.gemma_rmsnorm(x, w, eps, out)`` for 2D x, through the TIRx kernel."""
    return _norm.rmsnorm(x, w, eps, out, weight_bias=WEIGHT_BIAS)


def prepare_data(dtype, tokens, hidden, **_):
    return {
        "x": _norm.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden),
        "w": _norm.randn((hidden,), dtype, seed=hidden + 1, scale=0.5),
    }


def reference(x, w, eps=EPS):
    """fp32 torch Gemma RMSNorm (unrounded)."""
    xf = x.float()
    rms_rcp = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return xf * rms_rcp * (WEIGHT_BIAS + w.float())


def run_test(dtype, tokens, hidden, **_):
    _norm.skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, tokens, hidden)
    out = apply(data["x"], data["w"])
    torch.cuda.synchronize()
    _norm.assert_close("vs torch fp32", out, reference(**data), _norm.dtype_tols(dtype))
    if _norm.flashinfer_available():
        import flashinfer

        want = flashinfer.norm.gemma_rmsnorm(data["x"], data["w"], eps=EPS)
        _norm.assert_close("vs flashinfer", out, want, _norm.ulp_tols(dtype))


def run_bench(
    dtype, tokens, hidden, *, warmup=None, repeat=None, timer=None, rounds=1, cooldown_s=1.0, **_
):
    from tirx_kernels.core import toolchain

    data = prepare_data(dtype, tokens, hidden)
    x, w = data["x"], data["w"]
    out = torch.empty_like(x)
    run = _norm.launcher("rmsnorm", dtype, hidden, tokens, WEIGHT_BIAS)  # the host's schedule

    def build_flashinfer():
        import flashinfer

        o = torch.empty_like(x)
        flashinfer.norm.gemma_rmsnorm(x, w, eps=EPS, out=o)  # JIT outside timing
        return lambda: flashinfer.norm.gemma_rmsnorm(x, w, eps=EPS, out=o)

    def build_torch():
        w1 = (1.0 + w.float()).to(w.dtype)  # torch's best case: (1 + w) folded outside timing
        return lambda: torch.nn.functional.rms_norm(x, (hidden,), w1, EPS)

    return toolchain.bench(
        {"tirx": lambda: run(x, w, out, EPS)},
        references={"flashinfer": build_flashinfer, "torch": build_torch},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )
