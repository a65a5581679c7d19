# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The eager host path of a public op: check a call once per signature, then launch.

A family's public function keys each call by :func:`signature` of its tensors (and the
scalars that pick a kernel); on a miss its checks run and return a *plan*, a small closure
that calls the compiled kernel's ``main`` (:func:`main_of`, fetched once) with the caller's
tensors. The function calls its plan directly when :func:`plain_cuda` says the torch
dispatcher may be skipped; otherwise it calls its ``torch.ops.tirx_kernels`` op, whose body
runs the same plan. Why and what it saves: packages/tirx-kernels-flashinfer/docs/overhead.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

MAX_PLANS = 4096  # a cache this full is cleared (shapes that never repeat)
_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor


def plain_cuda(t: Any) -> bool:
    """Whether an eager call on ``t`` may skip the dispatcher: a plain CUDA tensor (no
    FakeTensor, functional or other subclass; meta and CPU tensors take the op, whose fake or
    checks answer them) outside ``torch.compile``'s tracing. CUDA-graph capture records the
    direct launch as it does the op's (same stream)."""
    return type(t) is _Tensor and t.is_cuda and not _is_compiling()


def signature(t: torch.Tensor) -> tuple:
    """What a plan depends on: shape, strides, dtype, CUDA device and 16-byte phase."""
    return (t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() & 15)


def lookup(plans: dict, key: Any, resolve: Callable[..., Callable], *args: Any) -> Callable:
    """``plans[key]``, resolved by ``resolve(*args)`` (the checks, which raise) on a miss: a
    failing check caches nothing, so a bad call raises every time."""
    plan = plans.get(key)
    if plan is None:
        plan = resolve(*args)
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plans[key] = plan
    return plan


@functools.cache
def main_of(executable: Any) -> Callable:
    """The ``main`` function of a compiled TIRx executable, looked up once (calling the
    executable looks it up on every call)."""
    return executable.jit()["main"]
