# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Public ops: a family's user-facing functions as PyTorch custom ops.

``@public_op("flashinfer_rmsnorm", mutates_args=("out",))`` over a type-annotated function
registers ``torch.ops.tirx_kernels.flashinfer_rmsnorm`` with a fake (meta) implementation,
so the op runs eagerly, under CUDA-graph capture and under ``torch.compile(fullgraph=True)``
(Dynamo traces the op instead of the TIRx launcher it cannot see into). As FlashInfer does,
an op writes into preallocated outputs and returns nothing; a thin Python wrapper allocates
``out`` and returns it. Importing this module imports torch.

The op is defined on a ``torch.library.Library`` with its implementation registered for the
CUDA and CPU dispatch keys directly (as vLLM's ``direct_register_custom_op``): an eager call
then costs a few µs of dispatch instead of the ~25 µs of ``torch.library.custom_op``'s
Python dispatch (measured on the CPU box: docs/overhead.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

NAMESPACE = "tirx_kernels"
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: it owns the ops


def _no_outputs(*args: Any, **kwargs: Any) -> None:
    """The fake of an op that only mutates its arguments."""


def public_op(
    name: str,
    *,
    mutates_args: Sequence[str] = (),
    fake: Callable[..., Any] | None = None,
    schema: str | None = None,
) -> Callable[[Callable[..., Any]], Any]:
    """Declare the decorated function as ``torch.ops.tirx_kernels.<name>``.

    ``mutates_args`` names every tensor argument the op writes (outputs and in-place
    inputs); ``fake`` computes the outputs' metadata for ops that return tensors (the
    default suits ops that return None). ``schema`` (``"(Tensor(a!) out, float eps) -> ()"``)
    replaces the one inferred from the annotations and ``mutates_args``: for ops that share
    a parameter list. Returns the op, callable like the function (the
    ``torch.ops.tirx_kernels.<name>`` packet).
    """
    if not name.isidentifier():
        raise ValueError(f"public op name {name!r} must be a Python identifier")

    def declare(func: Callable[..., Any]) -> Any:
        signature = schema or torch.library.infer_schema(func, mutates_args=tuple(mutates_args))
        _LIBRARY.define(name + signature)
        for key in ("CUDA", "CPU"):
            _LIBRARY.impl(name, func, key)
        torch.library.register_fake(
            f"{NAMESPACE}::{name}", fake if fake is not None else _no_outputs, lib=_LIBRARY
        )
        return getattr(getattr(torch.ops, NAMESPACE), name)

    return declare


def is_registered(name: str) -> bool:
    """Whether ``torch.ops.tirx_kernels.<name>`` exists in this process."""
    try:
        getattr(getattr(torch.ops, NAMESPACE), name)
    except (AttributeError, RuntimeError):
        return False
    return True
