# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Native TIRx kernels (Apache-2.0).

Public ops: ``rmsnorm`` (re-exported here from ``tirx_kernels.basic.norm``) and
``tirx_kernels.basic.gemm.gemm``. ``gemm`` is not re-exported: the name is its module's, and
importing that module would replace a re-exported function on this package.
"""

from __future__ import annotations

import importlib

# re-exported on first use (PEP 562): the registry imports this package to list kernels,
# and listing must not import torch or the compiler
_LAZY = {"rmsnorm": "norm"}
__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
