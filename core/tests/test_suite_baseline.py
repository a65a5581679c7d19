# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Baselines: promotion refusals and --force, replace vs --merge, comparison and thresholds."""

import json

import pytest

from tirx_kernels.core.suite import baseline as B
from tirx_kernels.core.suite.cli import main
from tirx_kernels.core.suite.results import save_json


def row(kernel, config, status="PASS", tirx=10.0, torch=15.0, spread=0.02, timer="proton"):
    r = {
        "kernel": kernel,
        "config": config,
        "family": "fam",
        "status": status,
        "detail": "",
        "gpu_name": "NVIDIA H200",
        "gpu_model": "nvidia-h200",
        "attempts": [],
    }
    if status == "PASS":
        s = [tirx * (1 - spread / 2), tirx, tirx * (1 + spread / 2)]
        r.update(
            timer=timer,
            impls_us={"tirx": tirx, "torch": torch},
            round_samples={"tirx": s, "torch": [torch] * 3},
            errors={},
            ratio=torch / tirx,
            benchmark_protocol={"rounds": 3},
        )
    else:
        r["detail"] = f"{status.lower()} detail\nmore"
    return r


def run(
    rows,
    run_id="r1",
    dirty=False,
    commit="c" * 40,
    default_sweep=True,
    not_run=(),
    interrupted=False,
):
    return {
        "schema_version": 1,
        "run_id": run_id,
        "started": "2026-10-29T10:00:00+0000",
        "duration_s": 12.5,
        "interrupted": interrupted,
        "rows": rows,
        "options": {"rounds": 3, "cooldown_s": 1.0},
        "summary": {"selected": len(rows) + len(not_run), "not_run": len(not_run)},
        "not_run": [{"kernel": k, "config": c, "reason": "x"} for k, c in not_run],
        "selection": {"default_sweep": default_sweep},
        "provenance": {
            "git": {"commit": commit, "dirty": dirty},
            "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-0", "driver": "580.159.03"}],
            "versions": {"apache-tvm-tirx": "0.1.0a4", "torch": "2.11.0"},
        },
    }


def baseline_rows(root):
    doc = json.loads((root / "nvidia-h200" / "baseline.json").read_text())
    return {(r["kernel"], r["config"]): r for r in doc["rows"]}, doc


@pytest.mark.parametrize(
    "doc, reason",
    [
        (run([row("a", "x"), row("a", "y", "FAIL")]), "row a y is FAIL: fail detail"),
        (run([row("a", "x"), row("a", "y", "TIMEOUT")]), "row a y is TIMEOUT"),
        (run([row("a", "x"), row("a", "y", "BASELINE_ERROR")]), "row a y is BASELINE_ERROR"),
        (run([row("a", "x")], dirty=True), "the checkout was dirty at commit cccccccccccc"),
        (run([row("a", "x")], commit=None, dirty=None), "the checkout state is unknown"),
        (
            run([row("a", "x")], not_run=[("a", "y")]),
            "the run is incomplete (1 workload(s) not run)",
        ),
        (run([row("a", "x")], interrupted=True), "interrupted"),
        (
            run([row("a", "x")], default_sweep=False),
            "not a complete default sweep; promote a targeted run with --merge",
        ),
    ],
)
def test_promotion_refusals(tmp_path, doc, reason):
    with pytest.raises(B.PromotionRefused) as e:
        B.promote(doc, tmp_path)
    assert any(reason in r for r in e.value.reasons), e.value.reasons
    assert not (tmp_path / "nvidia-h200").exists()


def test_force_promotes_only_the_measured_rows(tmp_path):
    doc = run([row("a", "x"), row("a", "y", "FAIL"), row("a", "z", "SKIP")], dirty=True)
    written = B.promote(doc, tmp_path, force=True).written
    assert {p.name for p in written} == {"baseline.json", "baseline.md"}
    rows, base = baseline_rows(tmp_path)
    assert list(rows) == [("a", "x")]
    assert base["history"][-1]["forced"] is True and base["history"][-1]["dirty"] is True


def test_nothing_measured_is_refused_even_forced(tmp_path):
    with pytest.raises(B.PromotionRefused, match="no measured PASS row"):
        B.promote(run([row("a", "z", "SKIP")]), tmp_path, force=True)


def test_replace_drops_and_merge_keeps_unrelated_rows(tmp_path):
    B.promote(run([row("a", "x"), row("b", "x", tirx=20.0)], run_id="r1"), tmp_path)
    # a targeted run: merge updates a/x, adds c/x, keeps b/x
    B.promote(
        run([row("a", "x", tirx=9.0), row("c", "x")], run_id="r2", default_sweep=False),
        tmp_path,
        merge=True,
    )
    rows, base = baseline_rows(tmp_path)
    assert sorted(rows) == [("a", "x"), ("b", "x"), ("c", "x")]
    assert rows[("a", "x")]["impls_us"]["tirx"] == 9.0 and rows[("a", "x")]["run_id"] == "r2"
    assert rows[("b", "x")]["run_id"] == "r1" and rows[("b", "x")]["impls_us"]["tirx"] == 20.0
    assert [h["mode"] for h in base["history"]] == ["replace", "merge"]
    md = (tmp_path / "nvidia-h200" / "baseline.md").read_text()
    assert "# Baseline: NVIDIA H200 (`nvidia-h200`)" in md
    assert "| x | proton | 9.00 | 15.00 | 1.667 |" in md and "### b (fam)" in md
    assert "| r2 |" in md and "merge" in md
    # a full default sweep updates what it measured and keeps the rest ...
    B.promote(run([row("a", "x", tirx=8.0)], run_id="r3"), tmp_path)
    rows, base = baseline_rows(tmp_path)
    assert sorted(rows) == [("a", "x"), ("b", "x"), ("c", "x")]
    assert rows[("a", "x")]["run_id"] == "r3" and rows[("b", "x")]["run_id"] == "r1"
    assert [h["mode"] for h in base["history"]] == ["replace", "merge", "replace"]
    # ... unless told to prune the rows the sweep no longer has
    done = B.promote(run([row("a", "x", tirx=8.0)], run_id="r4"), tmp_path, prune=True)
    rows, base = baseline_rows(tmp_path)
    assert list(rows) == [("a", "x")] and done.pruned == [
        ("nvidia-h200", "b", "x"),
        ("nvidia-h200", "c", "x"),
    ]
    assert base["history"][-1]["pruned"] == 2


def test_compare_thresholds_from_noise(tmp_path):
    B.promote(
        run(
            [
                row("a", "x"),
                row("a", "y", spread=0.10),
                row("a", "z"),
                row("a", "t"),
                row("a", "gone"),
            ]
        ),
        tmp_path,
    )
    after = run(
        [
            row("a", "x", tirx=10.5),  # +5% > max(3%, 2*2%) = 4%: regression
            row("a", "y", tirx=11.5, spread=0.02),  # +15% < 2*10% = 20%: ok (noisy row)
            row("a", "z", tirx=8.0),  # -20%: faster
            row("a", "t", timer="event"),  # different timer: not compared
            row("a", "new"),
            row("a", "bad", "FAIL"),
        ],
        run_id="r2",
    )
    c = B.compare(after, tmp_path)
    verdicts = {r["config"]: r["verdict"] for r in c["rows"]}
    assert verdicts == {
        "x": "regression",
        "y": "ok",
        "z": "faster",
        "t": "timer changed (proton -> event)",
        "new": "new row",
    }
    x = next(r for r in c["rows"] if r["config"] == "x")
    assert x["threshold"] == pytest.approx(0.04) and x["change"] == pytest.approx(0.05)
    y = next(r for r in c["rows"] if r["config"] == "y")
    assert y["threshold"] == pytest.approx(0.20)
    assert c["regressions"] == 1 and ("a", "gone") in c["missing"]
    assert "max(3%, 2 × measured noise)" in c["threshold_rule"]
    fixed = B.compare(after, tmp_path, threshold=0.10)
    assert {r["config"]: r["verdict"] for r in fixed["rows"]}["y"] == "regression"
    assert {r["config"]: r["verdict"] for r in fixed["rows"]}["x"] == "ok"


def test_compare_floor_and_single_round(tmp_path):
    B.promote(run([row("a", "x", spread=0.0)]), tmp_path)
    c = B.compare(run([row("a", "x", tirx=10.25, spread=0.0)]), tmp_path)
    assert c["rows"][0]["threshold"] == pytest.approx(0.03) and c["regressions"] == 0
    one = run([row("a", "x", tirx=10.4)])
    one["rows"][0]["round_samples"]["tirx"] = [10.4]
    c = B.compare(one, tmp_path)
    assert c["rows"][0]["threshold"] == pytest.approx(0.05) and c["rows"][0]["verdict"] == "ok"


def test_no_baseline_for_the_model(tmp_path):
    c = B.compare(run([row("a", "x")]), tmp_path)
    assert c["baselines"] == {"nvidia-h200": None} and c["regressions"] == 0
    assert c["rows"][0]["verdict"] == "no baseline"


def test_promote_cli(tmp_path, capsys):
    dirty = save_json(tmp_path / "dirty.json", run([row("a", "x")], dirty=True))
    base = tmp_path / "base"
    assert main(["promote", str(dirty), "--baselines", str(base)]) == 1
    err = capsys.readouterr().err
    assert "promotion refused" in err and "dirty" in err and "--force" in err
    assert not base.exists()
    assert main(["promote", str(dirty), "--baselines", str(base), "--force"]) == 0
    assert "baseline.json" in capsys.readouterr().out
    targeted = save_json(tmp_path / "t.json", run([row("b", "x")], default_sweep=False))
    assert main(["promote", str(targeted), "--baselines", str(base)]) == 1
    assert main(["promote", str(targeted), "--baselines", str(base), "--merge"]) == 0
    rows, _ = baseline_rows(base)
    assert sorted(rows) == [("a", "x"), ("b", "x")]
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"rows": []}')
    assert main(["promote", str(bogus), "--baselines", str(base)]) == 2
    assert "not a tirx-suite run" in capsys.readouterr().err


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [x for x in err.strip().splitlines() if x]
    assert len(lines) == 1, err
    return lines[0]


def test_merge_of_a_malformed_row_leaves_the_baseline_untouched(tmp_path, capsys):
    """Row 3 of issue #27: the baseline was rewritten, then promote crashed (TypeError)."""
    base = tmp_path / "base"
    B.promote(run([row("a", "x")]), base)
    before = (base / "nvidia-h200" / "baseline.json").read_bytes()
    bad = run([row("a", "y")], run_id="r2", default_sweep=False)
    bad["rows"][0]["impls_us"]["tirx"] = "fast"
    path = save_json(tmp_path / "bad.json", bad)
    assert main(["promote", str(path), "--merge", "--baselines", str(base)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "rows[0].impls_us['tirx']" in line and "'fast'" in line and "fix:" in line
    assert (base / "nvidia-h200" / "baseline.json").read_bytes() == before
    # and comparisons against the baseline keep working
    assert B.compare(run([row("a", "x")], run_id="r3"), base)["rows"][0]["verdict"] == "ok"


def test_promote_validates_the_new_baseline_before_writing(tmp_path):
    base = tmp_path / "base"
    B.promote(run([row("a", "x")]), base)
    before = (base / "nvidia-h200" / "baseline.json").read_bytes()
    bad = run([row("a", "y")], run_id="r2", default_sweep=False)
    bad["rows"][0]["round_samples"]["tirx"] = "many"
    with pytest.raises(B.BaselineError, match=r"round_samples\['tirx'\]"):
        B.promote(bad, base, merge=True)
    assert (base / "nvidia-h200" / "baseline.json").read_bytes() == before
    assert sorted(p.name for p in (base / "nvidia-h200").iterdir()) == [
        "baseline.json",
        "baseline.md",
    ]  # no temp file left behind


@pytest.mark.parametrize("damage", ["truncate", "not-json", "wrong-shape"])
def test_corrupt_baseline_is_one_line_in_compare_and_report(tmp_path, capsys, damage):
    """Row 7 of issue #27: a corrupted baseline.json gave a JSONDecodeError traceback."""
    base = tmp_path / "base"
    B.promote(run([row("a", "x")]), base)
    path = base / "nvidia-h200" / "baseline.json"
    text = path.read_text()
    path.write_text(
        {
            "truncate": text[: len(text) // 2],
            "not-json": "",
            "wrong-shape": '{"schema_version": 1, "rows": {"a": 1}}',
        }[damage]
    )
    run_json = save_json(tmp_path / "r.json", run([row("a", "x")], run_id="r2"))
    for cmd in (["compare"], ["report", "--out-dir", str(tmp_path / "out")]):
        assert main([*cmd, str(run_json), "--baselines", str(base)]) == 2
        line = one_line(capsys.readouterr().err)
        assert str(path) in line and "git checkout" in line


@pytest.mark.parametrize(
    "field, value",
    [("gpu_model", "../escaped"), ("gpu_model", "nvidia/../../escaped"), ("run_id", "../escaped")],
)
def test_paths_from_a_run_json_are_checked(tmp_path, capsys, field, value):
    """Row 9 of issue #27: gpu_model and run_id became paths unchecked."""
    doc = run([row("a", "x")])
    if field == "run_id":
        doc["run_id"] = value
    else:
        doc["rows"][0]["gpu_model"] = value
    path = save_json(tmp_path / "r.json", doc)
    base, out = tmp_path / "base", tmp_path / "out"
    assert main(["promote", str(path), "--baselines", str(base)]) == 2
    assert field in one_line(capsys.readouterr().err)
    assert main(["report", str(path), "--baselines", str(base), "--out-dir", str(out)]) == 2
    assert field in one_line(capsys.readouterr().err)
    assert not (tmp_path / "escaped").exists() and not (out / "escaped").exists()
    assert not base.exists() and not out.exists()


def _without_config():
    doc = run([row("a", "x")])
    del doc["rows"][0]["config"]
    return doc


@pytest.mark.parametrize(
    "doc, field",
    [
        ({"schema_version": 1}, "run_id: missing"),
        (_without_config(), "rows[0].config: missing"),
        ("[1, 2]", "expected a JSON object, got list"),
    ],
    ids=["schema-version-only", "row-without-config", "a-list"],
)
def test_promote_of_an_incomplete_run_json_is_one_line(tmp_path, capsys, doc, field):
    """Row 13 of issue #27: `promote` of {"schema_version": 1} raised a KeyError."""
    path = tmp_path / "r.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    for cmd in ("promote", "compare", "report"):
        assert main([cmd, str(path), "--baselines", str(tmp_path / "base")]) == 2
        line = one_line(capsys.readouterr().err)
        assert field in line and str(path) in line and "fix:" in line


def test_the_committed_baseline_is_valid():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "baselines"
    for path in root.glob("*/baseline.json"):
        assert B.load(path)["rows"], path


def test_replace_with_mostly_skip_rows_keeps_the_baseline(tmp_path, capsys):
    """Row 2 of issue #27: 52 SKIP + 1 PASS shrank baseline.json from 65 rows to 1, exit 0."""
    base = tmp_path / "base"
    B.promote(run([row("k", f"c{i}", tirx=10.0 + i) for i in range(65)]), base)
    sweep = run(
        [row("k", "c0", tirx=9.0)] + [row("k", f"c{i}", "SKIP") for i in range(1, 53)], run_id="r2"
    )
    sweep["rows"] += [row("k", f"c{i}", tirx=10.0 + i) for i in range(53, 65)]
    path = save_json(tmp_path / "r2.json", sweep)
    assert main(["promote", str(path), "--baselines", str(base)]) == 0
    rows, doc = baseline_rows(base)
    assert len(rows) == 65
    assert rows[("k", "c0")]["impls_us"]["tirx"] == 9.0 and rows[("k", "c0")]["run_id"] == "r2"
    # a SKIP row neither replaces nor deletes: the committed measurement stays
    assert rows[("k", "c7")]["impls_us"]["tirx"] == 17.0 and rows[("k", "c7")]["run_id"] == "r1"
    assert "kept 52 baseline row(s) this run did not measure" in capsys.readouterr().out


def test_prune_lists_what_it_removes_and_never_removes_a_skip(tmp_path, capsys):
    base = tmp_path / "base"
    B.promote(run([row("a", "x"), row("a", "skipped"), row("a", "gone")]), base)
    sweep = save_json(
        tmp_path / "r2.json",
        run([row("a", "x", tirx=9.0), row("a", "skipped", "SKIP")], run_id="r2"),
    )
    assert main(["promote", str(sweep), "--baselines", str(base), "--prune"]) == 0
    out = capsys.readouterr().out
    assert "removed nvidia-h200 a gone (not in this sweep)" in out
    assert "skipped" not in out
    rows, _ = baseline_rows(base)
    assert sorted(rows) == [("a", "skipped"), ("a", "x")]
    assert main(["promote", str(sweep), "--baselines", str(base), "--prune", "--merge"]) == 2
    assert "--prune" in one_line(capsys.readouterr().err)
