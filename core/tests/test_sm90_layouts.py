# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Swizzle address math of tirx_kernels.core.sm90.layouts vs independent models."""

import pytest

from tirx_kernels.core.sm90.layouts import Swizzle, check_tile, swizzle_bytes, tile_offset

MODES = list(Swizzle)


def reference_offset(row, col, rows, eb, mode):
    """Row-based statement of the swizzles (CUTLASS Swizzle<B, 4, 3> on 16-byte chunks).

    A K-major tile is stored as column blocks of ``span`` bytes per row; inside a block,
    row ``row`` starts at ``row * span`` and its 16-byte chunk ``c`` moves to chunk
    ``c ^ f(row)`` with f = row % 8 (128B), (row // 2) % 4 (64B), (row // 4) % 2 (32B).
    """
    span = {Swizzle.NONE: 16, Swizzle.B32: 32, Swizzle.B64: 64, Swizzle.B128: 128}[mode]
    per = span // eb
    block, inner = divmod(col, per)
    chunk, byte = divmod(inner * eb, 16)
    f = {
        Swizzle.NONE: 0,
        Swizzle.B32: (row // 4) % 2,
        Swizzle.B64: (row // 2) % 4,
        Swizzle.B128: row % 8,
    }[mode]
    return block * rows * span + row * span + (chunk ^ f) * 16 + byte


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows, cols", [(64, 64), (128, 128), (8, 256), (256, 64)])
def test_tile_offset_matches_row_model(mode, rows, cols):
    seen = set()
    for r in range(rows):
        for c in range(cols):
            off = tile_offset(r, c, rows=rows, elem_bytes=2, mode=mode)
            assert off == reference_offset(r, c, rows, 2, mode), (mode, r, c)
            seen.add(off)
    # a bijection onto the compact tile of 2-byte elements
    assert seen == set(range(0, rows * cols * 2, 2))


@pytest.mark.parametrize("mode", MODES)
def test_swizzle_is_an_involution_within_atoms(mode):
    atom = mode.atom_bytes
    for off in range(0, 4 * atom, 16):
        phys = swizzle_bytes(off, mode)
        assert phys // atom == off // atom  # stays in its atom
        assert swizzle_bytes(phys, mode) == off
        assert swizzle_bytes(off + 7, mode) == phys + 7  # 16-byte chunks move whole


def test_mode_constants():
    assert [m.span for m in MODES] == [16, 32, 64, 128]
    assert Swizzle.B128.atom_bytes == 1024
    # PTX wgmma descriptor layout_type: 1 = 128B, 2 = 64B, 3 = 32B, 0 = none
    assert [m.wgmma_layout_type for m in MODES] == [0, 3, 2, 1]
    # CUtensorMapSwizzle: NONE=0, 32B=1, 64B=2, 128B=3
    assert [int(m) for m in MODES] == [0, 1, 2, 3]
    assert Swizzle.B128.atom_cols(2) == 64


def test_check_tile():
    check_tile(128, 64, 2, Swizzle.B128)
    with pytest.raises(ValueError):
        check_tile(128, 32, 2, Swizzle.B128)
    with pytest.raises(ValueError):
        check_tile(12, 64, 2, Swizzle.B128)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(64, 64), (128, 128), (3, 64, 64)])
def test_tirx_layout_agrees(mode, shape):
    """The TIRx layout (what TMA lowering checks the smem view against) is our format."""
    from tirx_kernels.core.sm90.layouts import smem_layout

    layout = smem_layout("bfloat16", mode, shape)
    rows, cols = shape[-2:]
    lead = shape[0] if len(shape) == 3 else 1
    for s in range(lead):
        for r in range(0, rows, 3):
            for c in range(0, cols, 5):
                coord = (s, r, c) if len(shape) == 3 else (r, c)
                got = int(layout.apply(*coord, shape=list(shape))["m"]) * 2
                want = s * rows * cols * 2 + tile_offset(r, c, rows=rows, elem_bytes=2, mode=mode)
                assert got == want, (mode, coord)
