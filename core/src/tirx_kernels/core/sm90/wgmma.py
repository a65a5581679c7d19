# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""wgmma shared-memory descriptors and register fragments (pure Python; no compiler import).

Matrix descriptor (PTX ISA, "Matrix Descriptor Format" of ``wgmma.mma_async``), 64 bits:

====== ================================================================
bits   field
====== ================================================================
0-13   start address: (shared address & 0x3FFFF) >> 4
16-29  leading-dimension byte offset (LBO) >> 4
32-45  stride-dimension byte offset (SBO) >> 4
49-51  base offset (0 when the swizzled tile starts on an atom boundary)
62-63  layout type: 0 none, 1 128B swizzle, 2 64B, 3 32B (``Swizzle.wgmma_layout_type``)
====== ================================================================

For a K-major operand in the :mod:`.layouts` format:

* no swizzle (8x16 B core matrices): LBO = byte step between core matrices along K
  (``rows * 16`` in our tile format), SBO = byte step between 8-row groups (128);
* swizzled: LBO is unused by the hardware (encoded as 1, i.e. 16 B), SBO = one atom
  (``8 * span``: 1024 B for 128B swizzle).

The k-th 16-element slice of a K-major tile starts ``kstep_offset`` bytes after the tile
base; a kernel builds one descriptor per tile and adds ``offset >> 4`` to its low word.
That stays exact while the 14-bit address field does not carry (shared addresses < 256 KiB).

Register fragments of ``wgmma.mma_async.m64nNk16`` (128 threads of a warpgroup):

* accumulator D (f32; N/2 registers per thread): :func:`acc_coord`;
* A from registers (f16/bf16; 4 x 32-bit registers = 8 halves per thread): :func:`a_coord`.
"""

from __future__ import annotations

from .layouts import Swizzle, tile_offset

WARPGROUP = 128
MMA_M = 64
MMA_K_BYTES = 32  # one k16 step of a 16-bit operand
VALID_N = tuple(range(8, 257, 8))

_ADDR = 0x3FFF
_LBO_SHIFT, _SBO_SHIFT, _BASE_SHIFT, _LAYOUT_SHIFT = 16, 32, 49, 62


def matrix_descriptor(addr: int, lbo: int, sbo: int, mode: Swizzle, base_offset: int = 0) -> int:
    """Encode a wgmma shared-memory matrix descriptor (byte address and byte offsets)."""
    for name, value in (("addr", addr), ("lbo", lbo), ("sbo", sbo)):
        if value % 16 or not 0 <= value < (1 << 18):
            raise ValueError(f"descriptor {name}={value} must be a multiple of 16 below 2^18")
    if not 0 <= base_offset < 8:
        raise ValueError("descriptor base_offset must be in 0..7")
    return (
        ((addr >> 4) & _ADDR)
        | (((lbo >> 4) & _ADDR) << _LBO_SHIFT)
        | (((sbo >> 4) & _ADDR) << _SBO_SHIFT)
        | (base_offset << _BASE_SHIFT)
        | (Swizzle(mode).wgmma_layout_type << _LAYOUT_SHIFT)
    )


def decode_descriptor(desc: int) -> dict:
    """The fields of a descriptor, in bytes (inverse of :func:`matrix_descriptor`)."""
    layout = (desc >> _LAYOUT_SHIFT) & 3
    return {
        "addr": (desc & _ADDR) << 4,
        "lbo": ((desc >> _LBO_SHIFT) & _ADDR) << 4,
        "sbo": ((desc >> _SBO_SHIFT) & _ADDR) << 4,
        "base_offset": (desc >> _BASE_SHIFT) & 7,
        "mode": Swizzle({0: 0, 1: 3, 2: 2, 3: 1}[layout]),
    }


def kmajor_strides(mode: Swizzle, rows: int) -> tuple[int, int]:
    """(LBO, SBO) in bytes for a K-major ``rows``-row tile in the :mod:`.layouts` format."""
    mode = Swizzle(mode)
    if mode == Swizzle.NONE:
        return rows * 16, 128
    return 16, mode.atom_bytes


def kmajor_descriptor_base(mode: Swizzle, rows: int) -> int:
    """The descriptor of a K-major tile with a zero address: OR in ``addr >> 4`` at run time."""
    lbo, sbo = kmajor_strides(mode, rows)
    return matrix_descriptor(0, lbo, sbo, mode)


def kstep_offset(k: int, *, rows: int, elem_bytes: int, mode: Swizzle) -> int:
    """Byte offset from the tile base of the k-th 16-element K slice (k16 wgmma step)."""
    return tile_offset(
        0, k * (MMA_K_BYTES // elem_bytes), rows=rows, elem_bytes=elem_bytes, mode=mode
    )


def acc_regs(n: int) -> int:
    """f32 accumulator registers per thread for ``m64nNk16``."""
    if n not in VALID_N:
        raise ValueError(f"wgmma N={n} must be a multiple of 8 in 8..256")
    return n // 2


def acc_coord(thread: int, reg: int) -> tuple[int, int]:
    """(row, col) in the 64xN tile of accumulator register ``reg`` of warpgroup ``thread``.

    Registers come in groups of 4 per 8 columns: pairs of adjacent columns on rows
    ``r`` and ``r + 8`` (r = 16 * warp + lane // 4). A pair (2j, 2j+1) is one 32-bit
    packed store of the converted 16-bit outputs.
    """
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((reg // 2) % 2)
    col = 8 * (reg // 4) + 2 * (lane % 4) + reg % 2
    return row, col


def a_coord(thread: int, half: int) -> tuple[int, int]:
    """(row, k) in the 64x16 A tile of 16-bit element ``half`` (0..7) held by ``thread``.

    Register ``half // 2`` packs halves ``half & ~1`` (low) and ``half | 1`` (high). This is
    the accumulator pattern of an n16 tile, so a converted f32 accumulator (e.g. softmax
    probabilities) feeds the next wgmma as A without data movement.
    """
    return acc_coord(thread, half)


def mnmajor_strides(mode: Swizzle, k_rows: int) -> tuple[int, int]:
    """(LBO, SBO) in bytes for an MN-major operand stored as a K-major tile of :mod:`.layouts`
    turned on its side: a ``[k_rows, mn]`` tile (mn contiguous, e.g. V ``[kv, d]`` as the B
    operand of P @ V with ``imm-trans-b = 1``), swizzled.

    PTX ISA (MN-major, swizzled): LBO = byte step between ``span``-byte column blocks along MN
    (``k_rows * span`` in our format), SBO = byte step between 8-row groups along K (one atom).
    """
    mode = Swizzle(mode)
    if mode == Swizzle.NONE:
        raise ValueError("MN-major operands are only supported swizzled")
    return k_rows * mode.span, mode.atom_bytes


def mnmajor_descriptor_base(mode: Swizzle, k_rows: int) -> int:
    """The descriptor of an MN-major ``[k_rows, mn]`` tile with a zero address."""
    lbo, sbo = mnmajor_strides(mode, k_rows)
    return matrix_descriptor(0, lbo, sbo, mode)


def mnmajor_kstep_offset(k: int, *, mode: Swizzle) -> int:
    """Byte offset of the k-th 16-row K slice of an MN-major tile (16 rows of one atom span)."""
    return k * 16 * Swizzle(mode).span


def mnmajor_element_offset(k: int, mn: int, *, k_rows: int, elem_bytes: int, mode: Swizzle) -> int:
    """Byte offset wgmma reads element (k, mn) of an MN-major tile from, per the descriptor
    model above (the canonical layout ``((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))`` of
    16-byte units, then the swizzle). Equals :func:`.layouts.tile_offset` ``(k, mn)`` of the
    same tile loaded K-major by TMA: tests check that the two agree."""
    mode = Swizzle(mode)
    lbo, sbo = mnmajor_strides(mode, k_rows)
    per_row = mode.atom_cols(elem_bytes)
    block, inner = divmod(mn, per_row)
    group, row = divmod(k, 8)
    logical = block * lbo + group * sbo + row * mode.span + inner * elem_bytes
    from .layouts import swizzle_bytes

    return swizzle_bytes(logical, mode)
