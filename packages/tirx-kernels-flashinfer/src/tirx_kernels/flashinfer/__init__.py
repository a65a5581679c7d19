# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashInfer kernels (Apache-2.0).

The public functions load on first use (``from tirx_kernels.flashinfer import rmsnorm``):
the registry imports this package to find the kernel modules, and that must not import
torch or the compiler.
"""

from __future__ import annotations

import importlib

# public name -> the module of the package that defines it (PEP 562 lazy attributes)
_LAZY = {
    "rmsnorm": "norm",
    "gemma_rmsnorm": "norm",
    "fused_add_rmsnorm": "norm",
    "gemma_fused_add_rmsnorm": "norm",
    "layernorm": "norm",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
