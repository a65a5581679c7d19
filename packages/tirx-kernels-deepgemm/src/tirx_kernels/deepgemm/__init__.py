# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of DeepGEMM's sm90 FP8 GEMMs (MIT), with DeepGEMM's Python API.

``from tirx_kernels.deepgemm import fp8_gemm_nt`` loads its op module on first use (PEP
562): the plugin registry imports this package to list kernels, and listing must not import
torch or the compiler.
"""

from __future__ import annotations

from tirx_kernels.core.exports import lazy_exports

# public name -> the op module (of this package) that defines it
_PUBLIC = {
    "fp8_gemm_nt": "fp8_gemm",
    "get_mk_alignment_for_contiguous_layout": "m_grouped",
    "get_mn_major_tma_aligned_tensor": "fp8_gemm",
    "m_grouped_fp8_gemm_nt_contiguous": "m_grouped",
    "m_grouped_fp8_gemm_nt_masked": "m_grouped",
}

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
