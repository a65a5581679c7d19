# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The ratio chart of a run as a PNG, in pure Python (zlib + struct; no plotting library).

One horizontal bar per measured workload on a log2 axis centred at 1: green to the right
when ours is faster (ratio fastest-reference / ours > 1), red to the left when slower.
Text uses a built-in 5x7 upper-case bitmap font.
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
