# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2023 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Rotary position embedding with position ids: the public ops and FlashInfer's wrappers.

Port of the ``apply_rope_pos_ids`` path of FlashInfer (@ fb28d724): ``flashinfer/rope.py``
(``apply_rope_pos_ids_inplace`` / ``apply_rope_pos_ids``, same names, defaults and returns;
the ops ``flashinfer::apply_rope_pos_ids``) and ``csrc/rope.cu`` (shape checks, int32/int64
position ids). The kernels are :mod:`._rope_tirx`'s, the choice among them
:mod:`._rope_schedule`'s.

Public ops (``torch.ops.tirx_kernels.*``): ``flashinfer_apply_rope_pos_ids_inplace`` rotates
q and k in place; ``flashinfer_apply_rope_pos_ids`` writes the rotated q and k into
``q_rope`` / ``k_rope`` (copies q and k there, then rotates in place: one extra copy).

Numerics, as upstream: for a token with position ``p`` and rotation pair ``k``
(``0 <= k < head_dim / 2``), in fp32 with fast-math intrinsics (TIRx builds with
``-use_fast_math`` as well): ``freq_k = __powf(1/rope_theta, float(2k) / head_dim) *
(1/rope_scale)`` (the reciprocals are rounded to fp32 on the host, as upstream does;
upstream's llama-3.1 "smooth" blend is the identity for this entry point),
``theta = float(p) * freq_k``, ``cos/sin = __cosf/__sinf(theta)`` (PTX ``cos/sin.approx``,
like upstream's ``__sincosf``). Pair ``k`` is elements ``(k, k + d/2)`` (non-interleaved,
"neox") or ``(2k, 2k + 1)`` (interleaved, GPT-J): ``x0' = x0 * cos - x1 * sin``,
``x1' = x1 * cos + x0 * sin``, rounded to the input dtype. Expected difference to FlashInfer:
at most one output ulp (fp32 contraction order); to an accurate fp32 torch reference:
dominated by ``__powf``'s ~4e-7 relative error times ``p`` (about 1e-2 absolute at p ~ 4k on
randn data). The numerics are identical in flashinfer-python 0.7.2.post1 (git beabf500).

Dispatch domain (checked; anything else raises ValueError naming the argument): q
``(nnz, Hq, D)`` and k ``(nnz, Hk, D)`` contiguous CUDA tensors, same dtype bfloat16 or
float16, ``D`` in {64, 128, 256} and ``rotary_dim == D`` (upstream also takes 512 and a
partial rotary_dim); ``pos_ids`` int32 or int64 of shape ``(nnz,)``;
``nnz * max(Hq, Hk) * D < 2**31``.
"""

from __future__ import annotations

import functools
import math

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from ._rope_schedule import plan
from ._rope_tirx import HEAD_DIMS, get_grid_kernel, get_walk_kernel

_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
_POS_DTYPES = {torch.int32: "int32", torch.int64: "int64"}


def f32(x):
    """``x`` rounded to fp32, as a Python float."""
    return float(torch.tensor(x, dtype=torch.float32))


@functools.cache
def rcp_f32(x):
    """``1 / x`` as the kernels take it: upstream passes float x and takes 1.0f / x on the host."""
    return f32(1.0 / f32(x))


@functools.cache
def _compiled(dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, walk):
    args = (dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype)
    if walk:
        return toolchain.compile(get_walk_kernel(*args))
    return toolchain.compile(get_grid_kernel(*args))


def launcher(dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, tokens, sms):
    """``f(q, k, pos, rcp_scale, rcp_theta)`` running the host's kernel for ``tokens >= 1``
    in place, unchecked (benchmarks and sweeps). ``sms``: the device's SM count."""
    walk, grid = plan(tokens, head_dim, num_q_heads + num_kv_heads, sms)
    ex = _compiled(dtype, head_dim, num_q_heads, num_kv_heads, bool(interleave), pos_dtype, walk)
    return lambda q, k, pos, rcp_scale, rcp_theta: ex(q, k, pos, grid, rcp_scale, rcp_theta)


def _check(where, q, k, pos_ids, rotary_dim, rope_scale, rope_theta):
    """(dtype, pos_dtype) names of a valid call, else ValueError naming the argument.

    The device is checked apart (:func:`_check_device`, last), so that CPU tensors reach
    every other check.
    """
    if q.dim() != 3:
        raise ValueError(f"{where}: q must be (nnz, num_q_heads, head_dim), got {tuple(q.shape)}")
    nnz, hq, d = q.shape
    if k.dim() != 3 or k.shape[0] != nnz or k.shape[2] != d:
        raise ValueError(
            f"{where}: k must be (nnz, num_kv_heads, head_dim) = ({nnz}, *, {d}) like q, "
            f"got {tuple(k.shape)}"
        )
    if tuple(pos_ids.shape) != (nnz,):
        raise ValueError(
            f"{where}: pos_ids must be ({nnz},), one per token, got {tuple(pos_ids.shape)}"
        )
    hk = k.shape[1]
    if hq == 0 or hk == 0:
        raise ValueError(f"{where}: q and k need at least one head, got {hq} and {hk}")
    dtype = _DTYPES.get(q.dtype)
    if dtype is None:
        raise ValueError(f"{where}: q must be bfloat16 or float16, got {q.dtype}")
    if k.dtype != q.dtype:
        raise ValueError(f"{where}: k must have q's dtype {q.dtype}, got {k.dtype}")
    pos_dtype = _POS_DTYPES.get(pos_ids.dtype)
    if pos_dtype is None:
        raise ValueError(f"{where}: pos_ids must be int32 or int64, got {pos_ids.dtype}")
    if d not in HEAD_DIMS:
        raise ValueError(f"{where}: head_dim (q.shape[-1]) must be one of {HEAD_DIMS}, got {d}")
    if rotary_dim != d:
        raise ValueError(
            f"{where}: rotary_dim must be None or head_dim ({d}); a partial rotary_dim "
            f"({rotary_dim}) is not supported"
        )
    for name, x in (("rope_scale", rope_scale), ("rope_theta", rope_theta)):
        if not math.isfinite(x) or x == 0:
            raise ValueError(f"{where}: {name} must be finite and nonzero, got {x}")
    for name, t in (("q", q), ("k", k), ("pos_ids", pos_ids)):
        if not t.is_contiguous():
            raise ValueError(f"{where}: {name} must be contiguous; pass {name}.contiguous()")
    if nnz * max(hq, hk) * d >= 2**31:
        raise ValueError(f"{where}: q and k must hold < 2**31 elements per tensor (int32 indexing)")
    return dtype, pos_dtype


def _check_device(where, q, k, pos_ids):
    for name, t in (("q", q), ("k", k), ("pos_ids", pos_ids)):
        if not t.is_cuda:
            raise ValueError(f"{where}: {name} must be a CUDA tensor, got device {t.device}")
    if k.device != q.device or pos_ids.device != q.device:
        raise ValueError(f"{where}: q, k and pos_ids must be on one device")


def _rotate(q, k, pos_ids, dtype, pos_dtype, interleave, rope_scale, rope_theta):
    """Launch the host's kernel on checked q, k in place."""
    nnz, hq, d = q.shape
    hk = k.shape[1]
    walk, grid = plan(nnz, d, hq + hk, toolchain.sm_count(q.device.index or 0))
    ex = _compiled(dtype, d, hq, hk, bool(interleave), pos_dtype, walk)
    ex(q, k, pos_ids, grid, rcp_f32(rope_scale), rcp_f32(rope_theta))


@public_op("flashinfer_apply_rope_pos_ids_inplace", mutates_args=("q", "k"))
def _apply_rope_pos_ids_inplace(
    q: torch.Tensor,
    k: torch.Tensor,
    pos_ids: torch.Tensor,
    rotary_dim: int,
    interleave: bool,
    rope_scale: float,
    rope_theta: float,
) -> None:
    where = "apply_rope_pos_ids_inplace"
    dtype, pos_dtype = _check(where, q, k, pos_ids, rotary_dim, rope_scale, rope_theta)
    _check_device(where, q, k, pos_ids)
    if q.shape[0]:
        _rotate(q, k, pos_ids, dtype, pos_dtype, interleave, rope_scale, rope_theta)


@public_op("flashinfer_apply_rope_pos_ids", mutates_args=("q_rope", "k_rope"))
def _apply_rope_pos_ids(
    q: torch.Tensor,
    k: torch.Tensor,
    q_rope: torch.Tensor,
    k_rope: torch.Tensor,
    pos_ids: torch.Tensor,
    rotary_dim: int,
    interleave: bool,
    rope_scale: float,
    rope_theta: float,
) -> None:
    where = "apply_rope_pos_ids"
    dtype, pos_dtype = _check(where, q, k, pos_ids, rotary_dim, rope_scale, rope_theta)
    for name, out, x in (("q_rope", q_rope, q), ("k_rope", k_rope, k)):
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(
                f"{where}: {name} must match {name[0]} ({tuple(x.shape)}, {x.dtype}, {x.device}),"
                f" got ({tuple(out.shape)}, {out.dtype}, {out.device})"
            )
        if not out.is_contiguous():
            raise ValueError(f"{where}: {name} must be contiguous")
    _check_device(where, q, k, pos_ids)
    if q.shape[0]:
        # The kernels rotate in place: copy, then rotate the copies.
        q_rope.copy_(q)
        k_rope.copy_(k)
        _rotate(q_rope, k_rope, pos_ids, dtype, pos_dtype, interleave, rope_scale, rope_theta)


def apply_rope_pos_ids_inplace(
    q: torch.Tensor,
    k: torch.Tensor,
    pos_ids: torch.Tensor,
    rotary_dim: int | None = None,
    interleave: bool = False,
    rope_scale: float = 1,
    rope_theta: float = 1e4,
) -> None:
    """Rotate q ``(nnz, num_q_heads, head_dim)`` and k ``(nnz, num_kv_heads, head_dim)`` in
    place by the positions ``pos_ids`` ``(nnz,)`` (FlashInfer's signature and defaults)."""
    if rotary_dim is None:
        rotary_dim = q.size(-1)
    torch.ops.tirx_kernels.flashinfer_apply_rope_pos_ids_inplace(
        q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta
    )


def apply_rope_pos_ids(
    q: torch.Tensor,
    k: torch.Tensor,
    pos_ids: torch.Tensor,
    rotary_dim: int | None = None,
    interleave: bool = False,
    rope_scale: float = 1,
    rope_theta: float = 1e4,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q_rope, k_rope)``: q and k rotated by ``pos_ids``, q and k unchanged (FlashInfer's
    signature and defaults)."""
    q_rope = torch.empty_like(q)
    k_rope = torch.empty_like(k)
    if rotary_dim is None:
        rotary_dim = q.size(-1)
    torch.ops.tirx_kernels.flashinfer_apply_rope_pos_ids(
        q, k, q_rope, k_rope, pos_ids, rotary_dim, interleave, rope_scale, rope_theta
    )
    return q_rope, k_rope
