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
programmatic dependent launch (no ``griddepcontrol``), so every launch is an ordinary one
(upstream's ``enable_pdl=False``): the next kernel on the stream starts after ours ends.

Domain (else ValueError naming the argument): ``input`` 2D ``(tokens, hidden)`` or, for
``rmsnorm``/``gemma_rmsnorm`` as upstream, 3D ``(batch, heads, head_dim)`` (QK-norm: every
head a row), bfloat16 or float16 (LayerNorm: bfloat16, with float32 ``gemma``/``beta``, as
upstream); weights 1D ``(hidden,)``, contiguous; every tensor on ``input``'s CUDA device with
a contiguous last dimension (upstream's CHECK_LAST_DIM_CONTIGUOUS); ``hidden`` any size in
``_norm_schedule``'s domain (vectors of ``gcd(8, hidden)`` elements, as upstream). Rows with
a stride (a slice of a wider tensor, a head slice of qkv) or a view not aligned to the
vector width run on contiguous copies (copied back into ``out``, or into ``input`` and
``residual`` for the in-place ops): correct, at the cost of the copies. Zero rows launch
nothing.

The host path (``_host``): a call is checked and its kernel chosen once per signature
(shapes, strides, dtypes, devices, 16-byte phases), and the plan cached; eager calls of the
wrappers then run the plan directly, skipping the torch dispatcher (``torch.compile`` and
non-plain tensors go through the op, whose body runs the same plan). Kernels compile once
per (kind, dtype, hidden, ``_norm_schedule.batch_class(tokens)``, weight bias).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from tirx_kernels.core.ops import public_op

from . import _host
from ._norm_schedule import DTYPE_NAMES, VEC, batch_class, check_domain, schedule, vec_width
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


def _dtype_name(where: str, t: torch.Tensor, allowed=DTYPE_NAMES) -> str:
    dtype = _DTYPE_NAME.get(t.dtype)
    if dtype not in allowed:
        want = " or ".join(f"torch.{a}" for a in allowed)
        raise ValueError(f"{where}: input has dtype {t.dtype}; expected {want} (cast with .to())")
    return dtype


def _check_rows(where: str, input: torch.Tensor, dims: tuple[int, ...]) -> tuple[int, int]:
    """(rows, hidden) of ``input`` when its rank is one of ``dims``."""
    if input.dim() not in dims:
        shapes = " or ".join(
            {2: "2D (tokens, hidden)", 3: "3D (batch, heads, head_dim)"}[d] for d in dims
        )
        raise ValueError(f"{where}: input must be {shapes}, got shape {tuple(input.shape)}")
    hidden = input.shape[-1]
    return (input.numel() // hidden if hidden else 0), hidden


def _check_like(where: str, name: str, t: torch.Tensor, input: torch.Tensor) -> None:
    if t.shape != input.shape or t.dtype != input.dtype:
        raise ValueError(
            f"{where}: {name} must have input's shape {tuple(input.shape)} and dtype "
            f"{input.dtype}, got {tuple(t.shape)} {t.dtype}"
        )


def _check_vector(where: str, name: str, t: torch.Tensor, hidden: int, dtype, align: int):
    if t.dim() != 1 or t.shape[0] != hidden or t.dtype != dtype:
        raise ValueError(
            f"{where}: {name} must be 1D of shape ({hidden},) (input's hidden size) and dtype "
            f"{dtype}, got {tuple(t.shape)} {t.dtype}"
        )
    if not _host.aligned(t, align):
        raise ValueError(
            f"{where}: {name} must be contiguous and {align}-byte aligned; pass {name}.clone()"
        )


def _rows_view(t: torch.Tensor, rows: int, hidden: int, ok: bool) -> torch.Tensor:
    """``t`` as contiguous aligned ``(rows, hidden)``: a view when ``ok``, else a fresh copy."""
    return t.view(rows, hidden) if ok else t.reshape(rows, hidden).clone()


INDEX_LIMIT = 2**31  # the kernels index in int32: larger inputs run in chunks of rows


def _chunked(where: str, hidden: int, plan_of: Callable, a, b) -> Callable:
    """The plan of a call whose two row tensors ``a``, ``b`` (the plans' first two
    arguments) hold ``INDEX_LIMIT`` elements or more: the plans of row chunks below it."""
    if not all(t.dim() == 2 or t.is_contiguous() for t in (a, b)):
        raise ValueError(f"{where}: a 3D input of 2**31 elements or more must be contiguous")
    step = (INDEX_LIMIT - 1) // hidden

    def run(a, b, *rest):
        a2, b2 = a.view(-1, hidden), b.view(-1, hidden)
        for r0 in range(0, a2.shape[0], step):
            ca, cb = a2[r0 : r0 + step], b2[r0 : r0 + step]
            plan_of(ca, cb, *rest[:-1])(ca, cb, *rest)

    return run


def _check_rms(where: str, input, weight, dims: tuple[int, ...], **like) -> tuple:
    """(dtype, rows, hidden, alignment in bytes) of a valid RMSNorm call whose other row
    tensor (``out`` or ``residual``) is ``like``; else ValueError naming the argument."""
    dtype = _dtype_name(where, input)
    rows, hidden = _check_rows(where, input, dims)
    align = 2 * vec_width(hidden) if hidden else 16
    ((like_name, other),) = like.items()
    _check_like(where, like_name, other, input)
    check_domain(dtype, hidden)
    named = {"input": input, like_name: other, "weight": weight}
    _host.check_last_dim(where, named)
    _check_vector(where, "weight", weight, hidden, input.dtype, align)
    _host.cuda_index(where, named)
    return dtype, rows, hidden, align


def _resolve_rmsnorm(weight_bias: float, out, input, weight) -> Callable:
    """Check an rmsnorm/gemma_rmsnorm call; its plan ``f(out, input, weight, eps)``."""
    where = "gemma_rmsnorm" if weight_bias else "rmsnorm"
    dtype, rows, hidden, align = _check_rms(where, input, weight, (2, 3), out=out)
    if not rows:
        return _host.nothing
    if rows * hidden >= INDEX_LIMIT:
        return _chunked(where, hidden, lambda *t: _rmsnorm_plan(weight_bias, *t), out, input)
    kernel = _host_kernel("rmsnorm", dtype, hidden, batch_class(rows), weight_bias)
    fn = _host.main_of(kernel)
    in_ok, out_ok = _host.aligned(input, align), _host.aligned(out, align)
    if in_ok and out_ok and input.dim() == 2:
        launch = _host.direct_launcher(kernel, input, weight, out, EPS) or fn
        return _host.kernel_checked(lambda out, input, weight, eps: launch(input, weight, out, eps))
    if in_ok and out_ok:  # 3D (QK-norm): heads are rows
        return lambda out, input, weight, eps: fn(
            input.view(rows, hidden), weight, out.view(rows, hidden), eps
        )

    def strided(out, input, weight, eps):  # rows with a stride: through contiguous copies
        x = _rows_view(input, rows, hidden, in_ok)
        y = out.view(rows, hidden) if out_ok else torch.empty_like(x)
        fn(x, weight, y, eps)
        if not out_ok:
            out.copy_(y.view(out.shape))

    return strided


def _resolve_fused_add(weight_bias: float, input, residual, weight) -> Callable:
    """Check a (gemma_)fused_add_rmsnorm call; its plan ``f(input, residual, weight, eps)``."""
    where = "gemma_fused_add_rmsnorm" if weight_bias else "fused_add_rmsnorm"
    dtype, rows, hidden, align = _check_rms(where, input, weight, (2,), residual=residual)
    if not rows:
        return _host.nothing
    if rows * hidden >= INDEX_LIMIT:
        plan_of = lambda *t: _fused_add_plan(weight_bias, *t)  # noqa: E731
        return _chunked(where, hidden, plan_of, input, residual)
    kernel = _host_kernel("fused_add_rmsnorm", dtype, hidden, batch_class(rows), weight_bias)
    fn = _host.main_of(kernel)
    if _host.aligned(input, align) and _host.aligned(residual, align):
        launch = _host.direct_launcher(kernel, input, residual, weight, EPS) or fn
        return _host.kernel_checked(
            lambda input, residual, weight, eps: launch(input, residual, weight, eps)
        )

    def strided(input, residual, weight, eps):  # in place through contiguous copies
        x, r = input.clone(), residual.clone()
        fn(x, r, weight, eps)
        input.copy_(x)
        residual.copy_(r)

    return strided


def _resolve_layernorm(out, input, gemma, beta) -> Callable:
    """Check a layernorm call; its plan ``f(out, input, gemma, beta, eps)``."""
    where = "layernorm"
    _dtype_name(where, input, ("bfloat16",))
    rows, hidden = _check_rows(where, input, (2,))
    vec = vec_width(hidden) if hidden else VEC
    _check_like(where, "out", out, input)
    check_domain("bfloat16", hidden, bf16_only=True)
    named = {"input": input, "gemma": gemma, "beta": beta, "out": out}
    _host.check_last_dim(where, named)
    for name, t in (("gemma", gemma), ("beta", beta)):
        _check_vector(where, name, t, hidden, torch.float32, 4 * min(4, vec))
    _host.cuda_index(where, named)
    if not rows:
        return _host.nothing
    if rows * hidden >= INDEX_LIMIT:
        return _chunked(where, hidden, _layernorm_plan, out, input)
    kernel = _host_kernel("layernorm", "bfloat16", hidden, batch_class(rows), 0.0)
    fn = _host.main_of(kernel)
    in_ok, out_ok = _host.aligned(input, 2 * vec), _host.aligned(out, 2 * vec)
    if in_ok and out_ok:
        launch = _host.direct_launcher(kernel, input, gemma, beta, out, EPS) or fn
        return _host.kernel_checked(
            lambda out, input, gemma, beta, eps: launch(input, gemma, beta, out, eps)
        )

    def strided(out, input, gemma, beta, eps):
        x = _rows_view(input, rows, hidden, in_ok)
        y = out if out_ok else torch.empty_like(x)
        fn(x, gemma, beta, y, eps)
        if not out_ok:
            out.copy_(y)

    return strided


_PLANS: dict = {}
_FAST: dict = {}  # kernel-checked plans by (op, input's shape, dtype, device): _host.run
_sig = _host.signature


def _rmsnorm_plan(weight_bias: float, out, input, weight) -> Callable:
    key = (weight_bias, _sig(out), _sig(input), _sig(weight))
    return _host.lookup(_PLANS, key, _resolve_rmsnorm, weight_bias, out, input, weight)


def _fused_add_plan(weight_bias: float, input, residual, weight) -> Callable:
    key = (weight_bias + 2, _sig(input), _sig(residual), _sig(weight))
    return _host.lookup(_PLANS, key, _resolve_fused_add, weight_bias, input, residual, weight)


def _layernorm_plan(out, input, gemma, beta) -> Callable:
    key = (None, _sig(out), _sig(input), _sig(gemma), _sig(beta))
    return _host.lookup(_PLANS, key, _resolve_layernorm, out, input, gemma, beta)


def _run_rmsnorm(weight_bias: float, out, input, weight, eps) -> None:
    key = (weight_bias, input.shape, input.dtype, input.get_device())
    args = (out, input, weight, eps)
    _host.run(_FAST, key, args, _rmsnorm_plan, weight_bias, out, input, weight)


def _run_fused_add(weight_bias: float, input, residual, weight, eps) -> None:
    key = (weight_bias + 2, input.shape, input.dtype, input.get_device())
    args = (input, residual, weight, eps)
    _host.run(_FAST, key, args, _fused_add_plan, weight_bias, input, residual, weight)


def _run_layernorm(out, input, gemma, beta, eps) -> None:
    key = (None, input.shape, input.dtype, input.get_device())
    _host.run(_FAST, key, (out, input, gemma, beta, eps), _layernorm_plan, out, input, gemma, beta)


@public_op("flashinfer_rmsnorm", mutates_args=("out",))
def _rmsnorm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    _run_rmsnorm(0.0, out, input, weight, eps)


@public_op("flashinfer_gemma_rmsnorm", mutates_args=("out",))
def _gemma_rmsnorm(
    out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_rmsnorm(1.0, out, input, weight, eps)


@public_op("flashinfer_fused_add_rmsnorm", mutates_args=("input", "residual"))
def _fused_add_rmsnorm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_fused_add(0.0, input, residual, weight, eps)


@public_op("flashinfer_gemma_fused_add_rmsnorm", mutates_args=("input", "residual"))
def _gemma_fused_add_rmsnorm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    _run_fused_add(1.0, input, residual, weight, eps)


@public_op("flashinfer_layernorm", mutates_args=("out",))
def _layernorm(
    out: torch.Tensor, input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float
) -> None:
    _run_layernorm(out, input, gemma, beta, eps)


# The ops' overloads, looked up once (the wrappers run on every call).
_OPS = torch.ops.tirx_kernels
_RMSNORM = _OPS.flashinfer_rmsnorm.default
_GEMMA_RMSNORM = _OPS.flashinfer_gemma_rmsnorm.default
_FUSED_ADD_RMSNORM = _OPS.flashinfer_fused_add_rmsnorm.default
_GEMMA_FUSED_ADD_RMSNORM = _OPS.flashinfer_gemma_fused_add_rmsnorm.default
_LAYERNORM = _OPS.flashinfer_layernorm.default
_direct = _host.direct


def _named(api: Callable, name: str, doc: str) -> Callable:
    """``api`` under its public ``name`` and docstring."""
    api.__name__ = api.__qualname__ = name
    api.__doc__ = doc
    return api


def _rmsnorm_wrapper(name: str, weight_bias: float, op, doc: str) -> Callable:
    """The public (Gemma) RMSNorm ``name`` with FlashInfer's signature: allocate ``out`` when
    not given, run the plan (or the op), return ``out``."""

    def api(
        input: torch.Tensor,
        weight: torch.Tensor,
        eps: float = 1e-6,
        out: torch.Tensor | None = None,
        enable_pdl: bool | None = None,
    ) -> torch.Tensor:
        if out is None:
            out = torch.empty_like(input)
        if _direct(input):
            _run_rmsnorm(weight_bias, out, input, weight, eps)
        else:
            op(out, input, weight, eps)
        return out

    return _named(api, name, doc)


def _fused_add_wrapper(name: str, weight_bias: float, op, doc: str) -> Callable:
    """The public (Gemma) fused add RMSNorm ``name`` with FlashInfer's signature: run the plan
    (or the op) in place."""

    def api(
        input: torch.Tensor,
        residual: torch.Tensor,
        weight: torch.Tensor,
        eps: float = 1e-6,
        enable_pdl: bool | None = None,
    ) -> None:
        if _direct(input):
            _run_fused_add(weight_bias, input, residual, weight, eps)
        else:
            op(input, residual, weight, eps)

    return _named(api, name, doc)


rmsnorm = _rmsnorm_wrapper(
    "rmsnorm",
    0.0,
    _RMSNORM,
    """``out = input / RMS(input) * weight`` (``flashinfer.norm.rmsnorm``), into ``out`` when
    given, else a new tensor; returns it. ``enable_pdl`` is ignored (no PDL here).""",
)
gemma_rmsnorm = _rmsnorm_wrapper(
    "gemma_rmsnorm",
    1.0,
    _GEMMA_RMSNORM,
    """``out = input / RMS(input) * (1 + weight)`` (``flashinfer.norm.gemma_rmsnorm``); as
    :func:`rmsnorm` otherwise.""",
)
fused_add_rmsnorm = _fused_add_wrapper(
    "fused_add_rmsnorm",
    0.0,
    _FUSED_ADD_RMSNORM,
    """In place (``flashinfer.norm.fused_add_rmsnorm``): ``residual += input``, then
    ``input = residual / RMS(residual) * weight`` (from the unrounded fp32 sum). Returns None;
    ``enable_pdl`` is ignored.""",
)
gemma_fused_add_rmsnorm = _fused_add_wrapper(
    "gemma_fused_add_rmsnorm",
    1.0,
    _GEMMA_FUSED_ADD_RMSNORM,
    """:func:`fused_add_rmsnorm` with the weight applied as ``(1 + weight)``
    (``flashinfer.norm.gemma_fused_add_rmsnorm``).""",
)


def layernorm(
    input: torch.Tensor, gemma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """``(input - mean) / sqrt(var + eps) * gemma + beta`` (``flashinfer.norm.layernorm``;
    ``gemma`` is upstream's name for gamma): bfloat16 input, float32 gemma and beta; returns a
    new bfloat16 tensor."""
    out = torch.empty_like(input)
    if _direct(input):
        _run_layernorm(out, input, gemma, beta, eps)
    else:
        _LAYERNORM(out, input, gemma, beta, eps)
    return out
