# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fused gated activations ``act(input[..., :d]) * input[..., d:]``: public ops and wrappers.

Port of FlashInfer's ``flashinfer/activation.py`` (@ fb28d724): ``silu_and_mul``,
``gelu_and_mul`` and ``gelu_tanh_and_mul`` keep upstream's signature
``(input, out=None, enable_pdl=None) -> out`` and its ops' ``(out, input, enable_pdl)``.
``enable_pdl`` is accepted and ignored: the TIRx kernels are launched without programmatic
dependent launch (upstream's ``enable_pdl=False``: the next kernel starts after ours ends).
The host path is ``_host``'s: checks and kernel choice once per call signature, then a
direct launch (see ``norm``). The kernels are :mod:`._activation_tirx`'s.

Public ops (``torch.ops.tirx_kernels.*``, write ``out``, return None):
``flashinfer_silu_and_mul``, ``flashinfer_gelu_and_mul``, ``flashinfer_gelu_tanh_and_mul``.

Numerics (as upstream, whose JIT builds with ``-use_fast_math``, as TIRx does): bf16/fp16 in and
out, fp32 math, output rounded to nearest. Identical in flashinfer-python 0.7.2.post1.

- ``silu``:      ``v / (1 + __expf(-v))``
- ``gelu``:      ``v * 0.5 * (1 + erff(v * M_SQRT1_2))`` (exact erf form)
- ``gelu_tanh``: ``v * (0.5 * (1 + tanh.approx.f32(0.7978845608028654 * (v + 0.044715 v^3))))``
  (PTX ``tanh.approx.f32``, max relative error 2^-11, like upstream ``math::tanh``)

Dispatch domain (checked; anything else raises ValueError naming the argument): input
``(..., 2 * d)`` CUDA tensor with a contiguous last dimension, bfloat16 or float16;
``d % 4 == 0`` (upstream requires rows of a multiple of 16 bytes); ``tokens * 2 * d < 2**31``
(int32 indexing); ``out`` ``(..., d)`` of input's dtype and device. Strided rows or
unaligned views run on contiguous copies (the result copied into ``out``).
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from . import _host
from ._activation_tirx import (
    SCHEDULE,
    SCHEDULES,
    STREAM_CTAS_PER_SM,
    THREADS,
    get_act_and_mul_kernel,
)

_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


@functools.cache
def _compiled(act, dtype, d, schedule):
    return toolchain.compile(get_act_and_mul_kernel(act, dtype, d, schedule=schedule))


def _stream_ctas(d, tokens, device_index):
    """The streaming kernel's grid: at most its resident CTAs."""
    nv = d // (8 if d % 8 == 0 else 4)
    return min(-(-tokens * nv // THREADS), toolchain.sm_count(device_index) * STREAM_CTAS_PER_SM)


def launcher(act, dtype, d, schedule, tokens, device_index=0):
    """``f(x2d, out2d)`` launching the kernel for ``tokens >= 1`` rows, unchecked (benchmarks).
    ``schedule``: one of ``SCHEDULES``, None for the host's."""
    schedule = schedule or SCHEDULE[act]
    ex = _compiled(act, dtype, d, schedule)
    if schedule == "flat":
        return ex
    ctas = _stream_ctas(d, tokens, device_index)
    return lambda x2, o2: ex(x2, o2, ctas)


def _resolve(act, out, input, schedule=None):
    """Check a call; its plan ``f(out, input)``, else ValueError naming the argument.

    The device is checked last, so that CPU tensors reach every other check.
    """
    where = f"{act}_and_mul"
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"{where}: schedule must be one of {SCHEDULES}, got {schedule!r}")
    if input.dim() < 1 or input.shape[-1] % 8 != 0 or input.shape[-1] == 0:
        raise ValueError(
            f"{where}: input must be (..., 2 * d) with d a positive multiple of 4 (rows of a "
            f"multiple of 16 bytes, as upstream), got {tuple(input.shape)}"
        )
    dtype = _DTYPES.get(input.dtype)
    if dtype is None:
        raise ValueError(f"{where}: input must be bfloat16 or float16, got {input.dtype}")
    d = input.shape[-1] // 2
    tokens = input.numel() // (2 * d)
    if tokens * 2 * d >= 2**31:
        raise ValueError(f"{where}: input must hold < 2**31 elements (int32 indexing)")
    if out.shape[:-1] != input.shape[:-1] or out.shape[-1:] != (d,) or out.dtype != input.dtype:
        raise ValueError(
            f"{where}: out must be {(*input.shape[:-1], d)} of {input.dtype}, "
            f"got {tuple(out.shape)} of {out.dtype}"
        )
    named = {"input": input, "out": out}
    _host.check_last_dim(where, named)
    device = _host.cuda_index(where, named)
    if not tokens:
        return _host.nothing
    schedule = schedule or SCHEDULE[act]
    kernel = _compiled(act, dtype, d, schedule)
    fn = _host.main_of(kernel)
    extra = () if schedule == "flat" else (_stream_ctas(d, tokens, device),)
    in_ok, out_ok = _host.aligned(input, 16), _host.aligned(out, 16)
    if in_ok and out_ok and input.dim() == 2:
        launch = _host.direct_launcher(kernel, input, out, *extra) or fn
        return _host.kernel_checked(lambda out, input: launch(input, out, *extra))

    def rows(out, input):  # other ranks as rows; strided or unaligned through copies
        x = input.view(tokens, 2 * d) if in_ok else input.reshape(tokens, 2 * d).clone()
        y = (
            out.view(tokens, d)
            if out_ok
            else torch.empty((tokens, d), dtype=out.dtype, device=out.device)
        )
        fn(x, y, *extra)
        if not out_ok:
            out.copy_(y.view(out.shape))

    return rows


_PLANS: dict = {}
_FAST: dict = {}  # kernel-checked plans by (act, input's shape, dtype, device): _host.run
_sig = _host.signature
_direct = _host.direct


def _plan(act, out, input):
    return _host.lookup(_PLANS, (act, _sig(out), _sig(input)), _resolve, act, out, input)


def _run(act, out, input) -> None:
    key = (act, input.shape, input.dtype, input.get_device())
    _host.run(_FAST, key, (out, input), _plan, act, out, input)


def act_and_mul_into(act, out, input, schedule=None):
    """The checked launch behind the ops: ``out = act(input[..., :d]) * input[..., d:]``.

    ``schedule`` forces one of ``SCHEDULES`` (tests); None is the host's ``SCHEDULE[act]``.
    """
    if schedule is None:
        _run(act, out, input)
    else:
        _resolve(act, out, input, schedule)(out, input)


@public_op("flashinfer_silu_and_mul", mutates_args=("out",))
def _silu_and_mul(out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None) -> None:
    _run("silu", out, input)


@public_op("flashinfer_gelu_and_mul", mutates_args=("out",))
def _gelu_and_mul(out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None) -> None:
    _run("gelu", out, input)


@public_op("flashinfer_gelu_tanh_and_mul", mutates_args=("out",))
def _gelu_tanh_and_mul(
    out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None
) -> None:
    _run("gelu_tanh", out, input)


_OPS = {
    "silu": torch.ops.tirx_kernels.flashinfer_silu_and_mul.default,
    "gelu": torch.ops.tirx_kernels.flashinfer_gelu_and_mul.default,
    "gelu_tanh": torch.ops.tirx_kernels.flashinfer_gelu_tanh_and_mul.default,
}


def _act_and_mul(act, input, out, enable_pdl):
    """The wrappers' body: allocate ``out`` when None, run, return ``out``."""
    if out is None:
        out = _out_like(input)
    if _direct(input):
        _run(act, out, input)
    else:
        _OPS[act](out, input, enable_pdl)
    return out


def _out_like(input):
    """The ``(..., d)`` output the wrappers allocate when ``out`` is None."""
    return torch.empty(
        (*input.shape[:-1], input.shape[-1] // 2), dtype=input.dtype, device=input.device
    )


def silu_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``silu(input[..., :d]) * input[..., d:]`` into ``out`` (allocated when None); returns
    ``out``. ``enable_pdl`` is ignored (see the module docstring)."""
    return _act_and_mul("silu", input, out, enable_pdl)


def gelu_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``gelu(input[..., :d]) * input[..., d:]`` (exact erf GELU) into ``out`` (allocated when
    None); returns ``out``. ``enable_pdl`` is ignored."""
    return _act_and_mul("gelu", input, out, enable_pdl)


def gelu_tanh_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``gelu_tanh(input[..., :d]) * input[..., d:]`` (tanh-approximated GELU) into ``out``
    (allocated when None); returns ``out``. ``enable_pdl`` is ignored."""
    return _act_and_mul("gelu_tanh", input, out, enable_pdl)
