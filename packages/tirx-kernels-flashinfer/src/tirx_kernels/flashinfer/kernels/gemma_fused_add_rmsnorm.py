# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer Gemma fused add + RMSNorm on sm_90a, in place on ``input`` and ``residual``.

``residual += input`` (rounded), then ``input = residual / RMS(residual) * (1 + w)``
where the norm uses the unrounded fp32 sum. Port of ``flashinfer.norm.gemma_fused_add_rmsnorm``
(``flashinfer/norm/__init__.py`` -> ``csrc/norm.cu::gemma_fused_add_rmsnorm`` ->
``include/flashinfer/norm.cuh``: ``GemmaFusedAddRMSNorm`` launcher,
``FusedAddRMSNormKernel`` with ``weight_bias = 1``).
Public function: ``tirx_kernels.flashinfer.norm.gemma_fused_add_rmsnorm``.

Numerics (as upstream): ``x = float(input) + float(residual)``; ``residual = T(x)``;
per-thread fp32 sum of ``x^2``, warp then CTA reduction, ``rms_rcp = rsqrt(sum / d + eps)``,
``input = T(x * rms_rcp * (1 + float(w)))`` (upstream keeps fp32 ``x`` in shared memory, this
port in registers). eps is a runtime fp32 argument (default 1e-6).

Dispatch domain, configs and checks: those of ``fused_add_rmsnorm`` (this kernel only adds 1
to the weight).
"""

from __future__ import annotations

from . import _rms_common as rms

# fused_add_rmsnorm's matrices, re-exported (the registry reads them statically)
from .fused_add_rmsnorm import BENCH_CONFIGS as BENCH_CONFIGS
from .fused_add_rmsnorm import CONFIGS as CONFIGS

KERNEL_META = {
    "name": "flashinfer_gemma_fused_add_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer Gemma fused residual add + RMSNorm, (1 + w); bf16/fp16, fp32 math",
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_gemma_fused_add_rmsnorm",)

UPSTREAM = (
    "gemma_fused_add_rmsnorm"  # our norm.<UPSTREAM>; the reference flashinfer.norm.<UPSTREAM>
)
WEIGHT_BIAS = 1.0  # the weight applied is WEIGHT_BIAS + w: (1 + w)

get_kernel, prepare_data, reference, run_test, run_bench, public_calls = rms.members(
    __name__, KERNEL_META, UPSTREAM, WEIGHT_BIAS
)
