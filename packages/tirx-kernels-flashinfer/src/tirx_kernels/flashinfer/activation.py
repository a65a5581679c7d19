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
dependent launch. The kernels are :mod:`._activation_tirx`'s.

Public ops (``torch.ops.tirx_kernels.*``, write ``out``, return None):
``flashinfer_silu_and_mul``, ``flashinfer_gelu_and_mul``, ``flashinfer_gelu_tanh_and_mul``.

Numerics (as upstream, whose JIT builds with ``-use_fast_math``, as TIRx does): bf16/fp16 in and
out, fp32 math, output rounded to nearest. Identical in flashinfer-python 0.7.2.post1.

- ``silu``:      ``v / (1 + __expf(-v))``
- ``gelu``:      ``v * 0.5 * (1 + erff(v * M_SQRT1_2))`` (exact erf form)
- ``gelu_tanh``: ``v * (0.5 * (1 + tanh.approx.f32(0.7978845608028654 * (v + 0.044715 v^3))))``
  (PTX ``tanh.approx.f32``, max relative error 2^-11, like upstream ``math::tanh``)

Dispatch domain (checked; anything else raises ValueError naming the argument): input
``(..., 2 * d)`` contiguous, 16-byte aligned CUDA tensor, bfloat16 or float16; ``d % 4 == 0``
(upstream requires rows of a multiple of 16 bytes); ``tokens * 2 * d < 2**31`` (int32
indexing); ``out`` contiguous, aligned, ``(..., d)`` of input's dtype and device.
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

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


def _check(where, input, out):
    """(dtype, d, tokens) of a valid call, else ValueError naming the argument.

    The device is checked last, so that CPU tensors reach every other check.
    """
    if input.dim() < 1 or input.shape[-1] % 8 != 0 or input.shape[-1] == 0:
        raise ValueError(
            f"{where}: input must be (..., 2 * d) with d a positive multiple of 4 (rows of a "
            f"multiple of 16 bytes), got {tuple(input.shape)}"
        )
    dtype = _DTYPES.get(input.dtype)
    if dtype is None:
        raise ValueError(f"{where}: input must be bfloat16 or float16, got {input.dtype}")
    if not input.is_contiguous() or input.data_ptr() % 16 != 0:
        raise ValueError(f"{where}: input must be contiguous and 16-byte aligned")
    d = input.shape[-1] // 2
    tokens = input.numel() // (2 * d)
    if tokens * 2 * d >= 2**31:
        raise ValueError(f"{where}: input must hold < 2**31 elements (int32 indexing)")
    if out.shape[:-1] != input.shape[:-1] or out.shape[-1:] != (d,) or out.dtype != input.dtype:
        raise ValueError(
            f"{where}: out must be {(*input.shape[:-1], d)} of {input.dtype}, "
            f"got {tuple(out.shape)} of {out.dtype}"
        )
    if not out.is_contiguous() or out.data_ptr() % 16 != 0:
        raise ValueError(f"{where}: out must be contiguous and 16-byte aligned")
    if not input.is_cuda:
        raise ValueError(f"{where}: input must be a CUDA tensor, got device {input.device}")
    if out.device != input.device:
        raise ValueError(f"{where}: out must be on input's device {input.device}, got {out.device}")
    return dtype, d, tokens


def act_and_mul_into(act, out, input, schedule=None):
    """The checked launch behind the ops: ``out = act(input[..., :d]) * input[..., d:]``.

    ``schedule`` forces one of ``SCHEDULES`` (tests); None is the host's ``SCHEDULE[act]``.
    """
    where = f"{act}_and_mul"
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"{where}: schedule must be one of {SCHEDULES}, got {schedule!r}")
    dtype, d, tokens = _check(where, input, out)
    if not tokens:
        return
    schedule = schedule or SCHEDULE[act]
    ex = _compiled(act, dtype, d, schedule)
    x2 = input if input.dim() == 2 else input.view(tokens, 2 * d)
    o2 = out if out.dim() == 2 else out.view(tokens, d)
    if schedule == "flat":
        ex(x2, o2)
    else:
        ex(x2, o2, _stream_ctas(d, tokens, input.device.index or 0))


@public_op("flashinfer_silu_and_mul", mutates_args=("out",))
def _silu_and_mul(out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None) -> None:
    act_and_mul_into("silu", out, input)


@public_op("flashinfer_gelu_and_mul", mutates_args=("out",))
def _gelu_and_mul(out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None) -> None:
    act_and_mul_into("gelu", out, input)


@public_op("flashinfer_gelu_tanh_and_mul", mutates_args=("out",))
def _gelu_tanh_and_mul(
    out: torch.Tensor, input: torch.Tensor, enable_pdl: bool | None = None
) -> None:
    act_and_mul_into("gelu_tanh", out, input)


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
    if out is None:
        out = _out_like(input)
    torch.ops.tirx_kernels.flashinfer_silu_and_mul(out, input, enable_pdl)
    return out


def gelu_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``gelu(input[..., :d]) * input[..., d:]`` (exact erf GELU) into ``out`` (allocated when
    None); returns ``out``. ``enable_pdl`` is ignored."""
    if out is None:
        out = _out_like(input)
    torch.ops.tirx_kernels.flashinfer_gelu_and_mul(out, input, enable_pdl)
    return out


def gelu_tanh_and_mul(
    input: torch.Tensor, out: torch.Tensor | None = None, enable_pdl: bool | None = None
) -> torch.Tensor:
    """``gelu_tanh(input[..., :d]) * input[..., d:]`` (tanh-approximated GELU) into ``out``
    (allocated when None); returns ``out``. ``enable_pdl`` is ignored."""
    if out is None:
        out = _out_like(input)
    torch.ops.tirx_kernels.flashinfer_gelu_tanh_and_mul(out, input, enable_pdl)
    return out
