# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Swizzled shared-memory tiles for TMA and wgmma (pure Python; no compiler import).

A K-major operand tile ``[rows, cols]`` (cols along K, contiguous in global memory) lives in
shared memory as "atoms": each row of an atom is ``span`` bytes (the swizzle width: 128, 64 or
32 B, or 16 B without swizzle); 8 rows of one atom make a ``8 * span``-byte block. A tile
wider than one atom is stored as ``cols * elem_bytes // span`` column blocks of
``rows * span`` bytes each, outermost (this is what one TMA box of width ``span`` per block
writes, and what TIRx's ``mma_shared_layout`` describes).

Swizzle: inside every ``8 * span``-byte block, the 16-byte chunk index (address bits 4..)
is XOR-ed with the row index (address bits 7..); ``Swizzle.B128`` XORs bits [4:7) with
[7:10), ``B64`` bits [4:6) with [7:9), ``B32`` bit 4 with bit 7. The hardware applies it
to the absolute shared address, so a swizzled tile must start on a ``8 * span`` boundary
(1024 B for B128), and the same mode must be given to the TMA tensor map
(``CU_TENSOR_MAP_SWIZZLE_*``, TIRx ``tile.apply(..., swizzle=mode)``) and to the wgmma
descriptor (``layout_type``, see :mod:`.wgmma`).
"""

from __future__ import annotations

import enum


class Swizzle(enum.IntEnum):
    """Shared-memory swizzle mode; the value is the TMA ``CUtensorMapSwizzle`` code."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3

    @property
    def span(self) -> int:
        """Row width of one atom in bytes (16 for NONE: one core-matrix row)."""
        return 16 << int(self)

    @property
    def atom_bytes(self) -> int:
        """Bytes of one 8-row atom; a swizzled tile base must be aligned to it."""
        return 8 * self.span

    @property
    def wgmma_layout_type(self) -> int:
        """The 2-bit ``layout_type`` field of a wgmma matrix descriptor (bits 62..63)."""
        return {0: 0, 1: 3, 2: 2, 3: 1}[int(self)]

    def atom_cols(self, elem_bytes: int) -> int:
        """Elements per atom row (64 bf16 for B128)."""
        return self.span // elem_bytes


def swizzle_bytes(offset: int, mode: Swizzle) -> int:
    """Physical byte offset of logical byte ``offset`` (relative to an atom-aligned base)."""
    mode = Swizzle(mode)
    if mode == Swizzle.NONE:
        return offset
    mask = (1 << int(mode)) - 1
    return offset ^ (((offset >> 7) & mask) << 4)


def tile_offset(row: int, col: int, *, rows: int, elem_bytes: int, mode: Swizzle) -> int:
    """Byte offset of element (row, col) of a K-major ``[rows, cols]`` tile in shared memory.

    For ``Swizzle.NONE`` the tile is stored as 8x16-byte core matrices, K-direction core
    matrices outermost: ``offset = (col // e16) * rows * 16 + row * 16 + (col % e16) * eb``
    (``e16 = 16 // elem_bytes``); the wgmma descriptor then has LBO = ``rows * 16`` and
    SBO = 128 (see :func:`.wgmma.kmajor_strides`).
    """
    mode = Swizzle(mode)
    per_row = mode.atom_cols(elem_bytes)
    block, inner = divmod(col, per_row)
    logical = block * rows * mode.span + row * mode.span + inner * elem_bytes
    return swizzle_bytes(logical, mode)


def tile_bytes(rows: int, cols: int, elem_bytes: int) -> int:
    return rows * cols * elem_bytes


def check_tile(rows: int, cols: int, elem_bytes: int, mode: Swizzle) -> None:
    """Raise ValueError unless ``[rows, cols]`` tiles whole atoms of ``mode``."""
    mode = Swizzle(mode)
    if rows % 8 or (cols * elem_bytes) % mode.span:
        raise ValueError(
            f"tile [{rows}, {cols}] x {elem_bytes} B does not tile {mode.name} atoms "
            f"(rows % 8 == 0 and row bytes % {mode.span} == 0 needed)"
        )


def smem_layout(dtype: str, mode: Swizzle, shape):
    """The TIRx layout of a ``shape = [..., rows, cols]`` tile in this module's format.

    Give it to ``T.alloc_shared``/``T.decl_tensor`` (``layout=``) for a buffer that
    ``T.cuda.tile.apply`` fills by TMA with ``swizzle=int(mode)``. Imports the compiler.
    """
    from tvm_tirx.backend.cuda.layout import mma_shared_layout

    return mma_shared_layout(dtype, int(Swizzle(mode)), list(shape))
