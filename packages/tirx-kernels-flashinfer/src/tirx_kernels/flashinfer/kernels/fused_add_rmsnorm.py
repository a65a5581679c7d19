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
Public function: ``tirx_kernels.flashinfer.norm.fused_add_rmsnorm``.

Numerics (as upstream): ``x = float(input) + float(residual)``; ``residual = T(x)``;
per-thread fp32 sum of ``x^2``, warp then CTA reduction, ``rms_rcp = rsqrt(sum / d + eps)``,
``input = T(x * rms_rcp * float(w))`` (upstream keeps fp32 ``x`` in shared memory, this
port in registers). eps is a runtime fp32 argument (default 1e-6).

Dispatch domain: dtype bfloat16/float16; ``1 <= hidden <= 16384`` (vectors of
``gcd(8, hidden)`` elements, as upstream's ``VEC_SIZE``); 2D input, as upstream; any token
count; strided rows through contiguous copies. Anything else raises ValueError (``norm``,
``_norm_schedule``).
"""

from __future__ import annotations

from . import _rms_common as rms
from ._norm_configs import NORM_BENCH_CONFIGS, NORM_CONFIGS, NORM_OP_CONFIGS

KERNEL_META = {
    "name": "flashinfer_fused_add_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer fused residual add + RMSNorm (in place), bf16/fp16, fp32 math",
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_fused_add_rmsnorm",)

# the matrices the RMSNorm-family kernels share (read statically from _norm_configs.py)
CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS + NORM_OP_CONFIGS

UPSTREAM = "fused_add_rmsnorm"  # our norm.<UPSTREAM>; the reference flashinfer.norm.<UPSTREAM>
WEIGHT_BIAS = 0.0  # the weight applied is WEIGHT_BIAS + w: w

get_kernel, prepare_data, reference, run_test, run_bench, public_calls = rms.members(
    __name__, KERNEL_META, UPSTREAM, WEIGHT_BIAS
)
