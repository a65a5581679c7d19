# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The host side of the FlashInfer norm ports: config matrices, launchers, test helpers.

Upstream: ``include/flashinfer/norm.cuh`` and ``flashinfer/norm/__init__.py``. The dispatch
domain and schedules live in ``_norm_schedule.py``, the TIRx kernels in ``_norm_tirx.py``;
their names are re-exported here for the kernel modules, tests and scripts.
"""

from __future__ import annotations

import functools

import torch

from ._norm_schedule import (  # noqa: F401 - re-exported
    CTAS_PER_SM,
    KEEP_GAMMA_BETA_OFF,
    LEAN_MIN_HIDDEN,
    LEAN_MIN_REGISTERS,
    LEAN_THREADS_PER_SM,
    MANY_ROWS,
    MAX_HIDDEN,
    REGISTERS_PER_SM,
    RMS_LEAN_MIN_HIDDEN,
    RMS_LEAN_THREADS_PER_SM,
    ROWS_PER_CTA,
    SMALL_BATCH,
    THREADS_PER_SM,
    VEC,
    WARP_ROW,
    WARP_ROWS,
    check_domain,
    lean_ctas_per_sm,
    plan,
    schedule,
)
from ._norm_tirx import (  # noqa: F401 - re-exported
    make,
    make_fused_add_rmsnorm,
    make_layernorm,
    make_rmsnorm,
)

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
TORCH_TO_NAME = {v: k for k, v in DTYPES.items()}

# Correctness and bench matrices of rmsnorm, gemma_rmsnorm and both fused_add variants
# (dtype, tokens, hidden): LLM hidden sizes incl. 5120/11008, odd token counts, batch 1.
_TEST_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 7, 2048),
    ("bfloat16", 16, 16384),
    ("bfloat16", 127, 5120),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 8192),
    ("float16", 33, 4096),
    ("float16", 2047, 11008),
    ("bfloat16", 1025, 16384),  # fused add: late weight at 1024 threads
    ("float16", 8195, 1000),  # tail lanes in every row, late weight at 128 threads, R = 2
    ("bfloat16", 8193, 2048),  # RMSNorm: a row per warp, the last CTA's second warp idle
]
_BENCH_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 16, 4096),
    ("bfloat16", 1, 16384),
    ("bfloat16", 16, 8192),
    ("bfloat16", 1024, 4096),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 2048),
    ("bfloat16", 16384, 4096),
    ("bfloat16", 16384, 8192),
    ("bfloat16", 16384, 16384),
    ("float16", 16384, 5120),
]
_ABBR = {"bfloat16": "bf16", "float16": "fp16"}
NORM_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _TEST_SHAPES
]
NORM_BENCH_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _BENCH_SHAPES
]


@functools.cache
def _compiled(kind: str, dtype: str, hidden: int, weight_bias: float, sched: tuple):
    from tirx_kernels.core import toolchain

    func = make(kind, dtype, hidden, weight_bias, **dict(sched))
    return toolchain.compile(func, toolchain.gpu_arch() or "sm_90a")


def kernel_for(kind: str, dtype: str, hidden: int, tokens=None, weight_bias: float = 0.0):
    """The PrimFunc the host dispatches for ``tokens`` rows (get_kernel of the modules)."""
    return make(kind, dtype, hidden, weight_bias, **schedule(kind, hidden, tokens))


def launcher(
    kind: str,
    dtype: str,
    hidden: int,
    tokens: int,
    weight_bias: float = 0.0,
    sched: dict | None = None,
):
    """``f(*tensors, eps)`` launching the kernel for ``tokens >= 1`` rows.

    ``sched``: make_* keywords (default: the host's :func:`schedule`).
    """
    sched = schedule(kind, hidden, tokens) if sched is None else sched
    return _compiled(kind, dtype, hidden, float(weight_bias), tuple(sorted(sched.items())))


def check_tensors(*tensors, hidden: int) -> None:
    """Raise ValueError for tensors the kernels cannot take (shape, device, contiguity)."""
    for t in tensors:
        if not t.is_cuda:
            raise ValueError("tensors must be on a CUDA device")
        if t.shape[-1] != hidden or not t.is_contiguous():
            raise ValueError(
                f"expected contiguous tensors with last dim {hidden}, got shape "
                f"{tuple(t.shape)} strides {t.stride()}"
            )
        if t.data_ptr() % 16:
            raise ValueError("tensors must be 16-byte aligned")


def rmsnorm(x, w, eps=1e-6, out=None, *, weight_bias=0.0):
    """FlashInfer ``rmsnorm`` (weight_bias 0) / ``gemma_rmsnorm`` (weight_bias 1) on 2D x."""
    if x.dim() != 2 or w.dim() != 1 or w.dtype != x.dtype:
        raise ValueError(
            "expected x of shape (tokens, hidden) and w of shape (hidden,), same dtype"
        )
    tokens, hidden = x.shape
    dtype = TORCH_TO_NAME.get(x.dtype)
    check_domain(dtype, hidden, tokens)
    out = torch.empty_like(x) if out is None else out
    check_tensors(x, w, out, hidden=hidden)
    if tokens:
        run = launcher("rmsnorm", dtype, hidden, tokens, float(weight_bias))
        run(x, w, out, eps)
    return out


def fused_add_rmsnorm(x, residual, w, eps=1e-6, *, weight_bias=0.0):
    """FlashInfer ``fused_add_rmsnorm`` / ``gemma_fused_add_rmsnorm``: updates x and residual."""
    if x.dim() != 2 or residual.shape != x.shape or w.dim() != 1:
        raise ValueError("expected x, residual of shape (tokens, hidden) and w of shape (hidden,)")
    if residual.dtype != x.dtype or w.dtype != x.dtype:
        raise ValueError("x, residual and w must share one dtype")
    tokens, hidden = x.shape
    dtype = TORCH_TO_NAME.get(x.dtype)
    check_domain(dtype, hidden, tokens)
    check_tensors(x, residual, w, hidden=hidden)
    if tokens:
        kind = "fused_add_rmsnorm"
        run = launcher(kind, dtype, hidden, tokens, float(weight_bias))
        run(x, residual, w, eps)


def layernorm(x, gamma, beta, eps=1e-6, out=None):
    """FlashInfer ``layernorm``: bf16 x, fp32 gamma and beta."""
    if x.dim() != 2 or gamma.dim() != 1 or beta.dim() != 1:
        raise ValueError("expected x of shape (tokens, hidden), gamma and beta of shape (hidden,)")
    if gamma.dtype != torch.float32 or beta.dtype != torch.float32:
        raise ValueError("gamma and beta must be float32 (FlashInfer's layernorm contract)")
    tokens, hidden = x.shape
    check_domain(TORCH_TO_NAME.get(x.dtype), hidden, tokens, bf16_only=True)
    out = torch.empty_like(x) if out is None else out
    check_tensors(x, gamma, beta, out, hidden=hidden)
    if tokens:
        run = launcher("layernorm", "bfloat16", hidden, tokens)
        run(x, gamma, beta, out, eps)
    return out


def flashinfer_available() -> bool:
    try:
        import flashinfer.norm  # noqa: F401
    except Exception:
        return False
    return True


def dtype_tols(dtype: str) -> dict:
    """assert_close tolerances of a 16-bit output against an fp32 reference (a few ulps)."""
    return {"bfloat16": {"rtol": 1.6e-2, "atol": 1.6e-2}, "float16": {"rtol": 2e-3, "atol": 2e-3}}[
        dtype
    ]


def ulp_tols(dtype: str) -> dict:
    """assert_close tolerances between two implementations of the same arithmetic (~1 ulp)."""
    return {"bfloat16": {"rtol": 8e-3, "atol": 1e-5}, "float16": {"rtol": 1e-3, "atol": 1e-6}}[
        dtype
    ]


def assert_close(name: str, got, want, tols: dict) -> None:
    """torch.testing.assert_close with the worst element named in the message."""
    try:
        torch.testing.assert_close(got.float(), want.float(), **tols)
    except AssertionError as e:
        diff = (got.float() - want.float()).abs()
        idx = divmod(int(diff.argmax()), diff.shape[-1])
        raise AssertionError(
            f"{name}: max abs error {diff.max().item():.4g} at (row, col) {idx}: "
            f"got {got.flatten()[diff.argmax()].item()} want {want.flatten()[diff.argmax()].item()}"
            f"\n{e}"
        ) from None


def skip_unless_gpu(meta: dict) -> None:
    """unittest.SkipTest unless the visible GPU is one of the kernel's archs."""
    import unittest

    from tirx_kernels.core import toolchain

    arch = toolchain.gpu_arch()
    if arch not in meta["archs"]:
        raise unittest.SkipTest(f"needs a GPU of arch {meta['archs']}, found {arch}")


def randn(shape, dtype: str, seed: int, scale: float = 1.0, shift: float = 0.0):
    """Deterministic normal data (generated on the CPU, then moved to the GPU)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32) * scale + shift
    return t.to(DTYPES.get(dtype, torch.float32)).cuda()
