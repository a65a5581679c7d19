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

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path), ``8 <= hidden <= 16384``; any token count; contiguous rows. Anything else raises
ValueError (see ``_norm_schedule.check_domain``).
"""

from __future__ import annotations

from .. import norm  # declares the public ops named in PUBLIC_OPS
from . import _rms_common as rms
from ._norm_configs import NORM_BENCH_CONFIGS, NORM_CONFIGS

KERNEL_META = {
    "name": "flashinfer_fused_add_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer fused residual add + RMSNorm (in place), bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS: tuple[str, ...] = ("flashinfer_fused_add_rmsnorm",)

# the matrices the four RMSNorm-family kernels share (read statically from _norm_configs.py)
CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

WEIGHT_BIAS = 0.0  # FusedAddRMSNormKernel's weight_bias for plain RMSNorm
UPSTREAM = "fused_add_rmsnorm"  # the reference: flashinfer.norm.<UPSTREAM>
EPS = norm.EPS  # FlashInfer's default eps
_FUSED = rms.Variant(KERNEL_META, UPSTREAM, WEIGHT_BIAS)


def get_kernel(dtype, hidden, tokens=None, **_):
    return rms.get_kernel(_FUSED, dtype, hidden, tokens)


def prepare_data(dtype, tokens, hidden, **_):
    return rms.prepare_data(_FUSED, dtype, tokens, hidden)


def reference(x, residual, w, eps=EPS):
    """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
    return rms.fused_add_reference(x, residual, w, eps, WEIGHT_BIAS)


def run_test(dtype, tokens, hidden, **_):
    rms.run_test(_FUSED, dtype, tokens, hidden)


def run_bench(dtype, tokens, hidden, **options):
    return rms.run_bench(_FUSED, dtype, tokens, hidden, **options)


def public_calls(batch):
    return rms.public_calls(_FUSED, batch)
