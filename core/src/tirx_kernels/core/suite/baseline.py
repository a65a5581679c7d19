# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Committed per-GPU-model baselines: promote a run, and compare a run against them.

``baselines/<gpu model>/baseline.json`` (+ a generated ``baseline.md``) holds the PASS rows
of promoted runs. ``promote`` takes a complete default sweep, ``merge`` a targeted run; both
update the rows the run measured and keep every other committed row (a SKIP neither
replaces nor deletes); ``prune`` (complete sweeps only) removes the rows the sweep no longer
has. Both refuse failed rows, an incomplete or interrupted run, and a dirty or unknown
checkout unless forced; failed rows are never promoted, even when forced. Everything is
validated before the first write, and each file is replaced atomically.

Comparison: per row, our fastest implementation before and after. The default threshold
comes from the measured noise: ``max(3%, 2 x spread)`` where spread is the larger
round-to-round (max - min) / mean of our round samples in the baseline and in the run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..impls import split
from . import FAILED, PASS
from .report import kernel_tables, md_table
from .results import row_model, save_json, save_text
from .schema import baseline_problems, one_line

SCHEMA_VERSION = 1
FLOOR, NOISE_FACTOR, UNKNOWN_NOISE = 0.03, 2.0, 0.05
ROW_KEYS = (
    "kernel",
    "config",
    "family",
    "timer",
    "settings",
    "impls_us",
    "round_samples",
    "ratio",
    "benchmark_protocol",
    "gpu_name",
)


class PromotionRefused(Exception):
    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__("\n".join(reasons))


class BaselineError(Exception):
    """A baseline folder or file that cannot be found, read or trusted (one line + fix)."""


def default_dir(code_dir: Path | None = None) -> Path:
    """``<root of the git checkout holding this code>/baselines``.

    Never derived from the current directory: a run started elsewhere would compare against
    another folder, or none ("no baseline yet", exit 0), and the gate would be off."""
    where = Path(code_dir) if code_dir else Path(__file__).resolve().parent
    try:
        p = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if p.returncode == 0:
            return Path(p.stdout.strip()) / "baselines"
    except (OSError, subprocess.SubprocessError):
        pass
    raise BaselineError(
        f"cannot find the baselines folder: the suite code ({where}) is not "
        "in a git checkout; fix: pass --baselines DIR (the checkout's "
        "baselines/)"
    )


def baseline_path(root: Path, model: str) -> Path:
    return Path(root) / model / "baseline.json"


def load(path: Path) -> dict | None:
    """The baseline at ``path``, None when there is none; BaselineError when unusable."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        problems = baseline_problems(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        problems = [f"cannot read it as JSON ({e})"]
    if problems:
        raise BaselineError(
            f"{path}: not a usable baseline: {one_line(problems)}; fix: "
            f"restore it (git checkout -- {path}) or promote a run again"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def refusals(run: dict, *, merge: bool) -> list[str]:
    """Why this run must not become a baseline (empty: fine)."""
    out = []
    for r in run["rows"]:
        if r["status"] in FAILED:
            first = (r.get("detail") or "").splitlines()[:1]
            out.append(
                f"row {r['kernel']} {r['config']} is {r['status']}"
                + (f": {first[0]}" if first else "")
            )
    if run.get("interrupted") or run.get("not_run"):
        out.append(
            f"the run is incomplete ({len(run.get('not_run') or [])} workload(s) not "
            "run" + (", interrupted" if run.get("interrupted") else "") + ")"
        )
    git = run["provenance"].get("git") or {}
    if git.get("dirty") is None or not git.get("commit"):
        out.append(
            "the checkout state is unknown (no git commit recorded; on a copy without "
            ".git set TIRX_SUITE_GIT_COMMIT and TIRX_SUITE_GIT_DIRTY for the run)"
        )
    elif git["dirty"]:
        out.append(f"the checkout was dirty at commit {git['commit'][:12]} (commit first)")
    if not merge and not (run.get("selection") or {}).get("default_sweep"):
        out.append("the run is not a complete default sweep; promote a targeted run with --merge")
    return out


@dataclass
class Promoted:
    """What a promotion wrote, what it pruned, and how many rows it left unmeasured."""

    written: list[Path]
    pruned: list[tuple[str, str, str]]  # (gpu model, kernel, config)
    kept: int  # committed rows this run did not measure, left as they were


def promote(
    run: dict, root: Path, *, merge: bool = False, force: bool = False, prune: bool = False
) -> Promoted:
    """Write the run's PASS rows into the baseline of each GPU model.

    A committed row the run did not measure (a SKIP, a row not selected or not run) stays
    as it is: a sweep that could not measure something must not erase its baseline.
    ``prune`` (a complete default sweep only) removes the rows the sweep no longer has.
    """
    if prune and merge:
        raise ValueError(
            "prune needs a complete default sweep; a merged run cannot tell "
            "which rows left the sweep"
        )
    reasons = refusals(run, merge=merge)
    if reasons and not force:
        raise PromotionRefused(reasons)
    by_model: dict[str, list[dict]] = {}
    for r in run["rows"]:
        if r["status"] == PASS and r.get("impls_us") and (model := row_model(r)):
            by_model.setdefault(model, []).append(r)
    if not by_model:
        raise PromotionRefused(["the run has no measured PASS row to promote"])
    git = run["provenance"].get("git") or {}
    in_run = {(x["kernel"], x["config"]) for x in [*run["rows"], *(run.get("not_run") or [])]}
    written, planned, pruned, unmeasured = [], [], [], 0
    for model, rows in by_model.items():
        path = baseline_path(root, model)
        old = load(path)
        kept = {(r["kernel"], r["config"]): r for r in (old or {}).get("rows", [])}
        gone = sorted(key for key in kept if key not in in_run) if prune else []
        for key in gone:
            del kept[key]
        pruned += [(model, *key) for key in gone]
        for r in rows:
            kept[(r["kernel"], r["config"])] = {
                **{k: r.get(k) for k in ROW_KEYS},
                "run_id": run["run_id"],
                "commit": git.get("commit"),
            }
        unmeasured += len(kept) - len(rows)
        drivers = sorted(
            {
                g.get("driver")
                for g in run["provenance"].get("gpus", [])
                if g.get("name") and row_model({"gpu_name": g["name"]}) == model and g.get("driver")
            }
        )
        history = (old or {}).get("history", []) + [
            {
                "run_id": run["run_id"],
                "mode": "merge" if merge else "replace",
                "forced": force and bool(reasons),
                "promoted": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "measured": run.get("started"),
                "commit": git.get("commit"),
                "dirty": git.get("dirty"),
                "driver": ", ".join(drivers) or None,
                "versions": run["provenance"].get("versions"),
                "rows": len(rows),
                "pruned": len(gone),
            }
        ]
        doc = {
            "schema_version": SCHEMA_VERSION,
            "gpu_model": model,
            "gpu_name": rows[0].get("gpu_name"),
            "rows": sorted(kept.values(), key=lambda r: (r["kernel"], r["config"])),
            "history": history,
        }
        problems = baseline_problems(doc)
        if problems:
            raise BaselineError(
                f"the run cannot make a valid {model} baseline: "
                f"{one_line(problems)}; nothing was written; fix: promote a "
                "run JSON written by tirx-suite"
            )
        planned.append((path, doc, render_md(doc)))
    # everything is validated and rendered before the first write; each write is atomic
    for path, doc, md in planned:
        save_text(path.with_name("baseline.md"), md)
        save_json(path, doc)
        written += [path, path.with_name("baseline.md")]
    return Promoted(written, pruned, unmeasured)


def render_md(doc: dict) -> str:
    last = doc["history"][-1]
    vers = ", ".join(f"{k} {v}" for k, v in (last.get("versions") or {}).items() if v)
    lines = [
        f"# Baseline: {doc['gpu_name']} (`{doc['gpu_model']}`)",
        "",
        "Generated by `tirx-suite promote` from `baseline.json`; do not edit by hand. "
        "Times in µs: the mean of rounds (the fastest round for `eager_op_min` rows, the "
        "median for `graph_op_x32` rows); ratio = fastest reference / fastest of ours "
        "(> 1: ours faster).",
        "",
        f"Last update: run {last['run_id']} ({last['mode']}), commit "
        f"{(last.get('commit') or 'unknown')[:12]}, driver {last.get('driver') or '?'}; "
        f"{vers}.",
        "",
        kernel_tables(doc["rows"], with_status=False),
        "",
        "## History",
        "",
        md_table(
            ["run", "measured", "mode", "commit", "driver", "rows", "forced"],
            [
                [
                    h["run_id"],
                    h.get("measured") or "",
                    h["mode"],
                    (h.get("commit") or "unknown")[:12],
                    h.get("driver") or "",
                    h["rows"],
                    "yes" if h.get("forced") else "",
                ]
                for h in doc["history"]
            ],
        ),
    ]
    return "\n".join(lines) + "\n"


def spread(samples) -> float | None:
    """Round-to-round (max - min) / mean; None with fewer than two rounds."""
    samples = [s for s in samples or [] if s and s > 0]
    if len(samples) < 2:
        return None
    return (max(samples) - min(samples)) / statistics.mean(samples)


def _fastest_ours(row: dict) -> tuple[str, float] | None:
    ours, _ = split({k: v for k, v in (row.get("impls_us") or {}).items() if v and v > 0})
    return min(ours.items(), key=lambda kv: kv[1]) if ours else None


def compare(run: dict, root: Path, *, threshold: float | None = None) -> dict:
    """Each measured row of ``run`` against the baseline of its GPU model."""
    baselines: dict[str, dict | None] = {}
    paths: dict[str, str | None] = {}
    out_rows: list[dict] = []
    noises: list[float] = []
    for r in run["rows"]:
        if r["status"] != PASS or not r.get("impls_us"):
            continue
        model = row_model(r)
        assert model is not None, "a measured PASS row names its GPU model"
        if model not in baselines:
            path = baseline_path(root, model)
            baselines[model] = load(path)
            paths[model] = str(path) if baselines[model] else None
        base_rows = {
            (b["kernel"], b["config"]): b for b in (baselines[model] or {}).get("rows", [])
        }
        out_rows.append(
            _compare_row(
                r,
                base_rows.get((r["kernel"], r["config"])),
                baselines[model] is not None,
                threshold,
                noises,
            )
        )
    missing = []
    if (run.get("selection") or {}).get("default_sweep"):
        seen = {(r["kernel"], r["config"]) for r in run["rows"]}
        for b in baselines.values():
            missing += [
                (x["kernel"], x["config"])
                for x in (b or {}).get("rows", [])
                if (x["kernel"], x["config"]) not in seen
            ]
    rule = (
        f"fixed at {threshold:.1%} (--threshold)"
        if threshold is not None
        else f"per row max({FLOOR:.0%}, {NOISE_FACTOR:g} × measured noise), the noise being the "
        "larger round-to-round spread (max - min) / mean of our round samples in the "
        f"baseline and in this run ({UNKNOWN_NOISE:.0%} when either has one round)"
    )
    return {
        "baselines": paths,
        "threshold_rule": rule,
        "rows": out_rows,
        "regressions": sum(x["verdict"] == "regression" for x in out_rows),
        "noise_median": statistics.median(noises) if noises else None,
        "noise_rows": len(noises),
        "missing": missing,
    }


def _compare_row(r, base, have_baseline, threshold, noises) -> dict:
    out = {"kernel": r["kernel"], "config": r["config"], "ratio_after": r.get("ratio")}
    if base is None:
        out["verdict"] = "new row" if have_baseline else "no baseline"
        return out
    out["ratio_before"] = base.get("ratio")
    if (base.get("timer") or "proton") != (r.get("timer") or "proton"):
        out["verdict"] = f"timer changed ({base.get('timer')} -> {r.get('timer')})"
        return out
    before, after = _fastest_ours(base), _fastest_ours(r)
    if before is None or after is None:
        out["verdict"] = "no time of ours"
        return out
    s_before = spread((base.get("round_samples") or {}).get(before[0]))
    s_after = spread((r.get("round_samples") or {}).get(after[0]))
    noise = None if s_before is None or s_after is None else max(s_before, s_after)
    if noise is not None:
        noises.append(noise)
    thr = (
        threshold
        if threshold is not None
        else (UNKNOWN_NOISE if noise is None else max(FLOOR, NOISE_FACTOR * noise))
    )
    change = after[1] / before[1] - 1.0
    verdict = "regression" if change > thr else "faster" if change < -thr else "ok"
    impl = after[0] if before[0] == after[0] else f"{before[0]} -> {after[0]}"
    out.update(
        impl=impl,
        before_us=before[1],
        after_us=after[1],
        change=change,
        threshold=thr,
        noise=noise,
        verdict=verdict,
    )
    return out
