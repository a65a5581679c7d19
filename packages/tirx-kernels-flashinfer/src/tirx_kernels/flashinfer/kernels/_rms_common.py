# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The contract code of the four RMSNorm kernel modules, which differ only in ``weight_bias``.

Upstream: ``include/flashinfer/norm.cuh`` (``RMSNormKernel`` and ``FusedAddRMSNormKernel``,
whose ``weight_bias`` is 0 or 1) and ``flashinfer/norm/__init__.py`` (the four functions).

Each module is one :class:`Variant` (its ``KERNEL_META``, ``upstream``: the name of its
public function ``norm.<upstream>`` and of the FlashInfer function of the same semantics,
``flashinfer.norm.<upstream>``, the reference the tests and benchmarks compare against when
FlashInfer is installed, and its ``weight_bias``) and takes its contract
members, made by :func:`members` here: they dispatch to the ``rmsnorm_*`` functions
(``rmsnorm``, ``gemma_rmsnorm``) or the ``fused_add_*`` ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tirx_kernels.core import testing

from .. import norm

EPS = norm.EPS


def _flashinfer(upstream: str):
    import flashinfer

    return getattr(flashinfer.norm, upstream)


def _weight(dtype: str, hidden: int, weight_bias: float):
    # centred so that the applied weight (weight_bias + w) is about 1 +- 0.5
    return testing.randn((hidden,), dtype, seed=hidden + 1, scale=0.5, shift=1.0 - weight_bias)


def _torch_weight(w, weight_bias: float):
    """The weight torch's rms_norm applies: (weight_bias + w), folded outside timing."""
    return w if weight_bias == 0 else (weight_bias + w.float()).to(w.dtype)


def rmsnorm_data(dtype: str, tokens: int, hidden: int, weight_bias: float, heads: int = 0) -> dict:
    """``heads``: a 3D ``(tokens, heads, hidden)`` input (QK-norm), else 2D."""
    shape = (tokens, heads, hidden) if heads else (tokens, hidden)
    return {
        "x": testing.randn(shape, dtype, seed=tokens * 7 + hidden + heads),
        "w": _weight(dtype, hidden, weight_bias),
    }


def rmsnorm_reference(x, w, eps: float, weight_bias: float):
    """fp32 torch RMSNorm (unrounded)."""
    xf = x.float()
    rms_rcp = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    return xf * rms_rcp * (weight_bias + w.float())


def rmsnorm_test(meta, wrapper, upstream: str, weight_bias: float, dtype, tokens, hidden, heads):
    """``wrapper(x, w)`` (the public function) against torch fp32 and FlashInfer."""
    testing.skip_unless_gpu(meta)
    data = rmsnorm_data(dtype, tokens, hidden, weight_bias, heads)
    out = wrapper(data["x"], data["w"])
    torch.cuda.synchronize()
    want = rmsnorm_reference(data["x"], data["w"], EPS, weight_bias)
    testing.assert_close("vs torch fp32", out, want, **testing.dtype_tols(dtype))
    if testing.available("flashinfer.norm"):
        want = _flashinfer(upstream)(data["x"], data["w"], eps=EPS)
        testing.assert_close("vs flashinfer", out, want, **testing.ulp_tols(dtype))


def rmsnorm_bench(upstream: str, weight_bias: float, dtype, tokens, hidden, **options) -> dict:
    """Our launch (the host's schedule) beside lazily built FlashInfer and torch launches."""
    data = rmsnorm_data(dtype, tokens, hidden, weight_bias)
    run = norm.launcher("rmsnorm", dtype, hidden, tokens, weight_bias)
    x, w = data["x"], data["w"]
    out = torch.empty_like(x)

    def build_flashinfer():
        op, o = _flashinfer(upstream), torch.empty_like(x)
        op(x, w, eps=EPS, out=o)  # JIT outside timing
        return lambda: op(x, w, eps=EPS, out=o)

    def build_torch():
        w1 = _torch_weight(w, weight_bias)
        return lambda: torch.nn.functional.rms_norm(x, (hidden,), w1, EPS)

    ours = lambda: run(x, w, out, EPS)  # noqa: E731
    return testing.bench(ours, {"flashinfer": build_flashinfer, "torch": build_torch}, **options)


def fused_add_data(dtype: str, tokens: int, hidden: int, weight_bias: float) -> dict:
    return {
        "x": testing.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden),
        "residual": testing.randn((tokens, hidden), dtype, seed=tokens * 11 + hidden + 3),
        "w": _weight(dtype, hidden, weight_bias),
    }


def fused_add_reference(x, residual, w, eps: float, weight_bias: float):
    """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
    s = x.float() + residual.float()
    rms_rcp = torch.rsqrt(s.square().mean(-1, keepdim=True) + eps)
    return s.to(x.dtype), s * rms_rcp * (weight_bias + w.float())


def fused_add_test(meta, wrapper, upstream: str, weight_bias: float, dtype, tokens, hidden, heads):
    """``wrapper(x, residual, w)`` (the public function, in place) against torch and FlashInfer."""
    testing.skip_unless_gpu(meta)
    data = fused_add_data(dtype, tokens, hidden, weight_bias)
    want_res, want_out = fused_add_reference(**data, eps=EPS, weight_bias=weight_bias)
    x, res = data["x"].clone(), data["residual"].clone()
    wrapper(x, res, data["w"])
    torch.cuda.synchronize()
    # The new residual is one fp32 add rounded once: it must match bit for bit.
    testing.assert_close("residual vs torch", res, want_res, rtol=0, atol=0)
    testing.assert_close("output vs torch fp32", x, want_out, **testing.dtype_tols(dtype))
    if testing.available("flashinfer.norm"):
        fx, fres = data["x"].clone(), data["residual"].clone()
        _flashinfer(upstream)(fx, fres, data["w"], eps=EPS)
        testing.assert_close("residual vs flashinfer", res, fres, rtol=0, atol=0)
        testing.assert_close("output vs flashinfer", x, fx, **testing.ulp_tols(dtype))


def fused_add_bench(upstream: str, weight_bias: float, dtype, tokens, hidden, **options) -> dict:
    """Our in-place launch beside FlashInfer's and torch's; each owns its input state."""
    data = fused_add_data(dtype, tokens, hidden, weight_bias)
    run = norm.launcher("fused_add_rmsnorm", dtype, hidden, tokens, weight_bias)
    w = data["w"]
    x0, r0 = data["x"].clone(), data["residual"].clone()

    def build_flashinfer():
        op = _flashinfer(upstream)
        x1, r1 = data["x"].clone(), data["residual"].clone()
        op(x1, r1, w, eps=EPS)  # JIT outside timing
        return lambda: op(x1, r1, w, eps=EPS)

    def build_torch():
        x2, r2 = data["x"].clone(), data["residual"].clone()
        w1 = _torch_weight(w, weight_bias)

        def run_torch():
            r2.add_(x2)
            return torch.nn.functional.rms_norm(r2, (hidden,), w1, EPS)

        return run_torch

    ours = lambda: run(x0, r0, w, EPS)  # noqa: E731
    return testing.bench(ours, {"flashinfer": build_flashinfer, "torch": build_torch}, **options)


@dataclass(frozen=True)
class Variant:
    """What tells one of the four RMSNorm kernel modules from the others."""

    meta: dict
    upstream: str  # our public function norm.<upstream>, the reference flashinfer.norm.<upstream>
    weight_bias: float

    @property
    def wrapper(self) -> Callable[..., Any]:
        return getattr(norm, self.upstream)

    @property
    def fused_add(self) -> bool:
        return "fused_add" in self.upstream

    @property
    def op(self) -> str:  # the kernel norm.kernel_for / norm.launcher build
        return "fused_add_rmsnorm" if self.fused_add else "rmsnorm"


def members(
    module: str, meta: dict, upstream: str, weight_bias: float
) -> tuple[Callable[..., Any], ...]:
    """The kernel module ``module``'s ``get_kernel, prepare_data, reference, run_test,
    run_bench, public_calls`` for the variant ``(meta, upstream, weight_bias)``: plain
    functions named as the module's own (no bound methods of a shared object).

    Config keys: ``dtype``, ``tokens``, ``hidden`` and, for RMSNorm's 3D (QK-norm) input,
    ``heads`` (rows are then ``tokens * heads``).
    """
    v = Variant(meta, upstream, weight_bias)

    def get_kernel(dtype, hidden, tokens=None, heads=0, **_):
        """The TIRx PrimFunc the host launches for ``tokens`` (times ``heads``) rows."""
        rows = tokens * heads if tokens is not None and heads else tokens
        return norm.kernel_for(v.op, dtype, hidden, rows, weight_bias)

    def prepare_data(dtype, tokens, hidden, heads=0, **_):
        if v.fused_add:
            return fused_add_data(dtype, tokens, hidden, weight_bias)
        return rmsnorm_data(dtype, tokens, hidden, weight_bias, heads)

    def fused_add_ref(x, residual, w, eps=EPS):
        """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
        return fused_add_reference(x, residual, w, eps, weight_bias)

    def rmsnorm_ref(x, w, eps=EPS):
        """fp32 torch RMSNorm (unrounded)."""
        return rmsnorm_reference(x, w, eps, weight_bias)

    reference = fused_add_ref if v.fused_add else rmsnorm_ref
    reference.__name__ = "reference"

    def run_test(dtype, tokens, hidden, heads=0, **_):
        """Through the public function (``norm.<upstream>``), vs torch and FlashInfer."""
        test = fused_add_test if v.fused_add else rmsnorm_test
        test(meta, v.wrapper, upstream, weight_bias, dtype, tokens, hidden, heads)

    def run_bench(dtype, tokens, hidden, heads=0, mode="kernel", **options):
        """The kernel launch beside FlashInfer's, or (``mode`` eager | graph) the public op."""
        keys = ("warmup", "repeat", "timer", "rounds", "cooldown_s")
        given = {key: options[key] for key in keys if key in options}
        if mode != "kernel":
            return testing.bench_calls(_public_calls(v, tokens, dtype, hidden), mode, **given)
        bench = fused_add_bench if v.fused_add else rmsnorm_bench
        return bench(upstream, weight_bias, dtype, tokens * max(1, heads), hidden, **given)

    def public_calls(batch):
        return _public_calls(v, batch)

    funcs = (get_kernel, prepare_data, reference, run_test, run_bench, public_calls)
    for func in funcs:
        func.__module__, func.__qualname__ = module, func.__name__
    return funcs


def _public_calls(v: Variant, batch, dtype="bfloat16", hidden=4096) -> dict:
    """Our op, FlashInfer's and torch's (after the add, if fused) on ``batch`` rows."""
    data = (fused_add_data if v.fused_add else rmsnorm_data)(dtype, batch, hidden, v.weight_bias)
    x, w = data["x"], data["w"]
    if v.fused_add:
        residual = data["residual"]

        def torch_call():
            residual.add_(x)
            return torch.nn.functional.rms_norm(residual, (x.shape[-1],), w, EPS)

        args = (x, residual, w)
    else:
        torch_call = lambda: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)  # noqa: E731
        args = (x, w)
    calls = {"tirx": lambda: v.wrapper(*args), "torch": torch_call}
    if testing.available("flashinfer.norm"):
        op = _flashinfer(v.upstream)
        calls["flashinfer"] = lambda: op(*args)
    return calls
