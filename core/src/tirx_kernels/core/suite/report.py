# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Markdown: the run report (``reports/<id>/report.md``) and the tables baseline.md shares.

Per kernel: every implementation's time (ours first), the ratio fastest-reference / ours
(> 1 = ours faster), then the comparison with the baseline and every problem.
"""

from __future__ import annotations

from collections import defaultdict

from ..impls import is_ours
from . import FAILED, SKIP


def fmt_us(us) -> str:
    return "" if us is None else f"{us:.2f}" if us < 1000 else f"{us:,.0f}"


def fmt_ratio(r) -> str:
    return "n/a" if r is None else f"{r:.3f}"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def kernel_tables(rows: list[dict], *, with_status: bool = True) -> str:
    """One table per kernel: config, [status], timer, each implementation (µs), ratio."""
    by_kernel: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        by_kernel[(r["kernel"], r.get("family", ""))].append(r)
    out = []
    for (kernel, family), krows in by_kernel.items():
        impls = sorted(
            {i for r in krows for i in (r.get("impls_us") or {})}, key=lambda n: (not is_ours(n), n)
        )
        headers = [
            "config",
            *(["status"] if with_status else []),
            "timer",
            *[f"{n} (µs)" for n in impls],
            "ratio ref/ours",
        ]
        table = []
        for r in krows:
            us = r.get("impls_us") or {}
            errors = r.get("errors") or {}
            cells = [
                r["config"],
                *([r["status"]] if with_status else []),
                r.get("timer") or "",
                *[
                    fmt_us(us.get(n)) if n in us else ("error" if n in errors else "")
                    for n in impls
                ],
                fmt_ratio(r.get("ratio")) if r.get("impls_us") else "",
            ]
            table.append(cells)
        out.append(
            f"### {kernel}" + (f" ({family})" if family else "") + "\n\n" + md_table(headers, table)
        )
    return "\n\n".join(out)


def describe_gpus(gpus: list[dict]) -> str:
    if not gpus:
        return "none"
    by_name = defaultdict(list)
    for g in gpus:
        by_name[g["name"]].append(g)
    parts = []
    for name, group in by_name.items():
        g = group[0]
        clocks = g.get("clocks_mhz") or {}
        clock = ", ".join(f"{k} {v} MHz" for k, v in clocks.items())
        parts.append(
            f"{name} ×{len(group)} (driver {g.get('driver') or '?'}"
            + (f"; clocks {clock}" if clock else "")
            + "; UUID "
            + ", ".join(x["uuid"] for x in group)
            + ")"
        )
    return "; ".join(parts)


def describe_code(prov: dict) -> str:
    git = prov.get("git") or {}
    commit = (git.get("commit") or "unknown")[:12]
    state = {True: "dirty", False: "clean", None: "state unknown"}[git.get("dirty")]
    vers = prov.get("versions") or {}
    listed = ", ".join(f"{k} {v}" for k, v in vers.items() if v)
    fams = ", ".join(f"{n} {f['version']}" for n, f in (prov.get("families") or {}).items())
    return f"commit {commit} ({state}); {listed}" + (f"; families: {fams}" if fams else "")


def run_report(
    run: dict, comparison: dict | None, plot_name: str | None, plot_note: str = ""
) -> str:
    prov, opts, s = run["provenance"], run["options"], run["summary"]
    counts = ", ".join(
        f"{s[k]} {k}" for k in ("PASS", "SKIP", "FAIL", "TIMEOUT", "BASELINE_ERROR") if s.get(k)
    )
    lines = [
        f"# tirx-suite run {run['run_id']}",
        "",
        f"- GPUs: {describe_gpus(prov.get('gpus') or [])} ({prov.get('gpu_source')})",
        f"- Code: {describe_code(prov)}",
        f"- Protocol: {opts['rounds']} rounds, {opts['cooldown_s']:g} s cooldown before each "
        "implementation in every round, arithmetic mean over rounds; timer per row (the "
        "bench default, proton, unless the suite YAML sets one). Times in µs. Ratio = fastest "
        "reference / fastest of ours: > 1 means ours is faster.",
        f"- Result: {counts or 'no rows'} of {s['selected']} selected"
        + (f", {s['not_run']} not run" if s.get("not_run") else "")
        + (f", {s['retried']} retried after interference" if s.get("retried") else "")
        + f"; {run['duration_s']:g} s; started {run['started']}.",
    ]
    if run.get("interrupted"):
        lines.append("- **Interrupted** (Ctrl-C): this is a partial run.")
    if run.get("stopped"):
        lines.append(f"- **Stopped early**: {run['stopped']}.")
    lines += ["", "## Results", ""]
    measured = [r for r in run["rows"] if r.get("impls_us")]
    lines.append(kernel_tables(run["rows"]) if run["rows"] else "No workload ran.")
    if plot_name:
        lines += ["", f"![ratio fastest-reference / ours per workload]({plot_name})"]
    elif plot_note:
        lines += ["", f"_{plot_note}_"]
    if comparison is not None:
        lines += ["", comparison_section(comparison)]
    elif run.get("comparison_error"):
        lines += [
            "",
            "## Comparison with the baseline",
            "",
            f"Not possible: {run['comparison_error']}",
        ]
    problems = [r for r in run["rows"] if r["status"] in FAILED]
    skips = [r for r in run["rows"] if r["status"] == SKIP]
    if problems:
        lines += ["", "## Failures", ""]
        for r in problems:
            detail = "\n".join(r["detail"].splitlines()[:12]) if r.get("detail") else ""
            lines += [
                f"- **{r['status']}** {r['kernel']} {r['config']}"
                + (f" (log: `{r['log']}`)" if r.get("log") else ""),
                "",
                "```",
                detail,
                "```",
            ]
    retried = [
        r
        for r in run["rows"]
        if any(a.get("status") == "INTERFERED" for a in r.get("attempts") or [])
    ]
    if retried:
        lines += ["", "## Interference", ""]
        for r in retried:
            seen = sorted({p for a in r["attempts"] for p in a.get("interference") or []})
            lines.append(
                f"- {r['kernel']} {r['config']}: {len(r['attempts'])} attempts, final "
                f"{r['status']}; foreign: {'; '.join(seen)}"
            )
    if skips:
        lines += ["", "## Skipped", ""]
        lines += [
            f"- {r['kernel']} {r['config']}: {(r.get('detail') or '').splitlines()[0]}"
            if r.get("detail")
            else f"- {r['kernel']} {r['config']}"
            for r in skips
        ]
    if run.get("not_run"):
        lines += ["", "## Not run", ""]
        lines += [f"- {x['kernel']} {x['config']}: {x['reason']}" for x in run["not_run"]]
    if not measured and run["rows"]:
        lines += ["", "_No row has timings (nothing measured)._"]
    return "\n".join(lines) + "\n"


def comparison_section(c: dict) -> str:
    lines = ["## Comparison with the baseline", ""]
    for model, path in c["baselines"].items():
        lines.append(
            f"- {model}: "
            + (
                f"`{path}`"
                if path
                else "no baseline yet (promote one with `tirx-suite promote RUN.json`)"
            )
        )
    lines.append(f"- Threshold: {c['threshold_rule']}")
    if c.get("noise_median") is not None:
        lines.append(
            f"- Measured noise: median round-to-round spread "
            f"{c['noise_median']:.1%} over {c['noise_rows']} row(s)."
        )
    lines.append(f"- Regressions: {c['regressions']}.")
    rows = [r for r in c["rows"] if r["verdict"] != "no baseline"]
    if rows:
        lines += [
            "",
            md_table(
                [
                    "kernel",
                    "config",
                    "impl",
                    "before (µs)",
                    "after (µs)",
                    "change",
                    "threshold",
                    "ratio before",
                    "ratio after",
                    "verdict",
                ],
                [
                    [
                        r["kernel"],
                        r["config"],
                        r.get("impl") or "",
                        fmt_us(r.get("before_us")),
                        fmt_us(r.get("after_us")),
                        "" if r.get("change") is None else f"{r['change']:+.1%}",
                        "" if r.get("threshold") is None else f"{r['threshold']:.1%}",
                        fmt_ratio(r.get("ratio_before")),
                        fmt_ratio(r.get("ratio_after")),
                        "**REGRESSION**" if r["verdict"] == "regression" else r["verdict"],
                    ]
                    for r in rows
                ],
            ),
        ]
    if c.get("missing"):
        lines += [
            "",
            "Baseline rows this run did not measure: "
            + ", ".join(f"{k} {cfg}" for k, cfg in c["missing"])
            + ".",
        ]
    return "\n".join(lines)
