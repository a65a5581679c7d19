# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The pure-Python PNG charts: the heat map's colours, geometry and errors (decoded back)."""

import math
import struct
import zlib

import pytest

from tirx_kernels.core.suite.plot import GREEN, GREY, RED, WHITE, heat_map, ratio_color


def decode(png: bytes):
    """(width, height, rows of RGB tuples) of an 8-bit RGB, filter-0 PNG (what Canvas writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        tag, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(tag + data) & 0xFFFFFFFF
        chunks[tag] = data
        pos += 12 + length
    w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, color) == (8, 2) and b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 3 * w
    assert len(raw) == h * stride
    rows = []
    for y in range(h):
        line = raw[y * stride : (y + 1) * stride]
        assert line[0] == 0
        rows.append([tuple(line[1 + 3 * x : 4 + 3 * x]) for x in range(w)])
    return w, h, rows


def test_ratio_color_is_white_at_one_and_saturates_at_the_span():
    assert ratio_color(1.0) == WHITE
    assert ratio_color(2.0) == GREEN and ratio_color(8.0) == GREEN
    assert ratio_color(0.5) == RED and ratio_color(0.01) == RED
    assert ratio_color(None) == GREY and ratio_color(0.0) == GREY
    half = ratio_color(math.sqrt(2.0))
    assert all(min(w, g) <= v <= max(w, g) for v, w, g in zip(half, WHITE, GREEN))
    assert half not in (WHITE, GREEN)
    assert ratio_color(4.0, span=2.0) == GREEN and ratio_color(2.0, span=2.0) != GREEN


def test_heat_map_colours_each_cell_by_its_ratio():
    rows, cols = ["N4096 K4096", "N1024 K1024"], ["M1", "M16", "M8192"]
    cells = [[2.5, 1.0, None], [0.25, 1.0, 1.0]]
    w, h, px = decode(heat_map(rows, cols, cells, "cublas / ours", corner="N X K"))
    counts: dict = {}
    for line in px:
        for p in line:
            counts[p] = counts.get(p, 0) + 1
    # one full-green, one full-red and one grey cell of about 24 x 24 pixels (minus text)
    for colour in (GREEN, RED, GREY):
        assert 200 < counts.get(colour, 0) < 26 * 80, colour
    assert w > 3 * 40 and h > 4 * 26  # three columns and a header, title and legend rows


def test_heat_map_refuses_ragged_cells():
    with pytest.raises(ValueError, match="cells must be len"):
        heat_map(["a"], ["x", "y"], [[1.0]], "t")
