# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer's norm API on the TIRx ports: ``rmsnorm``, ``gemma_rmsnorm``,
``fused_add_rmsnorm``, ``gemma_fused_add_rmsnorm`` and ``layernorm``.

Upstream: ``flashinfer/norm/__init__.py`` (the functions of the same names, argument names,
defaults and returns) over ``csrc/norm.cu`` and ``include/flashinfer/norm.cuh``. Each
function is a thin wrapper over a PyTorch custom op that writes into preallocated tensors
and returns nothing, as upstream's RMSNorm ops do (upstream's ``layernorm`` op allocates its
output; ours takes ``out``, allocated by the wrapper), so it runs eagerly, under CUDA-graph
capture and under ``torch.compile(fullgraph=True)``:

=============================  ==============================================================
wrapper                        op (``torch.ops.tirx_kernels.<name>``), what it writes
=============================  ==============================================================
``rmsnorm``                    ``flashinfer_rmsnorm(out, input, weight, eps)``: ``out``
``gemma_rmsnorm``              ``flashinfer_gemma_rmsnorm(out, input, weight, eps)``: ``out``
``fused_add_rmsnorm``          ``flashinfer_fused_add_rmsnorm(input, residual, weight, eps)``:
                               ``input`` and ``residual``, in place
``gemma_fused_add_rmsnorm``    ``flashinfer_gemma_fused_add_rmsnorm(...)``: likewise
``layernorm``                  ``flashinfer_layernorm(out, input, gemma, beta, eps)``: ``out``
=============================  ==============================================================

``enable_pdl`` is accepted, as upstream takes it, and ignored: these kernels have no
programmatic dependent launch (no ``griddepcontrol``), so every launch is an ordinary one.

Domain (else ValueError naming the argument and the fix): ``input`` 2D ``(tokens, hidden)``,
bfloat16 or float16 (LayerNorm: bfloat16, with float32 ``gemma``/``beta``, as upstream);
weights 1D ``(hidden,)``; every tensor contiguous, 16-byte aligned and on ``input``'s CUDA
device; ``hidden`` in ``_norm_schedule``'s dispatch domain. Zero tokens launch nothing.

The host path: the op checks its arguments, then launches the executable cached per
(kernel, dtype, hidden, ``_norm_schedule.batch_class(tokens)``, weight bias); it compiles
once per key (``functools.cache``), never per call.
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core.ops import public_op

from ._norm_schedule import DTYPE_NAMES, batch_class, check_domain, schedule
from ._norm_tirx import make

EPS = 1e-6  # FlashInfer's default
_DTYPE_NAME = {getattr(torch, name): name for name in DTYPE_NAMES}


def kernel_for(kind: str, dtype: str, hidden: int, tokens=None, weight_bias: float = 0.0):
    """The PrimFunc the host dispatches for ``tokens`` rows (get_kernel of the modules)."""
    return make(kind, dtype, hidden, weight_bias, **schedule(kind, hidden, tokens))


@functools.cache
def _compiled(kind: str, dtype: str, hidden: int, weight_bias: float, sched: tuple):
    from tirx_kernels.core import toolchain

    func = make(kind, dtype, hidden, weight_bias, **dict(sched))
    return toolchain.compile(func, toolchain.gpu_arch() or "sm_90a")


def launcher(
    kind: str,
    dtype: str,
    hidden: int,
    tokens: int,
    weight_bias: float = 0.0,
    sched: dict | None = None,
):
    """``f(*tensors, eps)`` launching the kernel for ``tokens >= 1`` rows.

    ``sched``: make_* keywords (default: the host's ``_norm_schedule.schedule``).
    """
    sched = schedule(kind, hidden, tokens) if sched is None else sched
    return _compiled(kind, dtype, hidden, float(weight_bias), tuple(sorted(sched.items())))


@functools.cache
def _host_kernel(kind: str, dtype: str, hidden: int, batch: int, weight_bias: float):
    """The ops' launcher, one per ``batch_class``: a dict lookup per call."""
    return launcher(kind, dtype, hidden, batch, weight_bias)


def _rows(name: str, t: torch.Tensor) -> tuple[int, int]:
    if t.dim() != 2:
        raise ValueError(
            f"{name} must be 2D (tokens, hidden), got shape {tuple(t.shape)}; "
            f"reshape it to (-1, {name}.shape[-1])"
        )
    return t.shape[0], t.shape[1]


def _dtype_name(name: str, t: torch.Tensor, allowed=DTYPE_NAMES) -> str:
    dtype = _DTYPE_NAME.get(t.dtype)
    if dtype not in allowed:
        want = " or ".join(f"torch.{a}" for a in allowed)
        raise ValueError(f"{name} has dtype {t.dtype}; expected {want} (cast it with .to())")
    return dtype


def _check_like(name: str, t: torch.Tensor, input: torch.Tensor) -> None:
    if t.shape != input.shape or t.dtype != input.dtype:
        raise ValueError(
            f"{name} must have input's shape {tuple(input.shape)} and dtype {input.dtype}, "
            f"got {tuple(t.shape)} {t.dtype}"
        )


def _check_vector(name: str, t: torch.Tensor, hidden: int, dtype: torch.dtype) -> None:
    if t.dim() != 1 or t.shape[0] != hidden or t.dtype != dtype:
        raise ValueError(
            f"{name} must be 1D of shape ({hidden},) (input's hidden size) and dtype {dtype}, "
            f"got {tuple(t.shape)} {t.dtype}"
        )


def _check_memory(input: torch.Tensor, *named: tuple[str, torch.Tensor]) -> None:
    """Device, layout and alignment, after shapes and dtypes (so those checks run on CPU)."""
    if not input.is_cuda:
        raise ValueError(f"input is on {input.device}; move it to a CUDA device (.cuda())")
    for name, t in named:
        if t.device != input.device:
            raise ValueError(f"{name} is on {t.device}, input on {input.device}; use one device")
        if not t.is_contiguous():
            raise ValueError(
                f"{name} must be contiguous, got strides {t.stride()}; pass {name}.contiguous()"
            )
        if t.data_ptr() % 16:
            raise ValueError(f"{name} must be 16-byte aligned; pass a fresh {name}.clone()")


def _run_rmsnorm(out, input, weight, eps: float, weight_bias: float) -> None:
    dtype = _dtype_name("input", input)
    tokens, hidden = _rows("input", input)
    _check_vector("weight", weight, hidden, input.dtype)
    _check_like("out", out, input)
    check_domain(dtype, hidden, tokens)
    _check_memory(input, ("input", input), ("weight", weight), ("out", out))
    if tokens:
        _host_kernel("rmsnorm", dtype, hidden, batch_class(tokens), weight_bias)(
            input, weight, out, eps
        )


def _run_fused_add_rmsnorm(input, residual, weight, eps: float, weight_bias: float) -> None:
    dtype = _dtype_name("input", input)
    tokens, hidden = _rows("input", input)
    _check_like("residual", residual, input)
    _check_vector("weight", weight, hidden, input.dtype)
    check_domain(dtype, hidden, tokens)
    _check_memory(input, ("input", input), ("residual", residual), ("weight", weight))
    if tokens:
        _host_kernel("fused_add_rmsnorm", dtype, hidden, batch_class(tokens), weight_bias)(
            input, residual, weight, eps
        )


@public_op("flashinfer_rmsnorm", mutates_args=("out",))
def _rmsnorm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    _run_rmsnorm(out, input, weight, eps, 0.0)


@public_op("flashinfer_gemma_rmsnorm", mutates_args=("out",))
def _gemma_rmsnorm(
    out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_rmsnorm(out, input, weight, eps, 1.0)


@public_op("flashinfer_fused_add_rmsnorm", mutates_args=("input", "residual"))
def _fused_add_rmsnorm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_fused_add_rmsnorm(input, residual, weight, eps, 0.0)


@public_op("flashinfer_gemma_fused_add_rmsnorm", mutates_args=("input", "residual"))
def _gemma_fused_add_rmsnorm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_fused_add_rmsnorm(input, residual, weight, eps, 1.0)


@public_op("flashinfer_layernorm", mutates_args=("out",))
def _layernorm(
    out: torch.Tensor, input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float
) -> None:
    _dtype_name("input", input, ("bfloat16",))
    tokens, hidden = _rows("input", input)
    _check_vector("gemma", gemma, hidden, torch.float32)
    _check_vector("beta", beta, hidden, torch.float32)
    _check_like("out", out, input)
    check_domain("bfloat16", hidden, tokens, bf16_only=True)
    _check_memory(input, ("input", input), ("gemma", gemma), ("beta", beta), ("out", out))
    if tokens:
        _host_kernel("layernorm", "bfloat16", hidden, batch_class(tokens), 0.0)(
            input, gemma, beta, out, eps
        )


# The ops' overloads, looked up once (the wrappers run on every call).
_OPS = torch.ops.tirx_kernels
_RMSNORM = _OPS.flashinfer_rmsnorm.default
_GEMMA_RMSNORM = _OPS.flashinfer_gemma_rmsnorm.default
_FUSED_ADD_RMSNORM = _OPS.flashinfer_fused_add_rmsnorm.default
_GEMMA_FUSED_ADD_RMSNORM = _OPS.flashinfer_gemma_fused_add_rmsnorm.default
_LAYERNORM = _OPS.flashinfer_layernorm.default


def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``out = input / RMS(input) * weight`` (``flashinfer.norm.rmsnorm``), into ``out`` when
    given, else a new tensor; returns it. ``enable_pdl`` is ignored (no PDL here)."""
    if out is None:
        out = torch.empty_like(input)
    _RMSNORM(out, input, weight, eps)
    return out


def gemma_rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``out = input / RMS(input) * (1 + weight)`` (``flashinfer.norm.gemma_rmsnorm``); as
    :func:`rmsnorm` otherwise."""
    if out is None:
        out = torch.empty_like(input)
    _GEMMA_RMSNORM(out, input, weight, eps)
    return out


def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """In place (``flashinfer.norm.fused_add_rmsnorm``): ``residual += input``, then
    ``input = residual / RMS(residual) * weight`` (from the unrounded fp32 sum). Returns None;
    ``enable_pdl`` is ignored."""
    _FUSED_ADD_RMSNORM(input, residual, weight, eps)


def gemma_fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """:func:`fused_add_rmsnorm` with the weight applied as ``(1 + weight)``
    (``flashinfer.norm.gemma_fused_add_rmsnorm``)."""
    _GEMMA_FUSED_ADD_RMSNORM(input, residual, weight, eps)


def layernorm(
    input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """``(input - mean) / sqrt(var + eps) * gemma + beta`` (``flashinfer.norm.layernorm``;
    ``gemma`` is upstream's name for gamma): bfloat16 input, float32 gemma and beta; returns a
    new bfloat16 tensor."""
    out = torch.empty_like(input)
    _LAYERNORM(out, input, gemma, beta, eps)
    return out
