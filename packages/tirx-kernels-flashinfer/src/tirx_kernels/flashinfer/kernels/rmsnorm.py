# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer RMSNorm on sm_90a: ``out = x / sqrt(mean(x^2) + eps) * w``, one row per token.

Port of ``flashinfer.norm.rmsnorm`` for 2D input (``flashinfer/norm/__init__.py`` ->
``csrc/norm.cu::rmsnorm`` -> ``include/flashinfer/norm.cuh``: ``RMSNorm`` launcher,
``RMSNormKernel`` with ``weight_bias = 0``).
Public function: ``tirx_kernels.flashinfer.norm.rmsnorm``.

Numerics (as upstream): bf16/fp16 in and out, fp32 math; per-thread fp32 sum of squares,
warp then CTA reduction, ``rms_rcp = rsqrt(sum_sq / d + eps)``,
``out = T(float(x) * rms_rcp * float(w))``. eps is a runtime fp32 argument (default 1e-6,
FlashInfer's default).

Dispatch domain: dtype bfloat16/float16; ``1 <= hidden <= 16384`` (vectors of
``gcd(8, hidden)`` elements, as upstream's ``VEC_SIZE``); 2D ``(tokens, hidden)`` or 3D
``(batch, heads, head_dim)`` input (configs with ``heads``); any token count; strided rows
through contiguous copies. Anything else raises ValueError (``norm``, ``_norm_schedule``).
"""

from __future__ import annotations

from . import _rms_common as rms
from ._norm_configs import NORM_BENCH_CONFIGS, NORM_CONFIGS, NORM_OP_CONFIGS, QK_NORM_CONFIGS

KERNEL_META = {
    "name": "flashinfer_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer RMSNorm (norm.cuh RMSNormKernel), bf16/fp16, fp32 math",
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_rmsnorm",)

# the matrices the RMSNorm-family kernels share (read statically from _norm_configs.py)
CONFIGS = NORM_CONFIGS + QK_NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS + NORM_OP_CONFIGS

UPSTREAM = "rmsnorm"  # our norm.<UPSTREAM>; the reference flashinfer.norm.<UPSTREAM>
WEIGHT_BIAS = 0.0  # the weight applied is WEIGHT_BIAS + w: w

get_kernel, prepare_data, reference, run_test, run_bench, public_calls = rms.members(
    __name__, KERNEL_META, UPSTREAM, WEIGHT_BIAS
)
