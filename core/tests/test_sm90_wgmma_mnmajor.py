# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""MN-major wgmma operands (``imm-trans-b``): the descriptor's view of a tile TMA loaded in
the K-major tile format addresses each element where TMA put it."""

from __future__ import annotations

import pytest

from tirx_kernels.core.sm90.layouts import Swizzle, tile_offset
from tirx_kernels.core.sm90.wgmma import (
    decode_descriptor,
    mnmajor_descriptor_base,
    mnmajor_element_offset,
    mnmajor_kstep_offset,
    mnmajor_strides,
)


@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("cols", [64, 128, 256])
def test_mn_major_view_reads_the_tma_tile(rows, cols):
    for k in range(rows):
        for n in range(cols):
            got = mnmajor_element_offset(k, n, k_rows=rows, elem_bytes=2, mode=Swizzle.B128)
            assert got == tile_offset(k, n, rows=rows, elem_bytes=2, mode=Swizzle.B128)


def test_mn_major_descriptor_fields():
    fields = decode_descriptor(mnmajor_descriptor_base(Swizzle.B128, 128))
    assert (fields["lbo"], fields["sbo"], fields["mode"]) == (128 * 128, 1024, Swizzle.B128)
    assert mnmajor_strides(Swizzle.B64, 64) == (64 * 64, 512)
    for k in range(4):
        assert mnmajor_kstep_offset(k, mode=Swizzle.B128) == tile_offset(
            16 * k, 0, rows=128, elem_bytes=2, mode=Swizzle.B128
        )
    with pytest.raises(ValueError, match="swizzled"):
        mnmajor_strides(Swizzle.NONE, 64)
