# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The eager host path the family's ops share: resolve a call once, then launch directly.

A public function's arguments are checked and its kernel chosen once per call signature
(:func:`signature`: shape, strides, dtype, device and 16-byte phase of each tensor); the
result, a *plan*, is a small closure that launches the compiled kernel: through
:func:`direct_launcher` (the kernel bound to the call's shapes, launched without TVM's
CUDA-module launcher) where that applies, else through its ``main`` (a
``tvm_ffi.Function``, fetched once by :func:`main_of`), with no further checks. The wrappers
call their plan directly when :func:`direct` says the dispatcher may be skipped (plain
tensors, not under ``torch.compile``, ``TIRX_KERNELS_FLASHINFER_DIRECT`` not ``0``);
otherwise they call the ``torch.ops.tirx_kernels`` op, whose body runs the same plan.
Measurements: ``docs/overhead.md`` (package root).
"""

from __future__ import annotations

import os

import torch

from tirx_kernels.core.host import (
    MAX_PLANS,
    direct_launcher,
    kernel_checked,
    lookup,
    main_of,
    nothing,
    plain_cuda,
    run,
    signature,
)

# the core helpers, re-exported
__all__ = [
    "MAX_PLANS",
    "direct_launcher",
    "kernel_checked",
    "lookup",
    "main_of",
    "nothing",
    "run",
    "signature",
]

# TIRX_KERNELS_FLASHINFER_DIRECT=0: every call through the torch.ops op (the fallback switch)
DIRECT = os.environ.get("TIRX_KERNELS_FLASHINFER_DIRECT", "1") != "0"


def direct(t: torch.Tensor) -> bool:
    """Whether an eager wrapper may launch its plan without the torch dispatcher
    (:func:`tirx_kernels.core.host.plain_cuda`, unless the fallback switch is set)."""
    return DIRECT and plain_cuda(t)


def cuda_index(where: str, named: dict[str, torch.Tensor]) -> int:
    """The CUDA device index of every tensor of ``named``, else ValueError naming one."""
    first_name, first = next(iter(named.items()))
    index = first.get_device()
    if index < 0:
        raise ValueError(
            f"{where}: {first_name} must be a CUDA tensor, got {first.device}; "
            f"move it with {first_name}.cuda()"
        )
    for name, t in named.items():
        if t.get_device() != index:
            raise ValueError(
                f"{where}: {name} must be on {first_name}'s device cuda:{index}, got {t.device}"
            )
    return index


def check_last_dim(where: str, named: dict[str, torch.Tensor]) -> None:
    """Every tensor's last dimension is contiguous (upstream's CHECK_LAST_DIM_CONTIGUOUS)."""
    for name, t in named.items():
        if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(
                f"{where}: {name}'s last dimension must be contiguous (stride 1), got strides "
                f"{t.stride()}; pass {name}.contiguous()"
            )


def aligned(t: torch.Tensor, nbytes: int) -> bool:
    """Whether ``t`` is contiguous and its data is ``nbytes``-aligned (a kernel's layout)."""
    return t.is_contiguous() and t.data_ptr() % nbytes == 0
