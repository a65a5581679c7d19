# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashAttention-3's Hopper forward: ``flash_attn_func(q, k, v, ...)`` and
``flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ...)``.

The public API is loaded on first use: the registry imports this package while listing
kernels, and listing must not import torch.
"""

from __future__ import annotations

from tirx_kernels.core.exports import lazy_exports

# public name -> the op module defining it
_PUBLIC = {"flash_attn_func": "attention", "flash_attn_varlen_func": "attention"}

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
