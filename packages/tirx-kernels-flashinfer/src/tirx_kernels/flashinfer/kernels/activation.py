# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fused gated activation ``act(x[t, :d]) * x[t, d:]`` (``act_and_mul``): the kernel contract.

Port of FlashInfer's ``act_and_mul_kernel`` and its wrappers ``silu_and_mul``, ``gelu_and_mul``
and ``gelu_tanh_and_mul`` (FlashInfer @ fb28d724: ``include/flashinfer/activation.cuh``,
``flashinfer/jit/activation.py``, ``flashinfer/activation.py``). The public ops, numerics and
dispatch domain are in :mod:`tirx_kernels.flashinfer.activation`, the kernels in
``_activation_tirx``; design notes in docs/activation.md. run_test goes through the public
ops (a forced ``schedule`` through their checked launch); run_bench times the host's launch
(no checks) beside FlashInfer and torch, or (config key ``mode``) the public op.
"""

from __future__ import annotations

import torch

from tirx_kernels.core.testing import (
    assert_close,
    available,
    bench,
    bench_calls,
    skip_unless_gpu,
)

from .._activation_tirx import THREADS, get_act_and_mul_kernel
from ..activation import (
    act_and_mul_into,
    gelu_and_mul,
    gelu_tanh_and_mul,
    launcher,
    silu_and_mul,
)
from ._norm_configs import OP_ROWS

KERNEL_META = {
    "name": "act_and_mul",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "act(x[:, :d]) * x[:, d:] for silu / gelu / gelu_tanh (FlashInfer port)",
}

PUBLIC_OPS = ("flashinfer_silu_and_mul", "flashinfer_gelu_and_mul", "flashinfer_gelu_tanh_and_mul")

# (matrix, act, dtype, tokens, d): "test" rows are CONFIGS, "bench" rows BENCH_CONFIGS
_ROWS = [
    ("test", "silu", "bfloat16", 1, 4096),
    ("test", "silu", "bfloat16", 4113, 11008),
    ("test", "silu", "float16", 127, 14336),
    ("test", "silu", "bfloat16", 7, 3420),
    ("test", "gelu", "bfloat16", 33, 18944),
    ("test", "gelu", "float16", 1001, 4096),
    ("test", "gelu_tanh", "bfloat16", 16, 14336),
    ("test", "gelu_tanh", "float16", 2049, 11008),
    ("bench", "silu", "bfloat16", 1, 14336),
    ("bench", "silu", "bfloat16", 16, 14336),
    ("bench", "silu", "bfloat16", 512, 14336),
    ("bench", "silu", "bfloat16", 16384, 14336),
    ("bench", "gelu", "float16", 4096, 11008),
    ("bench", "gelu_tanh", "bfloat16", 16384, 4096),
    ("bench", "silu", "float16", 16383, 18944),
]
_ABBR = {"bfloat16": "bf16", "float16": "fp16"}
_MATRIX = [
    (kind, {"label": f"{a}_{_ABBR[dt]}_t{t}_d{d}", "act": a, "dtype": dt, "tokens": t, "d": d})
    for kind, a, dt, t, d in _ROWS
]
CONFIGS = [config for kind, config in _MATRIX if kind == "test"]
BENCH_CONFIGS = [config for kind, config in _MATRIX if kind == "bench"] + [
    {"label": f"silu_bf16_t{t}_d4096_{m}", "act": "silu", "dtype": "bfloat16", "tokens": t}
    | {"d": 4096, "mode": m}
    for t, m in OP_ROWS
]


WRAPPERS = {"silu": silu_and_mul, "gelu": gelu_and_mul, "gelu_tanh": gelu_tanh_and_mul}


def get_kernel(act="silu", dtype="bfloat16", d=4096, schedule=None, threads=THREADS, **_):
    """The TIRx kernel for one (act, dtype, d); the token count is dynamic."""
    return get_act_and_mul_kernel(act, dtype, d, schedule=schedule, threads=threads)


def prepare_data(act="silu", dtype="bfloat16", tokens=1, d=4096, **_):
    g = torch.Generator(device="cuda").manual_seed(1234 + tokens + d)
    x = torch.randn(tokens, 2 * d, generator=g, device="cuda", dtype=torch.float32)
    x = x.to(getattr(torch, dtype))
    out = torch.empty(tokens, d, device="cuda", dtype=x.dtype)
    return x, out


def reference(x, act):
    """torch fp32 reference: act(x[:, :d]) * x[:, d:]."""
    d = x.shape[-1] // 2
    a, b = x[..., :d].float(), x[..., d:].float()
    if act == "silu":
        y = torch.nn.functional.silu(a)
    elif act == "gelu":
        y = torch.nn.functional.gelu(a)
    else:
        y = torch.nn.functional.gelu(a, approximate="tanh")
    return y * b


def _flashinfer_fn(act):
    import flashinfer.activation as fa

    fns = {"silu": fa.silu_and_mul, "gelu": fa.gelu_and_mul, "gelu_tanh": fa.gelu_tanh_and_mul}
    return fns[act]


def _tolerances(act, dtype):
    # rtol: about one ulp of the output type; atol: tanh.approx (rel. error 2^-11) near
    # saturation shifts 0.5 * (1 + tanh) by up to ~2.5e-4 * |v|, i.e. ~1e-2 on randn data.
    rtol = 2**-7 if dtype == "bfloat16" else 2**-9
    atol = 1.5e-2 if act == "gelu_tanh" else 2e-3
    return atol, rtol


def run_test(act="silu", dtype="bfloat16", tokens=1, d=4096, schedule=None, **_):
    skip_unless_gpu(KERNEL_META)
    x, out = prepare_data(act, dtype, tokens, d)
    if schedule is None:
        WRAPPERS[act](x, out=out)
    else:
        act_and_mul_into(act, out, x, schedule=schedule)
    torch.cuda.synchronize()
    atol, rtol = _tolerances(act, dtype)
    want = reference(x, act)
    report = {"max_err_torch": assert_close("vs torch fp32", out, want, atol=atol, rtol=rtol)}
    if not available("flashinfer.activation"):
        return report
    # Same formulas and fast-math intrinsics as upstream: at most one output ulp apart.
    want = _flashinfer_fn(act)(x)
    report["max_err_flashinfer"] = assert_close("vs flashinfer", out, want, atol=1e-6, rtol=rtol)
    return report


def run_bench(act="silu", dtype="bfloat16", tokens=1, d=4096, mode="kernel", **options):
    """The kernel launch beside FlashInfer's, or (``mode`` eager | graph) the public op."""
    if mode != "kernel":
        return bench_calls(public_calls(tokens, act, dtype, d), mode, **options)
    x, out = prepare_data(act, dtype, tokens, d)
    launch = launcher(act, dtype, d, None, tokens, x.device.index or 0)
    x2, out2 = x.view(tokens, 2 * d), out.view(tokens, d)

    def tirx():
        launch(x2, out2)

    def build_flashinfer():
        fn = _flashinfer_fn(act)
        out_fi = torch.empty_like(out)
        fn(x, out=out_fi)  # JIT build and load outside timing
        return lambda: fn(x, out=out_fi)

    def build_torch():
        F = torch.nn.functional
        a, b = x[:, :d], x[:, d:]
        out_t = torch.empty_like(out)
        if act == "silu":
            return lambda: torch.mul(F.silu(a), b, out=out_t)
        if act == "gelu":
            return lambda: torch.mul(F.gelu(a), b, out=out_t)
        return lambda: torch.mul(F.gelu(a, approximate="tanh"), b, out=out_t)

    return bench(
        tirx,
        {"flashinfer": build_flashinfer, "torch": build_torch},
        **options,
    )


def public_calls(batch, act="silu", dtype="bfloat16", d=4096):
    """Our ``<act>_and_mul``, FlashInfer's and (silu) torch's on ``batch`` rows."""
    x, out = prepare_data(act, dtype, batch, d)
    ours = WRAPPERS[act]
    calls = {"tirx": lambda: ours(x, out)}
    if act == "silu":
        calls["torch"] = lambda: torch.nn.functional.silu(x[:, :d]) * x[:, d:]
    if available("flashinfer.activation"):
        fn = _flashinfer_fn(act)
        calls["flashinfer"] = lambda: fn(x, out=out)
    return calls
