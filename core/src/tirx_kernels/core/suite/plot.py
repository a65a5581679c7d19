# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Ratio charts as PNGs, in pure Python (zlib + struct; no plotting library).

``ratio_chart``: one horizontal bar per measured workload on a log2 axis centred at 1: green
to the right when ours is faster (ratio fastest-reference / ours > 1), red to the left when
slower. ``heat_map``: a grid of ratios (e.g. shapes x M), each cell coloured on the same
log2 scale (white at 1, green above, red below, grey when missing) and labelled with its
value. Text uses a built-in 5x7 upper-case bitmap font.
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

from .results import save_bytes

_GLYPHS = {  # rows top to bottom
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    "_": "..... ..... ..... ..... ..... ..... #####",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    ">": ".#... ..#.. ...#. ....# ...#. ..#.. .#...",
    "<": "...#. ..#.. .#... #.... .#... ..#.. ...#.",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    " ": "..... ..... ..... ..... ..... ..... .....",
}
SCALE, ADVANCE = 2, 6  # font pixels per glyph pixel; glyph advance in glyph pixels
WHITE, BLACK, GREY = (255, 255, 255), (40, 40, 40), (170, 170, 170)
GREEN, RED = (46, 160, 67), (207, 34, 46)


class Canvas:
    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        self.px = bytearray(bytes(WHITE) * (width * height))

    def rect(self, x0, y0, x1, y1, color) -> None:
        x0, x1 = max(0, min(x0, x1)), min(self.w, max(x0, x1))
        row = bytes(color) * max(0, x1 - x0)
        for y in range(max(0, y0), min(self.h, y1)):
            start = (y * self.w + x0) * 3
            self.px[start : start + len(row)] = row

    def text(self, x, y, s: str, color=BLACK) -> None:
        for i, ch in enumerate(s.upper()):
            rows = _GLYPHS.get(ch, _GLYPHS["?"]).split()
            for gy, bits in enumerate(rows):
                for gx, bit in enumerate(bits):
                    if bit == "#":
                        px = x + (i * ADVANCE + gx) * SCALE
                        self.rect(px, y + gy * SCALE, px + SCALE, y + (gy + 1) * SCALE, color)

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.px[y * self.w * 3 : (y + 1) * self.w * 3]) for y in range(self.h)
        )

        def chunk(tag, data):
            return (
                struct.pack(">I", len(data))
                + tag
                + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
            )

        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def text_width(s: str) -> int:
    return len(s) * ADVANCE * SCALE


def ratio_chart(items: list[tuple[str, float]], title: str) -> bytes:
    """PNG bytes of a bar per (label, ratio) on a log2 axis centred at ratio 1."""
    line_h, pad, bar_w = 22, 12, 560
    labels = [label[:48] for label, _ in items]
    left = pad + max([text_width(s) for s in labels] + [0]) + pad
    span = max([abs(math.log2(r)) for _, r in items if r > 0] + [1.0])
    span = min(4.0, max(1.0, math.ceil(span)))  # whole powers of two, at most 1/16..16
    width = max(left + bar_w + pad + text_width("16.000X") + pad, text_width(title) + 2 * pad)
    height = pad + 2 * line_h + len(items) * line_h + line_h + pad
    c = Canvas(width, height)
    c.text(pad, pad, title)
    top = pad + 2 * line_h
    centre = left + bar_w // 2
    scale = (bar_w // 2) / span
    for i, (label, r) in enumerate(zip(labels, (r for _, r in items))):
        y = top + i * line_h
        c.text(pad, y + 4, label)
        v = max(-span, min(span, math.log2(r))) if r > 0 else -span
        end = centre + int(round(v * scale))
        c.rect(
            min(centre, end),
            y + 3,
            max(centre, end) + (1 if end == centre else 0),
            y + line_h - 3,
            GREEN if r >= 1 else RED,
        )
        c.text(left + bar_w + pad, y + 4, f"{r:.3f}x")
    bottom = top + len(items) * line_h
    c.rect(centre, top - 4, centre + 2, bottom + 4, BLACK)  # ratio 1
    for k in range(-int(span), int(span) + 1):
        x = centre + int(round(k * scale))
        if k:
            c.rect(x, top - 4, x + 1, bottom + 4, GREY)
        tick = f"{2**k}x" if k >= 0 else f"1/{2**-k}x"
        c.text(x - text_width(tick) // 2, bottom + 8, tick)
    return c.png()


def write_ratio_plot(rows: list[dict], path: Path) -> Path | None:
    """Write the chart of every row with a ratio; None when no row has one."""
    items = [
        (f"{r['kernel']} {r['config']}", r["ratio"]) for r in rows if r.get("ratio") is not None
    ]
    if not items:
        return None
    png = ratio_chart(items, "ratio fastest reference / ours  (>1: ours faster)")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_bytes(path, png)
    return Path(path)


def ratio_color(r: float | None, span: float = 1.0) -> tuple[int, int, int]:
    """The cell colour of ratio ``r``: white at 1, towards green (> 1) or red (< 1), full
    at ``2**span`` or ``2**-span``; grey when ``r`` is None or not positive."""
    if r is None or not r > 0:
        return GREY
    t = max(-1.0, min(1.0, math.log2(r) / span))
    end, f = (GREEN if t > 0 else RED), abs(t)

    def mix(i: int) -> int:
        return int(round(WHITE[i] + (end[i] - WHITE[i]) * f))

    return mix(0), mix(1), mix(2)


def heat_map(
    rows: list[str],
    cols: list[str],
    cells: list[list[float | None]],
    title: str,
    *,
    span: float = 1.0,
    corner: str = "",
) -> bytes:
    """PNG bytes of ``cells[i][j]`` (a ratio or None) in a grid, ``rows`` labelling the rows
    and ``cols`` the columns; colours by :func:`ratio_color` (full at ``2**±span``), each
    cell's value printed in it; ``corner`` labels the row-label column (e.g. ``N X K``)."""
    if len(cells) != len(rows) or any(len(line) != len(cols) for line in cells):
        raise ValueError("heat_map: cells must be len(rows) lists of len(cols) values")
    pad, cell_h = 12, 26
    labels = [r[:40] for r in rows]
    cell_w = max([text_width(c[:12]) for c in cols] + [text_width("0.000")]) + 12
    left = pad + max([text_width(s) for s in labels + [corner]]) + pad
    legend = f"WHITE = 1.000, FULL GREEN >= {2**span:g}X, FULL RED <= 1/{2**span:g}X, GREY: NONE"
    width = max(left + len(cols) * cell_w + pad, text_width(title) + 2 * pad)
    width = max(width, text_width(legend) + 2 * pad)
    top = pad + 2 * cell_h
    height = top + cell_h + len(rows) * cell_h + cell_h + pad
    c = Canvas(width, height)
    c.text(pad, pad, title)
    c.text(pad, top + 6, corner)
    for j, col in enumerate(cols):
        x = left + j * cell_w
        c.text(x + (cell_w - text_width(col[:12])) // 2, top + 6, col[:12])
    for i, (label, line) in enumerate(zip(labels, cells)):
        y = top + (i + 1) * cell_h
        c.text(pad, y + 6, label)
        for j, r in enumerate(line):
            x = left + j * cell_w
            c.rect(x + 1, y + 1, x + cell_w - 1, y + cell_h - 1, ratio_color(r, span))
            s = "-" if r is None else f"{r:.3f}" if r < 10 else f"{r:.1f}"
            c.text(x + (cell_w - text_width(s)) // 2, y + 6, s)
    c.text(pad, top + (len(rows) + 1) * cell_h + 8, legend)
    return c.png()
