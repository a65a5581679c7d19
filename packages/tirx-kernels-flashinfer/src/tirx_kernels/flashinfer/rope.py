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
``q_rope`` / ``k_rope`` (one kernel reading q and k, as upstream; strided or unaligned
tensors: copies q and k there, then rotates in place).

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
``(nnz, Hq, D)`` and k ``(nnz, Hk, D)`` CUDA tensors with a contiguous last dimension, same
dtype bfloat16 or float16, ``D`` in {64, 128, 256, 512} (upstream's DISPATCH_HEAD_DIM);
``rotary_dim`` (default ``D``) a multiple of 16 up to ``D``: the leading ``rotary_dim``
columns of each head rotate (frequencies over ``rotary_dim``), the rest pass through;
``pos_ids`` int32 or int64 of shape ``(nnz,)``; ``nnz * max(Hq, Hk) * D < 2**31``. In
place, q and k whose tokens are a stride apart (head slices of a fused qkv: heads
contiguous, a stride of a multiple of 8) are rotated where they lie; other strided or
unaligned views run on contiguous copies, copied back.
Upstream's functions take neither ``out=`` nor ``enable_pdl``, so neither do these.

Host path: ``_host``'s (checks and kernel choice once per call signature, then a direct
launch of the compiled ``main``; ``torch.compile`` goes through the ops).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from . import _host
from ._rope_schedule import plan
from ._rope_tirx import HEAD_DIMS, get_grid_kernel, get_walk_kernel, rotary_dims

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
def _compiled(
    dtype,
    head_dim,
    num_q_heads,
    num_kv_heads,
    interleave,
    pos_dtype,
    walk,
    rotary_dim,
    outs=False,
    strided=False,
):
    args = (dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype)
    make = get_walk_kernel if walk else get_grid_kernel
    kernel = make(*args, rotary_dim=rotary_dim, out_of_place=outs, strided=strided)
    return toolchain.compile(kernel)


def _token_strided(t: torch.Tensor) -> bool:
    """Whether the token-strided kernels rotate ``t`` (nnz, heads, head_dim) in place: heads
    contiguous, tokens a multiple of 8 elements apart (16-byte vectors), 16-byte aligned,
    int32-indexable (a head slice of a fused qkv)."""
    nnz, heads, d = t.shape
    step = t.stride(0)
    aligned = t.data_ptr() % 16 == 0 and step % 8 == 0
    return aligned and t.stride(1) == d and step >= heads * d and nnz * step < 2**31


def launcher(
    dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, tokens, sms, rotary_dim=None
):
    """``f(q, k, pos, rcp_scale, rcp_theta)`` running the host's kernel for ``tokens >= 1``
    in place, unchecked (benchmarks and sweeps). ``sms``: the device's SM count."""
    rotary_dim = rotary_dim or head_dim
    walk, grid = plan(tokens, rotary_dim, num_q_heads + num_kv_heads, sms)
    ex = _compiled(
        dtype, head_dim, num_q_heads, num_kv_heads, bool(interleave), pos_dtype, walk, rotary_dim
    )
    return lambda q, k, pos, rcp_scale, rcp_theta: ex(q, k, pos, grid, rcp_scale, rcp_theta)


def _check(where, q, k, pos_ids, rotary_dim, rope_scale, rope_theta):
    """(dtype, pos_dtype) names of a valid call, else ValueError naming the argument."""
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
    if rotary_dim not in rotary_dims(d):
        raise ValueError(
            f"{where}: rotary_dim must be a multiple of 16 in [16, head_dim={d}], got {rotary_dim}"
        )
    for name, x in (("rope_scale", rope_scale), ("rope_theta", rope_theta)):
        if not math.isfinite(x) or x == 0:
            raise ValueError(f"{where}: {name} must be finite and nonzero, got {x}")
    if nnz * max(hq, hk) * d >= 2**31:
        raise ValueError(f"{where}: q and k must hold < 2**31 elements per tensor (int32 indexing)")
    return dtype, pos_dtype


def _launch(kernel, *examples) -> Callable:
    """``kernel`` launched on the tensors of ``examples``, its last three arguments (grid and
    the reciprocals of rope_scale and rope_theta) fixed as they are there."""
    fixed = tuple(range(len(examples) - 3, len(examples)))
    launch = _host.direct_launcher(kernel, *examples, constants=fixed)
    if launch is not None:
        return launch
    main, scalars = _host.main_of(kernel), examples[-3:]
    return lambda *tensors: main(*tensors, *scalars)


def _resolve(where, q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta, outs=()):
    """Check a call; its plan ``f(q, k, *outs, pos_ids)`` writing q and k rotated into
    ``outs`` (q_rope, k_rope) when given, else rotating q and k in place."""
    dtype, pos_dtype = _check(where, q, k, pos_ids, rotary_dim, rope_scale, rope_theta)
    if not pos_ids.is_contiguous():
        raise ValueError(f"{where}: pos_ids must be contiguous; pass pos_ids.contiguous()")
    named = {"q": q, "k": k, "pos_ids": pos_ids}
    for name, out, x in zip(("q_rope", "k_rope"), outs, (q, k)):
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError(
                f"{where}: {name} must match {name[0]} ({tuple(x.shape)}, {x.dtype}), "
                f"got ({tuple(out.shape)}, {out.dtype})"
            )
        named[name] = out
    _host.check_last_dim(where, named)
    device = _host.cuda_index(where, named)
    nnz, hq, d = q.shape
    if not nnz:
        return _host.nothing
    hk = k.shape[1]
    walk, grid = plan(nnz, rotary_dim, hq + hk, toolchain.sm_count(device))
    shape = (dtype, d, hq, hk, bool(interleave), pos_dtype, walk, rotary_dim)
    rs, rt = rcp_f32(rope_scale), rcp_f32(rope_theta)
    if outs and all(_host.aligned(t, 16) for t in (q, k, *outs)):
        return _host.kernel_checked(
            _launch(_compiled(*shape, outs=True), q, k, *outs, pos_ids, grid, rs, rt)
        )
    ok = [_host.aligned(t, 16) for t in outs or (q, k)]
    if not outs and not all(ok) and all(_token_strided(t) for t in (q, k)):
        rotate_strided = _host.main_of(_compiled(*shape, strided=True))
        return lambda q, k, pos_ids: rotate_strided(q, k, pos_ids, grid, rs, rt)
    fn = _host.main_of(_compiled(*shape))
    if not outs and all(ok):
        return _host.kernel_checked(_launch(_compiled(*shape), q, k, pos_ids, grid, rs, rt))

    def general(q, k, *rest):
        # out of place: copy, then rotate the copies (the kernels rotate in place); strided
        # or unaligned tensors through contiguous copies, copied back
        *outs, pos_ids = rest
        dst = outs or (q, k)
        work = [
            t if fine else t.clone(memory_format=torch.contiguous_format)
            for t, fine in zip(dst, ok)
        ]
        if outs:
            for w, x in zip(work, (q, k)):
                w.copy_(x)
        fn(*work, pos_ids, grid, rs, rt)
        for t, w, fine in zip(dst, work, ok):
            if not fine:
                t.copy_(w)

    return general


_PLANS: dict = {}
_FAST: dict = {}  # kernel-checked plans by shapes, dtypes, device and scalars: _host.run
_sig = _host.signature


def _inplace_plan(q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta):
    key = (_sig(q), _sig(k), _sig(pos_ids), rotary_dim, interleave, rope_scale, rope_theta)
    args = (q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta)
    return _host.lookup(_PLANS, key, _resolve, "apply_rope_pos_ids_inplace", *args)


def _outplace_plan(q, k, q_rope, k_rope, pos_ids, rotary_dim, interleave, rope_scale, rope_theta):
    key = (_sig(q), _sig(k), _sig(pos_ids), _sig(q_rope), _sig(k_rope))
    key += (rotary_dim, interleave, rope_scale, rope_theta)
    args = (q, k, pos_ids, rotary_dim, interleave, rope_scale, rope_theta, (q_rope, k_rope))
    return _host.lookup(_PLANS, key, _resolve, "apply_rope_pos_ids", *args)


def _run_inplace(q, k, pos_ids, *scalars) -> None:
    # the coarse key: what picks the kernel and its launch scalars (grid, reciprocals); the
    # kernel checks the rest
    key = (True, q.shape, k.shape, q.dtype, pos_ids.dtype, q.get_device(), scalars)
    _host.run(_FAST, key, (q, k, pos_ids), _inplace_plan, q, k, pos_ids, *scalars)


def _run_outplace(q, k, q_rope, k_rope, pos_ids, *scalars) -> None:
    key = (False, q.shape, k.shape, q.dtype, pos_ids.dtype, q.get_device(), scalars)
    args = (q, k, q_rope, k_rope, pos_ids)
    _host.run(_FAST, key, args, _outplace_plan, q, k, q_rope, k_rope, pos_ids, *scalars)


# the parameters both ops take after their tensors (upstream's order), spelled once
_ROPE_PARAMS = (
    "Tensor pos_ids, SymInt rotary_dim, bool interleave, float rope_scale, float rope_theta"
)


@public_op(
    "flashinfer_apply_rope_pos_ids_inplace",
    schema=f"(Tensor(a0!) q, Tensor(a1!) k, {_ROPE_PARAMS}) -> ()",
)
def _apply_rope_pos_ids_inplace(q, k, pos_ids, *scalars) -> None:
    _run_inplace(q, k, pos_ids, *scalars)


@public_op(
    "flashinfer_apply_rope_pos_ids",
    schema=f"(Tensor q, Tensor k, Tensor(a2!) q_rope, Tensor(a3!) k_rope, {_ROPE_PARAMS}) -> ()",
)
def _apply_rope_pos_ids(q, k, q_rope, k_rope, pos_ids, *scalars) -> None:
    _run_outplace(q, k, q_rope, k_rope, pos_ids, *scalars)


_INPLACE = torch.ops.tirx_kernels.flashinfer_apply_rope_pos_ids_inplace.default
_OUTPLACE = torch.ops.tirx_kernels.flashinfer_apply_rope_pos_ids.default
_direct = _host.direct


def _rope_wrapper(name: str, in_place: bool, doc: str) -> Callable:
    """The public RoPE ``name`` with FlashInfer's signature and defaults: rotate q and k in
    place (``in_place``; returns None) or into new ``(q_rope, k_rope)``, which it returns."""

    def api(
        q: torch.Tensor,
        k: torch.Tensor,
        pos_ids: torch.Tensor,
        rotary_dim: int | None = None,
        interleave: bool = False,
        rope_scale: float = 1,
        rope_theta: float = 1e4,
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        # rotary_dim defaults to head_dim, as upstream
        args = (
            q.size(-1) if rotary_dim is None else rotary_dim,
            interleave,
            rope_scale,
            rope_theta,
        )
        if in_place:
            if _direct(q):
                _run_inplace(q, k, pos_ids, *args)
            else:
                _INPLACE(q, k, pos_ids, *args)
            return None
        q_rope, k_rope = torch.empty_like(q), torch.empty_like(k)
        if _direct(q):
            _run_outplace(q, k, q_rope, k_rope, pos_ids, *args)
        else:
            _OUTPLACE(q, k, q_rope, k_rope, pos_ids, *args)
        return q_rope, k_rope

    api.__name__ = api.__qualname__ = name
    api.__doc__ = doc
    api.__annotations__["return"] = "None" if in_place else "tuple[torch.Tensor, torch.Tensor]"
    return api


apply_rope_pos_ids_inplace = _rope_wrapper(
    "apply_rope_pos_ids_inplace",
    True,
    """Rotate q ``(nnz, num_q_heads, head_dim)`` and k ``(nnz, num_kv_heads, head_dim)`` in
    place by the positions ``pos_ids`` ``(nnz,)`` (FlashInfer's signature and defaults).""",
)
apply_rope_pos_ids = _rope_wrapper(
    "apply_rope_pos_ids",
    False,
    """``(q_rope, k_rope)``: q and k rotated by ``pos_ids``, q and k unchanged (FlashInfer's
    signature and defaults).""",
)
