# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Hopper (sm_90a) building blocks for TIRx kernels: TMA + mbarrier rings + wgmma.

Pure-Python models (importing this package imports neither torch nor the compiler):

* :mod:`.layouts`   -- ``Swizzle`` modes, the swizzled K-major tile format shared by TMA and
  wgmma, ``swizzle_bytes``/``tile_offset`` address math, ``smem_layout`` (TIRx layout).
* :mod:`.wgmma`     -- matrix descriptor encode/decode, K-major LBO/SBO, k-step offsets,
  register fragments (``acc_coord`` for the f32 accumulator, ``a_coord`` for A in registers).
* :mod:`.pipeline`  -- the full/empty mbarrier ring protocol (stage/phase) and its model.
* :mod:`.scheduler` -- persistent grid and grouped tile rasterization.

TIRx emitters of the same blocks (imports the compiler): :mod:`.dsl` -- ``smem_view``,
``tma_load_tile``, ``descriptor``, ``mma_ss``, ``wgmma_fence/commit/wait``,
``fence_registers``, ``store_acc``, ``Ring`` (mbarrier ring), ``grouped_tile``.
``tirx_kernels.basic._gemm_tirx`` composes them. :mod:`.timeline` -- begin/end marks of a
profiling build of a kernel on the GPU's clock, and their reading back into spans.
"""

from .layouts import Swizzle, smem_layout, swizzle_bytes, tile_offset
from .scheduler import cta_tiles, grouped_tile, persistent_grid
from .wgmma import (
    a_coord,
    acc_coord,
    acc_regs,
    decode_descriptor,
    kmajor_descriptor_base,
    kmajor_strides,
    kstep_offset,
    matrix_descriptor,
)

__all__ = [
    "Swizzle",
    "a_coord",
    "acc_coord",
    "acc_regs",
    "cta_tiles",
    "decode_descriptor",
    "grouped_tile",
    "kmajor_descriptor_base",
    "kmajor_strides",
    "kstep_offset",
    "matrix_descriptor",
    "persistent_grid",
    "smem_layout",
    "swizzle_bytes",
    "tile_offset",
]
