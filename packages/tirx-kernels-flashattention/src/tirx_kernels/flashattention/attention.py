# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public API, after ``hopper/flash_attn_interface.py`` (forward only):
``flash_attn_func(q, k, v, softmax_scale=None, causal=False)`` -> (out, lse), op
``torch.ops.tirx_kernels.flashattention_fwd(out, lse, q, k, v, softmax_scale, causal)``;
``flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
softmax_scale=None, causal=False)`` -> (out, lse) on packed sequences, op
``torch.ops.tirx_kernels.flashattention_varlen_fwd(out, lse, q, k, v, max_seqlen_q,
cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from tirx_kernels.core import host, toolchain
from tirx_kernels.core.ops import public_op

from ._attention_schedule import HEAD_DIMS, override_text, pick_schedule
from ._attention_tirx import DTYPES, make_flash_fwd, make_flash_fwd_varlen, needs_counter

_TORCH_DTYPES = {getattr(torch, name): name for name in DTYPES}


@functools.cache
def compiled(varlen, heads_q, heads_kv, d, dv, dtype, causal, schedule):
    """One executable per (heads, head dims, dtype, mask, schedule), batched or ``varlen``:
    sizes and the softmax scale are launch arguments."""
    make = make_flash_fwd_varlen if varlen else make_flash_fwd
    return toolchain.compile(make(heads_q, heads_kv, d, dv, dtype, causal, schedule))


def _empty_keys(out: torch.Tensor, lse: torch.Tensor) -> None:
    """No keys: out 0, lse -inf (hopper/softmax.h, an empty row sum)."""
    out.zero_()
    lse.fill_(-math.inf)


def _kernel(varlen, q, v, causal: bool, schedule=None):
    """(the compiled kernel, its schedule) for q's and v's heads and head dims; ``schedule``:
    the environment's default (:func:`pick_schedule`) when None."""
    heads_q, d = q.shape[-2:]
    heads_kv, dv = v.shape[-2:]
    schedule = schedule or pick_schedule(d, dv, causal, varlen=varlen)
    dtype = _TORCH_DTYPES[q.dtype]
    return compiled(varlen, heads_q, heads_kv, d, dv, dtype, causal, schedule), schedule


def _columns(q, k, v) -> tuple[int, int, int, int]:
    """The widths of q's, k's, v's and out's 2D views: heads * head_dim."""
    heads_q, d = q.shape[-2:]
    heads_kv, dv = v.shape[-2:]
    return heads_q * d, heads_kv * d, heads_kv * dv, heads_q * dv


def _tensor_args(columns, counted: bool, q, k, v, out, lse) -> tuple:
    """The kernel's tensor arguments: q, k, v, out as 2D (rows, heads * head_dim) views, lse
    flat and, for the dynamic walk (``counted``), a zeroed int32 tile counter."""
    qc, kc, vc, oc = columns
    rows = (q.view(-1, qc), k.view(-1, kc), v.view(-1, vc), out.view(-1, oc), lse.view(-1))
    return (*rows, _counter(q)) if counted else rows


def _unviewed_args(counted: bool, q, k, v, out, lse) -> tuple:
    """:func:`_tensor_args` with the caller's tensors as they are: what a launcher bound
    with them ``as_called`` (``host.direct_launcher``) takes."""
    return (q, k, v, out, lse, _counter(q)) if counted else (q, k, v, out, lse)


def _counter(q: torch.Tensor) -> torch.Tensor:
    """The dynamic walk's tile counter, zeroed (the kernel hands out tiles from it)."""
    return torch.zeros(1, dtype=torch.int32, device=q.device)


def launch_args(varlen, q, k, v, out, lse, causal, schedule=None):
    """(the compiled kernel, its tensor arguments) for q, k, v, out and lse of either
    layout (:func:`_tensor_args`)."""
    kernel, schedule = _kernel(varlen, q, v, bool(causal), schedule)
    counted = needs_counter(schedule, bool(causal), varlen)
    return kernel, _tensor_args(_columns(q, k, v), counted, q, k, v, out, lse)


_PLANS: dict = {}
_LAYOUT = "batch, seqlen, heads, head_dim"
_VARLEN_LAYOUT = "total, heads, head_dim"
_sig = host.signature


def _plan(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> Callable:
    """The checked launch of one call signature, ``plan(out, lse, q, k, v, scale)``; the
    schedule override is part of the key (``override_text.cache_clear()`` reads it again)."""
    key = (causal, override_text(), _sig(q), _sig(k), _sig(v))
    return host.lookup(_PLANS, key, _resolve, q, k, v, causal)


def _resolve(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> Callable:
    _check(q, k, v, _LAYOUT)
    _check_aligned(q, k, v)
    batch, seqlen_q, heads_q, _ = q.shape
    seqlen_k = k.shape[1]
    if batch * seqlen_q * heads_q == 0:
        return lambda out, lse, q, k, v, scale: None
    if seqlen_k == 0:
        return lambda out, lse, q, k, v, scale: _empty_keys(out, lse)
    kernel, schedule = _kernel(False, q, v, causal)
    sizes = (batch, seqlen_q, seqlen_k)
    columns = _columns(q, k, v)
    counted = needs_counter(schedule, causal, False)  # the dynamic walk's zeroed tile counter
    direct = _unviewed_launcher(kernel, columns, counted, q, k, v, sizes)
    if direct is not None:  # no views per call: the launcher takes the tensors as they are

        def launch_unviewed(out, lse, q, k, v, scale):
            direct(*_unviewed_args(counted, q, k, v, out, lse), *sizes, scale)

        return launch_unviewed
    fn = host.bound_on_first_call(kernel)

    def launch(out, lse, q, k, v, scale):
        fn(*_tensor_args(columns, counted, q, k, v, out, lse), *sizes, scale)

    return launch


def _unviewed_launcher(kernel, columns, counted: bool, q, k, v, sizes) -> Callable | None:
    """The direct launcher of ``kernel`` bound to this call signature, taking q, k, v, out
    and lse unviewed (``as_called``), or None where it does not apply (CPU tensors, a
    stand-in kernel, ``TIRX_KERNELS_DIRECT_LAUNCH=0``)."""
    batch, seqlen_q, heads_q, _ = q.shape
    out = q.new_empty((batch, seqlen_q, heads_q, v.shape[-1]))
    lse = q.new_empty((batch, heads_q, seqlen_q), dtype=torch.float32)
    examples = (*_tensor_args(columns, counted, q, k, v, out, lse), *sizes, 1.0)
    called = (*_unviewed_args(counted, q, k, v, out, lse), *sizes, 1.0)
    return host.direct_launcher(kernel, *examples, as_called=called)


def _varlen_plan(q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool) -> Callable:
    """:func:`_plan` of packed sequences: ``plan(out, lse, q, k, v, cu_seqlens_q,
    cu_seqlens_k, max_seqlen_q, scale)``."""
    sigs = (_sig(q), _sig(k), _sig(v), _sig(cu_seqlens_q), _sig(cu_seqlens_k))
    key = (causal, override_text(), *sigs)
    return host.lookup(_PLANS, key, _resolve_varlen, q, k, v, cu_seqlens_q, cu_seqlens_k, causal)


def _resolve_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool) -> Callable:
    _check(q, k, v, _VARLEN_LAYOUT)
    _check_aligned(q, k, v)
    _check_cu_seqlens(q, cu_seqlens_q, cu_seqlens_k)
    total_q, heads_q, _ = q.shape
    if total_q * heads_q * (cu_seqlens_q.shape[0] - 1) == 0:
        return lambda out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, scale: None
    if k.shape[0] == 0:

        def no_keys(out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, scale):
            if max_seqlen_q:
                _empty_keys(out, lse)

        return no_keys
    fn = host.main_of(_kernel(True, q, v, causal)[0])  # the varlen walk takes no tile counter
    columns = _columns(q, k, v)

    def launch(out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, scale):
        if max_seqlen_q:  # no sequence is longer than total_q: the grid never outgrows it
            tensors = _tensor_args(columns, False, q, k, v, out, lse)
            fn(*tensors, cu_q, cu_k, min(max_seqlen_q, total_q), scale)

    return launch


def _check_outputs(out: torch.Tensor, lse: torch.Tensor, q: torch.Tensor, v: torch.Tensor):
    """The op's out and lse, as the public functions allocate them (the kernel writes every
    row of both: a smaller one would be written out of bounds)."""
    if q.dim() == 4:
        batch, seqlen_q, heads_q, _ = q.shape
        shapes = (batch, seqlen_q, heads_q, v.shape[-1]), (batch, heads_q, seqlen_q)
    else:
        total_q, heads_q, _ = q.shape
        shapes = (total_q, heads_q, v.shape[-1]), (heads_q, total_q)
    for name, t, shape, dtype in (
        ("out", out, shapes[0], q.dtype),
        ("lse", lse, shapes[1], torch.float32),
    ):
        if t.shape != shape or t.dtype != dtype or t.device != q.device or not t.is_contiguous():
            raise ValueError(
                f"{name}: must be a contiguous {dtype} tensor of shape {shape} on {q.device}, "
                f"got {t.dtype} {tuple(t.shape)} on {t.device}"
            )


@public_op("flashattention_fwd", mutates_args=("out", "lse"))
def _fwd(
    out: torch.Tensor,
    lse: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float,
    causal: bool,
) -> None:
    plan = _plan(q, k, v, bool(causal))  # checks q, k, v (once per signature)
    _check_outputs(out, lse, q, v)
    plan(out, lse, q, k, v, float(softmax_scale))


_FWD = torch.ops.tirx_kernels.flashattention_fwd.default  # looked up once


@public_op("flashattention_varlen_fwd", mutates_args=("out", "lse"))
def _varlen_fwd(
    out: torch.Tensor,
    lse: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    max_seqlen_q: int,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    softmax_scale: float,
    causal: bool,
) -> None:
    plan = _varlen_plan(q, k, v, cu_seqlens_q, cu_seqlens_k, bool(causal))
    _check_outputs(out, lse, q, v)
    plan(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, float(softmax_scale))


_VARLEN_FWD = torch.ops.tirx_kernels.flashattention_varlen_fwd.default


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str) -> None:
    """q, k, v of ``layout`` ("batch, seqlen, heads, head_dim" or "total, heads, head_dim")."""
    ndim = layout.count(",") + 1
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != ndim:
            raise ValueError(
                f"{name}: must be a {ndim}D tensor ({layout}), got "
                f"{getattr(t, 'shape', type(t).__name__)}"
            )
        if t.dtype not in _TORCH_DTYPES:
            raise ValueError(
                f"{name}: dtype {t.dtype} is not supported; use torch.bfloat16 or torch.float16"
            )
        if not t.is_contiguous():
            raise ValueError(f"{name}: must be contiguous (head_dim innermost); call .contiguous()")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"k, v: dtype must equal q's ({q.dtype}), got {k.dtype} and {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"k, v: must be on q's device ({q.device}), got {k.device}, {v.device}")
    if ndim == 4 and (k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]):
        raise ValueError(f"k, v: batch must equal q's ({q.shape[0]})")
    if v.shape[:-1] != k.shape[:-1]:
        lead = layout.rsplit(",", 1)[0].replace("seqlen", "seqlen_k").replace("total", "total_k")
        lead = lead.replace("heads", "heads_kv")
        raise ValueError(f"v: ({lead}) must equal k's {tuple(k.shape[:-1])}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k: head_dim must equal q's ({q.shape[-1]}), got {k.shape[-1]}")
    if (q.shape[-1], v.shape[-1]) not in HEAD_DIMS:
        raise ValueError(
            f"q, v: head dims (d={q.shape[-1]}, d_v={v.shape[-1]}) are not supported; use one of "
            f"{', '.join(f'({a}, {b})' for a, b in HEAD_DIMS)}"
        )
    if k.shape[-2] < 1 or q.shape[-2] % k.shape[-2]:
        raise ValueError(
            f"k: heads_kv={k.shape[-2]} must divide heads_q={q.shape[-2]} (MHA, GQA or MQA)"
        )
    big = max(q.numel(), k.numel(), v.numel(), q.numel() // q.shape[-1] * v.shape[-1])
    if big >= 2**31:
        raise ValueError("q, k, v: every tensor must have < 2^31 elements (int32 indexing)")


def _check_aligned(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The 16-byte alignment TMA needs (real tensors only: a FakeTensor has no address)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.data_ptr() % 16:
            raise ValueError(
                f"{name}: must be 16-byte aligned (TMA loads it); a view at an offset is not: "
                f"pass {name}.clone()"
            )


def _scale(q: torch.Tensor, softmax_scale: float | None) -> float:
    scale = float(q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"softmax_scale: must be finite and > 0, got {scale}")
    return scale


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward: ``out = softmax(q k^T * softmax_scale) v`` per (batch, head).

    q ``(batch, seqlen_q, heads_q, d)``, k ``(batch, seqlen_k, heads_kv, d)``, v ``(batch,
    seqlen_k, heads_kv, d_v)``, contiguous bf16 or fp16 CUDA tensors; heads_q a multiple of
    heads_kv (query head h reads kv head ``h // (heads_q // heads_kv)``). ``softmax_scale``
    defaults to ``1 / sqrt(d)``; ``causal`` masks key j for query i unless
    ``j <= i + seqlen_k - seqlen_q`` (bottom-right aligned). Returns ``out`` ``(batch,
    seqlen_q, heads_q, d_v)`` in q's dtype and ``lse`` ``(batch, heads_q, seqlen_q)`` fp32
    (natural log; -inf for a row that sees no key, whose out is 0).
    """
    causal = bool(causal)
    # eager calls on plain CUDA tensors: checked once per signature, then launched directly
    plan = None
    if _direct(q, k, v):
        plan = _plan(q, k, v, causal)
    else:  # through the op (its fake answers FakeTensors); the same checks first
        _check(q, k, v, _LAYOUT)
    softmax_scale = _scale(q, softmax_scale)
    batch, seqlen_q, heads_q, _ = q.shape
    out = torch.empty((batch, seqlen_q, heads_q, v.shape[3]), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    if plan is None:
        _FWD(out, lse, q, k, v, softmax_scale, causal)
    else:
        plan(out, lse, q, k, v, softmax_scale)
    return out, lse


def _direct(q: Any, k: Any, v: Any) -> bool:
    """Whether a call may skip the dispatcher (see :mod:`tirx_kernels.core.host`)."""
    return host.plain_call(q, k, v)


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward on packed sequences (``hopper/flash_attn_interface.py``
    ``flash_attn_varlen_func``, forward only).

    q ``(total_q, heads_q, d)``, k ``(total_k, heads_kv, d)``, v ``(total_k, heads_kv, d_v)``,
    contiguous bf16 or fp16 CUDA tensors; sequence i is rows ``cu_seqlens_q[i] :
    cu_seqlens_q[i + 1]`` of q and ``cu_seqlens_k[i] : cu_seqlens_k[i + 1]`` of k and v
    (``cu_seqlens_*``: int32 ``(batch + 1,)``, non-decreasing from 0 to total; not checked,
    that would synchronize). ``max_seqlen_q`` must be at least the longest query sequence
    (it sizes the grid); ``max_seqlen_k`` is accepted as upstream's and unused. Masking,
    scale and GQA as :func:`flash_attn_func`, per sequence. Returns ``out`` ``(total_q,
    heads_q, d_v)`` and ``lse`` ``(heads_q, total_q)`` fp32.
    """
    causal = bool(causal)
    cu_q, cu_k = cu_seqlens_q, cu_seqlens_k
    plan = None
    if _direct(q, k, v) and type(cu_q) is torch.Tensor and type(cu_k) is torch.Tensor:
        plan = _varlen_plan(q, k, v, cu_q, cu_k, causal)
    else:  # through the op; the same checks first
        _check(q, k, v, _VARLEN_LAYOUT)
        _check_cu_seqlens(q, cu_q, cu_k)
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{name}: must be an int >= 0, got {n!r}")
    softmax_scale = _scale(q, softmax_scale)
    total_q, heads_q, _ = q.shape
    out = torch.empty((total_q, heads_q, v.shape[2]), dtype=q.dtype, device=q.device)
    lse = torch.empty((heads_q, total_q), dtype=torch.float32, device=q.device)
    if plan is None:
        _VARLEN_FWD(out, lse, q, k, v, max_seqlen_q, cu_q, cu_k, softmax_scale, causal)
    else:
        plan(out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, softmax_scale)
    return out, lse


def _check_cu_seqlens(q: torch.Tensor, cu_seqlens_q: Any, cu_seqlens_k: Any) -> None:
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype != torch.int32:
            raise ValueError(f"{name}: must be a 1D int32 tensor (batch + 1,)")
        if t.device != q.device or not t.is_contiguous() or t.shape[0] < 1:
            raise ValueError(f"{name}: must be contiguous, non-empty and on q's device")
    if cu_seqlens_k.shape != cu_seqlens_q.shape:
        raise ValueError(f"cu_seqlens_k: shape must equal cu_seqlens_q's {cu_seqlens_q.shape}")
