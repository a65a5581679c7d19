# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""wgmma descriptor bits and register fragment layouts (tirx_kernels.core.sm90.wgmma)."""

import random

import pytest

from tirx_kernels.core.sm90 import wgmma
from tirx_kernels.core.sm90.layouts import Swizzle, tile_offset


def test_descriptor_bit_positions():
    # addr 0x400 -> 0x40 in bits 0-13; LBO 16 -> 1 in bits 16-29; SBO 1024 -> 64 in bits
    # 32-45; 128B swizzle -> layout type 1 in bits 62-63.
    d = wgmma.matrix_descriptor(0x400, 16, 1024, Swizzle.B128)
    assert d == 0x40 | (1 << 16) | (64 << 32) | (1 << 62)
    assert d == 0x4000_0040_0001_0040
    assert wgmma.matrix_descriptor(0, 0, 0, Swizzle.B64) == 2 << 62
    assert wgmma.matrix_descriptor(0, 0, 0, Swizzle.B32) == 3 << 62
    assert wgmma.matrix_descriptor(0, 0, 0, Swizzle.NONE) == 0
    assert wgmma.matrix_descriptor(0, 0, 0, Swizzle.NONE, base_offset=5) == 5 << 49
    # the largest 18-bit byte values fill exactly the 14-bit fields
    full = wgmma.matrix_descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, Swizzle.NONE)
    assert full == 0x3FFF | (0x3FFF << 16) | (0x3FFF << 32)


def test_descriptor_roundtrip():
    rng = random.Random(0)
    for _ in range(500):
        fields = {
            "addr": rng.randrange(0, 1 << 14) * 16,
            "lbo": rng.randrange(0, 1 << 14) * 16,
            "sbo": rng.randrange(0, 1 << 14) * 16,
            "base_offset": rng.randrange(8),
            "mode": rng.choice(list(Swizzle)),
        }
        assert wgmma.decode_descriptor(wgmma.matrix_descriptor(**fields)) == fields


@pytest.mark.parametrize("bad", [dict(addr=8), dict(lbo=1 << 18), dict(sbo=24)])
def test_descriptor_rejects_bad_fields(bad):
    args = dict(addr=0, lbo=16, sbo=1024, mode=Swizzle.B128) | bad
    with pytest.raises(ValueError):
        wgmma.matrix_descriptor(**args)


def test_kmajor_strides():
    # verified on the H200 (shared/examples/tirx_probe_hopper.py): no swizzle, 64-row tile,
    # LBO = K-direction core-matrix step 1024 B, SBO = 8-row step 128 B
    assert wgmma.kmajor_strides(Swizzle.NONE, 64) == (1024, 128)
    assert wgmma.kmajor_strides(Swizzle.B128, 256) == (16, 1024)
    assert wgmma.kmajor_strides(Swizzle.B64, 64) == (16, 512)
    assert wgmma.kmajor_strides(Swizzle.B32, 64) == (16, 256)
    # the constant the GEMM ORs its addresses into
    assert wgmma.kmajor_descriptor_base(Swizzle.B128, 128) == (1 << 62) | (64 << 32) | (1 << 16)


@pytest.mark.parametrize("mode", list(Swizzle))
def test_kstep_offsets_walk_the_tile(mode):
    """Each k16 slice starts where the tile format puts element (0, 16 k); SBO steps 8 rows."""
    rows = 64
    lbo, sbo = wgmma.kmajor_strides(mode, rows)
    for k in range(4):
        off = wgmma.kstep_offset(k, rows=rows, elem_bytes=2, mode=mode)
        assert off == tile_offset(0, 16 * k, rows=rows, elem_bytes=2, mode=mode)
        # row 8 of the slice is SBO further on (both formats), swizzle applied to the sum
        want = tile_offset(8, 16 * k, rows=rows, elem_bytes=2, mode=mode)
        from tirx_kernels.core.sm90.layouts import swizzle_bytes

        assert swizzle_bytes(off + sbo, mode) == want
        if mode == Swizzle.NONE:  # second core matrix of the slice is LBO further along K
            assert off + lbo == tile_offset(0, 16 * k + 8, rows=rows, elem_bytes=2, mode=mode)
    assert [wgmma.kstep_offset(k, rows=128, elem_bytes=2, mode=Swizzle.B128) for k in range(4)] == [
        0,
        32,
        64,
        96,
    ]


@pytest.mark.parametrize("n", [8, 16, 64, 128, 192, 256])
def test_accumulator_fragment_covers_tile_once(n):
    cells = [wgmma.acc_coord(t, i) for t in range(128) for i in range(wgmma.acc_regs(n))]
    assert len(cells) == 64 * n
    assert set(cells) == {(r, c) for r in range(64) for c in range(n)}


def test_accumulator_fragment_pairs_and_warp_rows():
    for t in range(128):
        for i in range(0, wgmma.acc_regs(64), 2):
            (r0, c0), (r1, c1) = wgmma.acc_coord(t, i), wgmma.acc_coord(t, i + 1)
            assert r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0  # one packed 32-bit store
            assert r0 // 16 == t // 32  # warp w owns rows 16w .. 16w+15
    assert (
        wgmma.acc_coord(0, 0) == (0, 0)
        and wgmma.acc_coord(5, 2) == (9, 2)
        and wgmma.acc_coord(37, 7) == (25, 11)
    )


def test_a_fragment_covers_tile_once():
    cells = [wgmma.a_coord(t, h) for t in range(128) for h in range(8)]
    assert set(cells) == {(r, k) for r in range(64) for k in range(16)}
    assert len(cells) == 64 * 16


def test_acc_regs_validates_n():
    assert wgmma.acc_regs(256) == 128
    for bad in (0, 4, 12, 264):
        with pytest.raises(ValueError):
            wgmma.acc_regs(bad)
