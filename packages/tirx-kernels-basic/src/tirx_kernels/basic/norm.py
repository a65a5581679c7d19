# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public RMSNorm op: ``rmsnorm(input, weight, eps=1e-6, out=None) -> Tensor``.

``torch.ops.tirx_kernels.basic_rmsnorm(out, input, weight, eps)`` writes
``input * rsqrt(mean(input^2, -1) + eps) * weight`` into ``out`` and returns None (a torch
custom op: eager, CUDA graphs, ``torch.compile(fullgraph=True)``); ``rmsnorm`` allocates
``out`` when it is None and returns it. ``input`` is (batch, hidden), bf16 or fp16, with
``hidden`` a multiple of 8 up to 32768; numerics in ``_rmsnorm_tirx``.
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import host, toolchain
from tirx_kernels.core.ops import public_op

from ._args import check_memory, dtype_name
from ._rmsnorm_schedule import MAX_HIDDEN, VEC
from ._rmsnorm_tirx import make_rmsnorm

__all__ = ["compiled_rmsnorm", "rmsnorm"]


@functools.cache
def compiled_rmsnorm(hidden: int, dtype: str, eps: float):
    """The kernel for one (hidden, dtype, eps), compiled once (eps is a kernel constant;
    the batch is dynamic). Called as ``(input, weight, out)``."""
    return toolchain.compile(make_rmsnorm(hidden, dtype, eps))


def _check(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor) -> str:
    """The dtype name of valid arguments; ValueError naming the argument and the fix."""
    fn = "rmsnorm"
    dtype = dtype_name(fn, "input", input)
    if input.dim() != 2:
        raise ValueError(
            f"{fn}: input must be 2-D (batch, hidden), got shape "
            f"{tuple(input.shape)}; flatten it with input.view(-1, input.shape[-1])"
        )
    hidden = input.shape[1]
    if hidden % VEC or not VEC <= hidden <= MAX_HIDDEN:
        raise ValueError(
            f"{fn}: input.shape[1] (hidden) must be a multiple of {VEC} in "
            f"[{VEC}, {MAX_HIDDEN}], got {hidden}; use "
            "torch.nn.functional.rms_norm for other sizes"
        )
    if weight.dim() != 1 or weight.shape[0] != hidden:
        raise ValueError(
            f"{fn}: weight must have shape ({hidden},) (input's hidden), got "
            f"{tuple(weight.shape)}; pass the weight of input's last dimension"
        )
    if weight.dtype != input.dtype:
        raise ValueError(
            f"{fn}: weight must have input's dtype {input.dtype}, got "
            f"{weight.dtype}; cast it with weight.to(input.dtype)"
        )
    if out.shape != input.shape or out.dtype != input.dtype:
        raise ValueError(
            f"{fn}: out must have input's shape {tuple(input.shape)} and dtype "
            f"{input.dtype}, got {tuple(out.shape)} {out.dtype}; allocate it "
            "with torch.empty_like(input)"
        )
    device = input.get_device()
    for name, tensor in (("input", input), ("weight", weight), ("out", out)):
        check_memory(fn, name, tensor, device)
    return dtype


_PLANS: dict = {}
_FAST: dict = {}  # the kernel-checked plans by (eps, input's shape, dtype, device)
_sig = host.signature


def _plan(eps: float, out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor):
    """The checked launch of one call signature, ``plan(out, input, weight)``
    (:mod:`tirx_kernels.core.host`); eps is a kernel constant, so part of the key."""
    key = (eps, _sig(out), _sig(input), _sig(weight))
    return host.lookup(_PLANS, key, _resolve, eps, out, input, weight)


def _resolve(eps: float, out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor):
    dtype = _check(out, input, weight)
    if not input.shape[0]:  # an empty batch has nothing to launch
        return host.nothing
    kernel = compiled_rmsnorm(input.shape[1], dtype, eps)
    fn = host.direct_launcher(kernel, input, weight, out) or host.main_of(kernel)
    return host.kernel_checked(lambda out, input, weight: fn(input, weight, out))


def _run(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    key = (eps, input.shape, input.dtype, input.get_device())
    host.run(_FAST, key, (out, input, weight), _plan, eps, out, input, weight)


@public_op("basic_rmsnorm", mutates_args=("out",))
def _rmsnorm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    _run(out, input, weight, eps)


def rmsnorm(
    input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm over the last dimension of ``input`` (batch, hidden); writes ``out`` when
    given (same shape and dtype as ``input``) and returns it. Eager calls on plain CUDA
    tensors skip the torch dispatcher (:mod:`tirx_kernels.core.host`)."""
    if out is None:
        out = torch.empty_like(input)
    if host.plain_call(input, out, weight):
        _run(out, input, weight, eps)
    else:
        _rmsnorm(out, input, weight, eps)
    return out
