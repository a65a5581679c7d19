# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer RMSNorm on sm_90a: ``out = x / sqrt(mean(x^2) + eps) * w``, one row per token.

Port of ``flashinfer.norm.rmsnorm`` for 2D input (``flashinfer/norm/__init__.py`` ->
``csrc/norm.cu::rmsnorm`` -> ``include/flashinfer/norm.cuh``: ``RMSNorm`` launcher,
``RMSNormKernel`` with ``weight_bias = 0``).
Shared TIRx code: ``_norm.py``, ``_rms_api.py``.

Numerics (as upstream): bf16/fp16 in and out, fp32 math; per-thread fp32 sum of squares,
warp then CTA reduction, ``rms_rcp = rsqrt(sum_sq / d + eps)``,
``out = T(float(x) * rms_rcp * float(w))``. eps is a runtime fp32 argument (default 1e-6,
FlashInfer's default).

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path, ``gcd(16 / sizeof(T), d) == 8``), ``8 <= hidden <= 16384``; any token count;
contiguous rows. Anything else raises ValueError (see ``_norm.check_domain``).
"""

from __future__ import annotations

from .._norm import NORM_BENCH_CONFIGS, NORM_CONFIGS
from .._rms_api import EPS, RMSNormKernelAPI  # noqa: F401 - EPS: the default eps

KERNEL_META = {
    "name": "flashinfer_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer RMSNorm (norm.cuh RMSNormKernel), bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

# the matrices the four RMSNorm-family kernels share (read statically from _norm.py)
PUBLIC_OPS: tuple[str, ...] = ()  # declared by the op layer (contract v2)

CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

WEIGHT_BIAS = 0.0  # RMSNormKernel's weight_bias for plain RMSNorm

# The contract functions, shared with the other RMSNorm kernels (see _rms_api.py)
_API = RMSNormKernelAPI(KERNEL_META, WEIGHT_BIAS, op="rmsnorm")
get_kernel, apply, prepare_data = _API.get_kernel, _API.apply, _API.prepare_data
reference, run_test, run_bench = _API.reference, _API.run_test, _API.run_bench
