# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer fused add + RMSNorm on sm_90a, in place on ``input`` and ``residual``.

``residual += input`` (rounded to the dtype), then ``input = residual / RMS(residual) * w``
where the norm uses the unrounded fp32 sum. Port of ``flashinfer.norm.fused_add_rmsnorm``
(``flashinfer/norm/__init__.py`` -> ``csrc/norm.cu::fused_add_rmsnorm`` ->
``include/flashinfer/norm.cuh``: ``FusedAddRMSNorm`` launcher, ``FusedAddRMSNormKernel``
with ``weight_bias = 0``).
Shared TIRx code: ``_norm.py``, ``_rms_api.py``.

Numerics (as upstream): ``x = float(input) + float(residual)``; ``residual = T(x)``;
per-thread fp32 sum of ``x^2``, warp then CTA reduction, ``rms_rcp = rsqrt(sum / d + eps)``,
``input = T(x * rms_rcp * float(w))`` (upstream keeps fp32 ``x`` in shared memory, this
port in registers). eps is a runtime fp32 argument (default 1e-6).

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path), ``8 <= hidden <= 16384``; any token count; contiguous rows. Anything else raises
ValueError (see ``_norm.check_domain``).
"""

from __future__ import annotations

from .._norm import NORM_BENCH_CONFIGS, NORM_CONFIGS
from .._rms_api import EPS, FusedAddRMSNormKernelAPI  # noqa: F401 - EPS: the default eps

KERNEL_META = {
    "name": "flashinfer_fused_add_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer fused residual add + RMSNorm (in place), bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

# the matrices the four RMSNorm-family kernels share (read statically from _norm.py)
PUBLIC_OPS: tuple[str, ...] = ()  # declared by the op layer (contract v2)

CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

WEIGHT_BIAS = 0.0  # FusedAddRMSNormKernel's weight_bias for plain RMSNorm

# The contract functions, shared with the other RMSNorm kernels (see _rms_api.py)
_API = FusedAddRMSNormKernelAPI(KERNEL_META, WEIGHT_BIAS, op="fused_add_rmsnorm")
get_kernel, apply, prepare_data = _API.get_kernel, _API.apply, _API.prepare_data
reference, run_test, run_bench = _API.reference, _API.run_test, _API.run_bench
