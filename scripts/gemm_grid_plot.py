# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Render ``gemm_sweep.py --grid`` JSON files as a heat map PNG (CPU only, no torch).

    python scripts/gemm_grid_plot.py OUT.png GRID.json [GRID.json ...] [--span 1]

One row per (N, K) (prefixed by dtype and layout when the files mix them), one column per
M, each cell cuBLAS / ours (> 1: ours faster; ``tirx_kernels.core.suite.plot.heat_map``:
white at 1, full green at 2x, full red at 1/2x, grey where a point has no ratio). Rows
keep the order of the files, so chunks given in run order make the grid's order. Prints the
same table as markdown (geometric mean per row) for docs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

_DTYPES = {"bfloat16": "BF16", "float16": "FP16"}


def load(paths):
    """Every grid row of the files, each with its file's dtype and layout."""
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if doc.get("kind") != "gemm_grid":
            raise ValueError(f"{path}: not a gemm_sweep.py --grid file (kind != 'gemm_grid')")
        for row in doc["rows"]:
            rows.append(dict(row, dtype=doc["dtype"], layout=doc.get("layout", "NT")))
    return rows


def table(rows):
    """(row labels, column labels, cells of ratios or None) of the grid rows."""
    groups = {(r["dtype"], r["layout"]) for r in rows}
    keys, ms, ratio = [], sorted({r["M"] for r in rows}), {}
    for r in rows:
        key = (r["dtype"], r["layout"], r["N"], r["K"])
        if key not in keys:
            keys.append(key)
        ratio[key + (r["M"],)] = r.get("ratio")

    def label(key):
        dtype, layout, n, k = key
        prefix = f"{_DTYPES.get(dtype, dtype)} {layout} " if len(groups) > 1 else ""
        return f"{prefix}N{n} K{k}"

    cells = [[ratio.get(key + (m,)) for m in ms] for key in keys]
    return [label(k) for k in keys], [f"M{m}" for m in ms], cells, groups


def markdown(rows, cols, cells):
    lines = ["| N x K | " + " | ".join(cols) + " | geomean |", "|---" * (len(cols) + 2) + "|"]
    for label, line in zip(rows, cells):
        have = [r for r in line if r]
        mean = math.exp(sum(math.log(r) for r in have) / len(have)) if have else None
        vals = ["-" if r is None else f"{r:.3f}" for r in line + [mean]]
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the PNG to write")
    ap.add_argument("grids", nargs="+", help="gemm_sweep.py --grid JSON files")
    ap.add_argument("--span", type=float, default=1.0, help="log2 ratio of full colour")
    args = ap.parse_args(argv)

    from tirx_kernels.core.suite.plot import heat_map

    rows = load(args.grids)
    if not rows:
        ap.error("no grid rows in the files")
    labels, cols, cells, groups = table(rows)
    what = " ".join(f"{_DTYPES.get(d, d)} {lay}" for d, lay in sorted(groups))
    title = f"CUBLAS / OURS  {what}  (>1: OURS FASTER)"
    Path(args.out).write_bytes(heat_map(labels, cols, cells, title, span=args.span, corner="N X K"))
    print(markdown(labels, cols, cells))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
