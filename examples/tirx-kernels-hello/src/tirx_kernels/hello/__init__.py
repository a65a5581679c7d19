# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Example family: ``tirx_kernels.hello.add(a, b)``, a TIRx elementwise add as a torch op.

The public API is loaded on first use: the registry imports this package while listing
kernels, and listing must not import torch.
"""

_PUBLIC = {"add": "elementwise"}  # public name -> the op module defining it (never the same name)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
