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

Dispatch domain, configs and checks: those of ``rmsnorm`` (this kernel only adds 1
to the weight).
"""

from __future__ import annotations

from . import _rms_common as rms

# rmsnorm's matrices, re-exported (the registry reads them statically)
from .rmsnorm import BENCH_CONFIGS as BENCH_CONFIGS
from .rmsnorm import CONFIGS as CONFIGS

KERNEL_META = {
    "name": "flashinfer_gemma_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer Gemma RMSNorm, weight applied as (1 + w); bf16/fp16, fp32 math",
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_gemma_rmsnorm",)

UPSTREAM = "gemma_rmsnorm"  # our norm.<UPSTREAM>; the reference flashinfer.norm.<UPSTREAM>
WEIGHT_BIAS = 1.0  # the weight applied is WEIGHT_BIAS + w: (1 + w)

get_kernel, prepare_data, reference, run_test, run_bench, public_calls = rms.members(
    __name__, KERNEL_META, UPSTREAM, WEIGHT_BIAS
)
