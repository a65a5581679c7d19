# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op ``matmul(a, b, out=None)``: ``a @ b`` with ``torch.matmul`` semantics for
2-D bf16/fp16 ``a`` (M, K) and ``b`` (K, N), fp32 accumulation, into ``out`` (M, N).

Layouts come from the strides, without copies: each operand is either contiguous or the
transpose of a contiguous tensor (``x.t()``, ``x.mT``). ``a`` contiguous / transposed is the
kernel's A "N" / "T", ``b`` contiguous (``a @ w``) / transposed (``a @ w.t()``, a linear
layer's (N, K) weight) its B "N" / "T": the four layouts NN, NT, TN, TT of ``_gemm_tirx``,
one compiled kernel each per (N, K, dtype, tile config), every M at run time.
Anything else raises ValueError naming the argument and the fix, never a silent copy:
other strides (``pass a.contiguous()``), dtypes, devices, shapes, and TMA's 16-byte strides
(N % 8 == 0; K % 8 == 0 unless ``a`` is transposed and ``b`` contiguous; M % 8 == 0 when
``a`` is transposed).
``torch.ops.tirx_kernels.basic_matmul(out, a, b)`` writes ``out`` and returns None (a torch
custom op: eager, CUDA graphs, ``torch.compile(fullgraph=True)``); ``matmul`` allocates
``out`` when it is None and returns it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tirx_kernels.core import host
from tirx_kernels.core.ops import public_op

from ._args import matrix_dtype_name
from .gemm import check_operands, gemm_config, gemm_launcher

__all__ = ["matmul"]


def _check(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> str:
    """The kernel layout of valid arguments; ValueError naming the argument and the fix."""
    fn = "matmul"
    matrix_dtype_name(fn, a, b)
    if b.dim() != 2 or b.shape[0] != a.shape[1]:
        raise ValueError(
            f"{fn}: b must be 2-D (K, N) with a's K = {a.shape[1]} (matmul computes a @ b), "
            f"got shape {tuple(b.shape)}; for an (N, K) weight pass w.t()"
        )
    if not (b.is_contiguous() or b.t().is_contiguous()):
        raise ValueError(
            f"{fn}: b must be contiguous or the transpose of a contiguous tensor "
            f"(b.t().is_contiguous()), got strides {tuple(b.stride())}; pass b.contiguous()"
        )
    return check_operands(fn, out, a, b.t(), n_of_b="b.shape[1]")


_PLANS: dict = {}
_sig = host.signature


def _plan(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> Callable:
    """The checked launch of one call signature, ``plan(out, a, b)``
    (:mod:`tirx_kernels.core.host`)."""
    return host.lookup(_PLANS, (_sig(out), _sig(a), _sig(b)), _resolve, out, a, b)


def _resolve(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> Callable:
    _check(out, a, b)
    (M, K), N = a.shape, b.shape[1]
    if not M or not N:  # an empty output has nothing to launch
        return host.nothing
    if not K:  # the kernel needs K >= 1; a sum over nothing is zero
        return lambda out, a, b: out.zero_()
    launch = gemm_launcher(a, b.t(), gemm_config(M, N, K), "")
    return lambda out, a, b: launch(out, a, b.t(), None, 1.0, 0.0)


@public_op("basic_matmul", mutates_args=("out",))
def _matmul(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    _plan(out, a, b)(out, a, b)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` for ``a`` (M, K) and ``b`` (K, N), each contiguous or a transposed
    contiguous tensor (module docstring); writes ``out`` (M, N) when given and returns it.
    Eager calls on plain CUDA tensors are checked once per call signature and launched
    directly (:mod:`tirx_kernels.core.host`); others take the op."""
    if out is None:
        # (M, N) for valid 2-D arguments; any shape otherwise, so the op's check reports them
        out = a.new_empty(a.shape[:-1] + b.shape[-1:])
    if host.plain_call(a, out, b):
        _plan(out, a, b)(out, a, b)
    else:
        _matmul(out, a, b)
    return out
