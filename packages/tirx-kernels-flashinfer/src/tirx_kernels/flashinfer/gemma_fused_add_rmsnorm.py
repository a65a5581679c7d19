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
``FusedAddRMSNormKernel`` with ``weight_bias = 1``). Shared TIRx code: ``_norm.py``.

Numerics (as upstream): ``x = float(input) + float(residual)``; ``residual = T(x)``;
per-thread fp32 sum of ``x^2``, warp then CTA reduction, ``rms_rcp = rsqrt(sum / d + eps)``,
``input = T(x * rms_rcp * (1 + float(w)))`` (upstream keeps fp32 ``x`` in shared memory, this
port in registers). eps is a runtime fp32 argument (default 1e-6).

Dispatch domain: dtype bfloat16/float16; ``hidden % 8 == 0`` (upstream's VEC_SIZE = 8
path), ``8 <= hidden <= 16384``; any token count; contiguous rows. Anything else raises
ValueError (see ``_norm.check_domain``).
"""

from __future__ import annotations

import torch

from . import _norm
from ._norm import NORM_BENCH_CONFIGS, NORM_CONFIGS

KERNEL_META = {
    "name": "flashinfer_gemma_fused_add_rmsnorm",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "FlashInfer Gemma fused residual add + RMSNorm, (1 + w); bf16/fp16, fp32 math",
    "dtypes": ["bfloat16", "float16"],
}

# the matrices the four RMSNorm-family kernels share (read statically from _norm.py)
CONFIGS = NORM_CONFIGS
BENCH_CONFIGS = NORM_BENCH_CONFIGS

EPS = 1e-6
WEIGHT_BIAS = 1.0  # FusedAddRMSNormKernel's weight_bias for Gemma: (1 + w)


def get_kernel(dtype, hidden, tokens=None, **_):
    """The TIRx PrimFunc the host launches for ``tokens`` rows (``_norm.schedule``).

    Tokens are dynamic; their count picks the schedule. A persistent kernel takes a trailing
    ``ctas`` grid size: launch through ``_norm.launcher``, which passes it.
    """
    return _norm.kernel_for("fused_add_rmsnorm", dtype, hidden, tokens, WEIGHT_BIAS)


def apply(x, residual, w, eps=EPS):
    """``flashinfer.norm.gemma_fused_add_rmsnorm(x, residual, w, eps)``: updates x and residual."""
    _norm.fused_add_rmsnorm(x, residual, w, eps, weight_bias=WEIGHT_BIAS)


def prepare_data(dtype, tokens, hidden, **_):
    return {
        "x": _norm.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden),
        "residual": _norm.randn((tokens, hidden), dtype, seed=tokens * 11 + hidden + 3),
        "w": _norm.randn((hidden,), dtype, seed=hidden + 1, scale=0.5),
    }


def reference(x, residual, w, eps=EPS):
    """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
    s = x.float() + residual.float()
    rms_rcp = torch.rsqrt(s.square().mean(-1, keepdim=True) + eps)
    return s.to(x.dtype), s * rms_rcp * (WEIGHT_BIAS + w.float())


def run_test(dtype, tokens, hidden, **_):
    _norm.skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, tokens, hidden)
    want_res, want_out = reference(**data)
    x, res = data["x"].clone(), data["residual"].clone()
    apply(x, res, data["w"])
    torch.cuda.synchronize()
    # The new residual is one fp32 add rounded once: it must match bit for bit.
    _norm.assert_close("residual vs torch", res, want_res, {"rtol": 0, "atol": 0})
    _norm.assert_close("output vs torch fp32", x, want_out, _norm.dtype_tols(dtype))
    if _norm.flashinfer_available():
        import flashinfer

        fx, fres = data["x"].clone(), data["residual"].clone()
        flashinfer.norm.gemma_fused_add_rmsnorm(fx, fres, data["w"], eps=EPS)
        _norm.assert_close("residual vs flashinfer", res, fres, {"rtol": 0, "atol": 0})
        _norm.assert_close("output vs flashinfer", x, fx, _norm.ulp_tols(dtype))


def run_bench(
    dtype, tokens, hidden, *, warmup=None, repeat=None, timer=None, rounds=1, cooldown_s=1.0, **_
):
    from tirx_kernels.core import toolchain

    data = prepare_data(dtype, tokens, hidden)
    w = data["w"]
    run = _norm.launcher("fused_add_rmsnorm", dtype, hidden, tokens, WEIGHT_BIAS)
    x0, r0 = data["x"].clone(), data["residual"].clone()  # each implementation owns its state

    def build_flashinfer():
        import flashinfer

        x1, r1 = data["x"].clone(), data["residual"].clone()
        flashinfer.norm.gemma_fused_add_rmsnorm(x1, r1, w, eps=EPS)  # JIT outside timing
        return lambda: flashinfer.norm.gemma_fused_add_rmsnorm(x1, r1, w, eps=EPS)

    def build_torch():
        x2, r2 = data["x"].clone(), data["residual"].clone()
        w1 = (1.0 + w.float()).to(w.dtype)  # torch's best case: (1 + w) folded outside timing
        F = torch.nn.functional

        def run():
            r2.add_(x2)
            return F.rms_norm(r2, (hidden,), w1, EPS)

        return run

    return toolchain.bench(
        {"tirx": lambda: run(x0, r0, w, EPS)},
        references={"flashinfer": build_flashinfer, "torch": build_torch},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )
