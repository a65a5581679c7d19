# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The eager host path of a public op: check a call once per signature, then launch.

A family's public function keys each call by :func:`signature` of its tensors (and the
scalars that pick a kernel); on a miss its checks run and return a *plan*, a small closure
that calls the compiled kernel's ``main`` (:func:`main_of`, fetched once) with the caller's
tensors. The function calls its plan directly when :func:`plain_cuda` says the torch
dispatcher may be skipped; otherwise it calls its ``torch.ops.tirx_kernels`` op, whose body
runs the same plan. Why and what it saves: packages/tirx-kernels-flashinfer/docs/overhead.md.

A plan that hands the caller's tensors unchanged to one kernel (:func:`kernel_checked`) is
also kept under a coarser key, the shape and scalars that pick the kernel and its launch
scalars, which :func:`run` tries first: the generated host function checks every tensor
(dtype, shape, strides, alignment, device) before it launches, so the per-signature key need
not be built on every call; when the kernel refuses the tensors, the full lookup runs.
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


def plain_call(first: Any, *others: Any) -> bool:
    """Whether an eager call on these tensors may skip the dispatcher: ``first`` is a plain
    CUDA tensor (:func:`plain_cuda`) and the others are plain tensors."""
    return plain_cuda(first) and all(type(t) is _Tensor for t in others)


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


def nothing(*args: Any) -> None:
    """The plan of a call with nothing to do (an empty output)."""


@functools.cache
def main_of(executable: Any) -> Callable:
    """The ``main`` function of a compiled TIRx executable, looked up once (calling the
    executable looks it up on every call)."""
    return executable.jit()["main"]


def direct_launcher(
    executable: Any, *examples: Any, constants: tuple[int, ...] = (), as_called: tuple = ()
) -> Callable | None:
    """A launcher of ``executable`` for calls shaped as ``examples`` (its host function's
    arguments; the scalars at ``constants`` baked in and no longer passed; tensors taken as
    ``as_called`` shapes them, unviewed) that skips TVM's CUDA-module launcher and checks as
    the host function does (:func:`tirx_kernels.core.direct_launch.bound`), or ``None``
    where that does not apply: callers then keep ``main_of(executable)``."""
    from . import direct_launch

    return direct_launch.bound(executable, *examples, constants=constants, as_called=as_called)


def bound_on_first_call(executable: Any) -> Callable:
    """``f(*args)`` launching ``executable`` with its host function's arguments: from the first
    call on through :func:`direct_launcher` bound to that call's arguments where it applies
    (a later call that differs from them raises ValueError or TypeError before any launch, as
    the host function would), else through its ``main``. For plans, whose call signature
    fixes what the launcher checks."""
    launch = None

    def first(*args: Any) -> Any:
        nonlocal launch
        if launch is None:
            launch = direct_launcher(executable, *args) or main_of(executable)
        return launch(*args)

    return first


def kernel_checked(plan: Callable) -> Callable:
    """Mark ``plan`` as one launch of a kernel on the caller's tensors as they are, which that
    kernel's host function checks in full: :func:`run` may reuse it on a coarser key."""
    plan.kernel_checked = True  # type: ignore[attr-defined]
    return plan


def run(fast: dict, key: Any, args: tuple, plan_of: Callable[..., Callable], *plan_args: Any):
    """Run a call: ``fast[key](*args)`` when an earlier call with this coarse ``key`` left a
    :func:`kernel_checked` plan there; when its kernel refuses ``args`` (ValueError or
    TypeError from the host function, raised before any launch) or on a miss, the plan of
    ``plan_of(*plan_args)`` (the per-signature lookup and checks, which name a bad argument),
    kept under ``key`` when it is kernel-checked."""
    plan = fast.get(key)
    if plan is not None:
        try:
            return plan(*args)
        except (ValueError, TypeError):
            pass  # the full checks say why, or find the plan these tensors need
    plan = plan_of(*plan_args)
    if getattr(plan, "kernel_checked", False):
        if len(fast) >= MAX_PLANS:
            fast.clear()
        fast[key] = plan
    return plan(*args)
