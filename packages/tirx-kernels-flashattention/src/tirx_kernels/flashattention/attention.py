# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public API: ``flash_attn_func(q, k, v, softmax_scale=None, causal=False)`` -> (out, lse),
after ``hopper/flash_attn_interface.py`` (forward only), and its op
``torch.ops.tirx_kernels.flashattention_fwd(out, lse, q, k, v, softmax_scale, causal)``.
"""

from __future__ import annotations

import functools
import math

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from ._attention_schedule import HEAD_DIMS, pick_schedule
from ._attention_tirx import DTYPES, make_flash_fwd

_TORCH_DTYPES = {getattr(torch, name): name for name in DTYPES}


@functools.cache
def compiled(shape, dtype, causal, scale, schedule):
    """One executable per problem ``shape`` (batch, seqlen_q, seqlen_k, heads_q, heads_kv, d,
    dv) and schedule (sizes are compile-time constants)."""
    return toolchain.compile(make_flash_fwd(*shape, dtype, causal, scale, schedule))


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
    batch, seqlen_q, heads_q, d = q.shape
    seqlen_k, heads_kv, dv = k.shape[1], k.shape[2], v.shape[3]
    if batch * seqlen_q * heads_q == 0:
        return
    if seqlen_k == 0:  # no keys: out 0, lse -inf (hopper/softmax.h, an empty row sum)
        out.zero_()
        lse.fill_(-math.inf)
        return
    shape = (batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv)
    schedule = pick_schedule(d, dv, bool(causal))
    kernel = compiled(shape, _TORCH_DTYPES[q.dtype], bool(causal), float(softmax_scale), schedule)
    kernel(
        q.view(batch * seqlen_q, heads_q * d),
        k.view(batch * seqlen_k, heads_kv * d),
        v.view(batch * seqlen_k, heads_kv * dv),
        out.view(batch * seqlen_q, heads_q * dv),
        lse.view(-1),
    )


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(
                f"{name}: must be a 4D tensor (batch, seqlen, heads, head_dim), got "
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
    if k.shape[0] != q.shape[0] or v.shape[0] != q.shape[0]:
        raise ValueError(f"k, v: batch must equal q's ({q.shape[0]})")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v: (batch, seqlen_k, heads_kv) must equal k's {tuple(k.shape[:3])}")
    if k.shape[3] != q.shape[3]:
        raise ValueError(f"k: head_dim must equal q's ({q.shape[3]}), got {k.shape[3]}")
    if (q.shape[3], v.shape[3]) not in HEAD_DIMS:
        raise ValueError(
            f"q, v: head dims (d={q.shape[3]}, d_v={v.shape[3]}) are not supported; use one of "
            f"{', '.join(f'({a}, {b})' for a, b in HEAD_DIMS)}"
        )
    if k.shape[2] < 1 or q.shape[2] % k.shape[2]:
        raise ValueError(
            f"k: heads_kv={k.shape[2]} must divide heads_q={q.shape[2]} (MHA, GQA or MQA)"
        )
    big = max(q.numel(), k.numel(), v.numel(), q.shape[0] * q.shape[1] * q.shape[2] * v.shape[3])
    if big >= 2**31:
        raise ValueError("q, k, v: every tensor must have < 2^31 elements (int32 indexing)")


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
    _check(q, k, v)
    if softmax_scale is None:
        softmax_scale = q.shape[3] ** -0.5
    softmax_scale = float(softmax_scale)
    if not (math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"softmax_scale: must be finite and > 0, got {softmax_scale}")
    batch, seqlen_q, heads_q, _ = q.shape
    out = torch.empty((batch, seqlen_q, heads_q, v.shape[3]), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    torch.ops.tirx_kernels.flashattention_fwd(out, lse, q, k, v, softmax_scale, bool(causal))
    return out, lse
