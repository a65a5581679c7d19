# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashInfer kernels (Apache-2.0), with FlashInfer's Python API.

``from tirx_kernels.flashinfer import rmsnorm`` and the other names of ``_PUBLIC`` load their
op module on first use (PEP 562): the plugin registry imports this package to list kernels,
and listing must not import torch or the compiler.
"""

from __future__ import annotations

import importlib

# public name -> the op module (of this package) that defines it
_PUBLIC = {
    "rmsnorm": "norm",
    "gemma_rmsnorm": "norm",
    "fused_add_rmsnorm": "norm",
    "gemma_fused_add_rmsnorm": "norm",
    "layernorm": "norm",
    "silu_and_mul": "activation",
    "gelu_and_mul": "activation",
    "gelu_tanh_and_mul": "activation",
    "apply_rope_pos_ids": "rope",
    "apply_rope_pos_ids_inplace": "rope",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
