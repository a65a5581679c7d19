# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer Gemma RMSNorm on sm_90a: ``out = x / sqrt(mean(x^2) + eps) * (1 + w)``.

Port of ``flashinfer.norm.gemma_rmsnorm`` for 2D input (``flashinfer/norm/__init__.py`` ->
``csrc/norm.cu::gemma_rmsnorm`` -> ``include/flashinfer/norm.cuh``: ``GemmaRMSNorm``
launcher, ``RMSNormKernel`` with ``weight_bias = 1``).
Public function: ``tirx_kernels.flashinfer.norm.gemma_rmsnorm``.

Numerics (as upstream): bf16/fp16 in and out, fp32 math; per-thread fp32 sum of squares,
warp then CTA reduction, ``rms_rcp = rsqrt(sum_sq / d + eps)``,
``out = T(float(x) * rms_rcp * (1 + float(w)))``. eps is a runtime fp32 argument (default 1e-6,
FlashInfer's default).

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path, ``gcd(16 / sizeof(T), d) == 8``), ``8 <= hidden <= 16384``; any token count;
contiguous rows. Anything else raises ValueError (see ``_norm_schedule.check_domain``).
"""

from __future__ import annotations

from .. import norm  # declares the public ops named in PUBLIC_OPS
from . import _rms_common as rms
from ._norm_configs import NORM_BENCH_CONFIGS, NORM_CONFIGS

KERNEL_META = {
    "name": "flashinfer_gemma_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer Gemma RMSNorm, weight applied as (1 + w); bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_gemma_rmsnorm",)

# the matrices the four RMSNorm-family kernels share (read statically from _norm_configs.py)
CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

WEIGHT_BIAS = 1.0  # RMSNormKernel's weight_bias for Gemma: (1 + w)
UPSTREAM = "gemma_rmsnorm"  # the reference: flashinfer.norm.<UPSTREAM>
EPS = norm.EPS  # FlashInfer's default eps
_GEMMA = rms.Variant(KERNEL_META, UPSTREAM, WEIGHT_BIAS)


def get_kernel(dtype, hidden, tokens=None, **_):
    return rms.get_kernel(_GEMMA, dtype, hidden, tokens)


def prepare_data(dtype, tokens, hidden, **_):
    return rms.prepare_data(_GEMMA, dtype, tokens, hidden)


def reference(x, w, eps=EPS):
    """fp32 torch RMSNorm (unrounded)."""
    return rms.rmsnorm_reference(x, w, eps, WEIGHT_BIAS)


def run_test(dtype, tokens, hidden, **_):
    rms.run_test(_GEMMA, dtype, tokens, hidden)


def run_bench(dtype, tokens, hidden, **options):
    return rms.run_bench(_GEMMA, dtype, tokens, hidden, **options)
