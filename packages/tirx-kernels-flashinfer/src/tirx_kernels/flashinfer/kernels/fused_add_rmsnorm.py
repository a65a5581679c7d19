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


def get_kernel(dtype, hidden, tokens=None, **_):
    """The TIRx PrimFunc the host launches for ``tokens`` rows (``_norm_schedule.schedule``).

    Tokens are dynamic; their count picks the schedule.
    """
    return norm.kernel_for("fused_add_rmsnorm", dtype, hidden, tokens, WEIGHT_BIAS)


def prepare_data(dtype, tokens, hidden, **_):
    return rms.fused_add_data(dtype, tokens, hidden, WEIGHT_BIAS)


def reference(x, residual, w, eps=EPS):
    """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
    return rms.fused_add_reference(x, residual, w, eps, WEIGHT_BIAS)


def run_test(dtype, tokens, hidden, **_):
    """Through the public function (``norm.fused_add_rmsnorm``), vs torch and FlashInfer."""
    rms.fused_add_test(
        KERNEL_META, norm.fused_add_rmsnorm, UPSTREAM, WEIGHT_BIAS, dtype, tokens, hidden
    )


def run_bench(
    dtype, tokens, hidden, *, warmup=None, repeat=None, timer=None, rounds=1, cooldown_s=1.0, **_
):
    return rms.fused_add_bench(
        UPSTREAM,
        WEIGHT_BIAS,
        dtype,
        tokens,
        hidden,
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )


def public_calls(batch):
    """Our op, FlashInfer's and torch's (add then rms_norm) on ``batch`` rows of 4096."""
    import torch

    x, residual, w = prepare_data("bfloat16", batch, 4096).values()

    def torch_call():
        residual.add_(x)
        return torch.nn.functional.rms_norm(residual, (x.shape[-1],), w, rms.EPS)

    calls = {"tirx": lambda: norm.fused_add_rmsnorm(x, residual, w), "torch": torch_call}
    if rms.testing.available("flashinfer.norm"):
        import flashinfer.norm

        calls["flashinfer"] = lambda: flashinfer.norm.fused_add_rmsnorm(x, residual, w)
    return calls
