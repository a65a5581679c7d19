# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashAttention-3's Hopper forward: ``flash_attn_func(q, k, v, ...)``.

The public API is loaded on first use: the registry imports this package while listing
kernels, and listing must not import torch.
"""

_PUBLIC = {"flash_attn_func": "attention"}  # public name -> the op module defining it


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
