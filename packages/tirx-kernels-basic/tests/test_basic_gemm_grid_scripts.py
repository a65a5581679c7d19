# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""scripts/gemm_sweep.py --grid and scripts/gemm_grid_plot.py on the CPU: the grid's plan
(which kernels it compiles) and the heat map of its JSON chunks (timing needs the H200)."""

import json
from pathlib import Path

import pytest

from tirx_kernels.basic._gemm_schedule import TileConfig, pick_config
from tirx_kernels.core import testing

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def _load(name):
    return testing.load_script(SCRIPTS / f"{name}.py")


@pytest.fixture(scope="module")
def sweep():
    return _load("gemm_sweep")


@pytest.fixture(scope="module")
def plot():
    return _load("gemm_grid_plot")


def test_the_grid_is_the_issues_m_by_nk_grid(sweep):
    assert sweep.GRID_M == (1, 16, 64, 128, 256, 512, 1024, 3000, 4096, 8192)
    assert sweep.GRID_NK == (
        (4096, 4096),
        (14336, 4096),
        (4096, 14336),
        (8192, 8192),
        (28672, 8192),
        (1024, 1024),
    )


def test_the_grid_compiles_one_kernel_per_picked_config(sweep):
    plan = sweep.grid_configs(sweep.GRID_NK, sweep.GRID_M)
    for (N, K), configs in plan.items():
        picked = {pick_config(M, N, K, 132) for M in sweep.GRID_M}
        assert set(configs) == picked and len(configs) == len(picked)
    assert plan[(28672, 8192)] == [TileConfig(64, 256), TileConfig(128, 256), TileConfig(128, 192)]
    assert sum(len(c) for c in plan.values()) == 24


def test_list_configs_needs_no_gpu_and_honours_the_chunk(sweep, capsys):
    assert sweep.main(["--grid", "--list-configs", "--grid-nk", "1024x1024"]) == 0
    out = capsys.readouterr().out
    assert "N=1024 K=1024: 3 compiles: 64x128x1 128x64x1 128x256x1" in out
    assert "total: 3 compiles" in out and "N=4096" not in out


def _chunk(tmp_path, name, nk, ratios, dtype="bfloat16", layout="NT"):
    rows = [
        {"M": m, "N": nk[0], "K": nk[1], **({"ratio": r} if r else {"error": "x"})}
        for m, r in ratios.items()
    ]
    path = tmp_path / name
    doc = {"kind": "gemm_grid", "dtype": dtype, "layout": layout, "rows": rows}
    path.write_text(json.dumps(doc))
    return path


def test_the_plot_merges_chunks_into_one_heat_map(plot, tmp_path, capsys):
    one = _chunk(tmp_path, "a.json", (4096, 4096), {1: 1.25, 16: 0.8, 8192: None})
    two = _chunk(tmp_path, "b.json", (1024, 1024), {1: 2.0, 16: 0.5, 8192: 1.0})
    png = tmp_path / "grid.png"
    assert plot.main([str(png), str(one), str(two)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "| N x K | M1 | M16 | M8192 | geomean |" in out
    assert "| N4096 K4096 | 1.250 | 0.800 | - | 1.000 |" in out
    assert "| N1024 K1024 | 2.000 | 0.500 | 1.000 | 1.000 |" in out


def test_the_plot_labels_rows_by_dtype_and_layout_when_files_mix_them(plot, tmp_path):
    one = _chunk(tmp_path, "a.json", (4096, 4096), {1: 1.0})
    two = _chunk(tmp_path, "b.json", (4096, 4096), {1: 1.0}, dtype="float16", layout="NN")
    labels, cols, cells, _ = plot.table(plot.load([one, two]))
    assert labels == ["BF16 NT N4096 K4096", "FP16 NN N4096 K4096"] and cols == ["M1"]


def test_the_plot_refuses_other_json(plot, tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"shapes": []}))
    with pytest.raises(ValueError, match="not a gemm_sweep.py --grid file"):
        plot.load([path])
