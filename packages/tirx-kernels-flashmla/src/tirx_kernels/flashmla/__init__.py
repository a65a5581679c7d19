# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashMLA kernels (MIT upstream), with FlashMLA's dense-decode Python API.

``from tirx_kernels.flashmla import flash_mla_with_kvcache, get_mla_metadata`` loads the op
module on first use (PEP 562): the plugin registry imports this package to list kernels,
and listing must not import torch or the compiler.
"""

from __future__ import annotations

from tirx_kernels.core.exports import lazy_exports

# public name -> the op module (of this package) that defines it
_PUBLIC = {
    "flash_mla_with_kvcache": "decode",
    "get_mla_metadata": "decode",
}

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
