# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Shape checks of the JSON documents the suite reads back: run JSONs and baselines.

Those files come from disk (hand-edited, truncated, written by another version, hostile);
``run_id`` and ``gpu_model`` become paths and the times become comparisons, so every field
a command uses is checked before it is used. Each problem is one string naming the field
(``rows[3].impls_us['tirx']``), what it must be and what it is.
"""

from __future__ import annotations

import math
import re

from . import STATUSES

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")  # a file name: no separator
GPU_MODEL = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # what gpus.model_slug produces


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_str(v) -> bool:
    return isinstance(v, str) and v != ""


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_time(v) -> bool:  # a time in µs; None: untimed
    return v is None or (_is_number(v) and v >= 0)


class _Checker:
    def __init__(self):
        self.problems: list[str] = []

    def field(
        self, doc: dict, key: str, where: str, ok, expected: str, *, optional: bool = False
    ) -> bool:
        """Check ``doc[key]``; True when present and fine."""
        if key not in doc or (optional and doc[key] is None):
            if not optional:
                self.problems.append(f"{where}{key}: missing (expected {expected})")
            return False
        if not ok(doc[key]):
            self.problems.append(f"{where}{key}: expected {expected}, got {_show(doc[key])}")
            return False
        return True

    def row(self, r, where: str, *, with_status: bool) -> None:
        if not isinstance(r, dict):
            self.problems.append(f"{where}: expected an object, got {_show(r)}")
            return
        where += "."
        self.field(r, "kernel", where, _is_str, "a kernel name")
        self.field(r, "config", where, _is_str, "a config label")
        if with_status:
            self.field(r, "status", where, lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}")
        self.field(
            r,
            "gpu_model",
            where,
            lambda v: isinstance(v, str) and GPU_MODEL.fullmatch(v),
            "a GPU model like 'nvidia-h200'",
            optional=True,
        )
        for key in ("gpu_name", "timer", "detail", "family", "log"):
            self.field(r, key, where, lambda v: isinstance(v, str), "a string", optional=True)
        self.field(r, "ratio", where, _is_number, "a finite number", optional=True)
        for key in ("settings", "errors", "benchmark_protocol"):
            self.field(r, key, where, lambda v: isinstance(v, dict), "an object", optional=True)
        self.field(
            r,
            "attempts",
            where,
            lambda v: isinstance(v, list) and all(isinstance(a, dict) for a in v),
            "a list of objects",
            optional=True,
        )
        if self.field(
            r, "impls_us", where, lambda v: isinstance(v, dict), "an object", optional=True
        ):
            for name, us in r["impls_us"].items():
                if not _is_time(us):
                    self.problems.append(
                        f"{where}impls_us[{name!r}]: expected a time in µs "
                        f"(a finite number >= 0), got {_show(us)}"
                    )
        if self.field(
            r, "round_samples", where, lambda v: isinstance(v, dict), "an object", optional=True
        ):
            for name, samples in r["round_samples"].items():
                if not isinstance(samples, list) or not all(_is_time(s) for s in samples):
                    self.problems.append(
                        f"{where}round_samples[{name!r}]: expected a list of "
                        f"times in µs, got {_show(samples)}"
                    )


def run_problems(doc) -> list[str]:
    """What is wrong with a run JSON (empty: every field a command reads is usable)."""
    if not isinstance(doc, dict):
        return [f"expected a JSON object, got {type(doc).__name__}"]
    c = _Checker()
    c.field(
        doc,
        "run_id",
        "",
        lambda v: isinstance(v, str) and RUN_ID.fullmatch(v),
        "a run id of letters, digits, '.', '_', '+', '-' (no path)",
    )
    c.field(doc, "started", "", lambda v: isinstance(v, str), "a time stamp")
    c.field(doc, "duration_s", "", _is_number, "a number of seconds")
    c.field(doc, "interrupted", "", lambda v: isinstance(v, bool), "true or false")
    c.field(doc, "selection", "", lambda v: isinstance(v, dict), "an object", optional=True)
    c.field(doc, "comparison_error", "", lambda v: isinstance(v, str), "a string", optional=True)
    if c.field(doc, "options", "", lambda v: isinstance(v, dict), "an object"):
        c.field(doc["options"], "rounds", "options.", _is_number, "a number")
        c.field(doc["options"], "cooldown_s", "options.", _is_number, "a number")
    if c.field(doc, "summary", "", lambda v: isinstance(v, dict), "an object"):
        c.field(doc["summary"], "selected", "summary.", _is_number, "a number")
    if c.field(doc, "provenance", "", lambda v: isinstance(v, dict), "an object"):
        prov = doc["provenance"]
        c.field(
            prov,
            "git",
            "provenance.",
            lambda v: (
                isinstance(v, dict)
                and isinstance(v.get("commit"), (str, type(None)))
                and isinstance(v.get("dirty"), (bool, type(None)))
            ),
            "an object with commit (string or null) and dirty (bool or null)",
            optional=True,
        )
        c.field(
            prov,
            "gpus",
            "provenance.",
            lambda v: (
                isinstance(v, list)
                and all(
                    isinstance(g, dict)
                    and isinstance(g.get("name"), str)
                    and isinstance(g.get("uuid"), str)
                    for g in v
                )
            ),
            "a list of GPUs with name and uuid",
            optional=True,
        )
        for key in ("versions", "families"):
            c.field(
                prov, key, "provenance.", lambda v: isinstance(v, dict), "an object", optional=True
            )
    if c.field(doc, "not_run", "", lambda v: isinstance(v, list), "a list"):
        for i, x in enumerate(doc["not_run"]):
            if not (
                isinstance(x, dict)
                and all(isinstance(x.get(k), str) for k in ("kernel", "config", "reason"))
            ):
                c.problems.append(
                    f"not_run[{i}]: expected {{kernel, config, reason}}, got {_show(x)}"
                )
    if c.field(doc, "rows", "", lambda v: isinstance(v, list), "a list of rows"):
        for i, r in enumerate(doc["rows"]):
            c.row(r, f"rows[{i}]", with_status=True)
    return c.problems


def baseline_problems(doc) -> list[str]:
    """What is wrong with a baseline document (empty: usable)."""
    if not isinstance(doc, dict):
        return [f"expected a JSON object, got {type(doc).__name__}"]
    c = _Checker()
    c.field(doc, "schema_version", "", lambda v: v == 1, "1")
    c.field(
        doc,
        "gpu_model",
        "",
        lambda v: isinstance(v, str) and GPU_MODEL.fullmatch(v),
        "a GPU model like 'nvidia-h200'",
    )
    c.field(doc, "gpu_name", "", lambda v: isinstance(v, str), "a string", optional=True)
    if c.field(doc, "rows", "", lambda v: isinstance(v, list), "a list of rows"):
        for i, r in enumerate(doc["rows"]):
            c.row(r, f"rows[{i}]", with_status=False)
    if c.field(doc, "history", "", lambda v: isinstance(v, list) and v, "a non-empty list"):
        for i, h in enumerate(doc["history"]):
            if not (
                isinstance(h, dict)
                and isinstance(h.get("run_id"), str)
                and isinstance(h.get("mode"), str)
                and _is_number(h.get("rows"))
            ):
                c.problems.append(
                    f"history[{i}]: expected {{run_id, mode, rows, ...}}, got {_show(h)}"
                )
    return c.problems


def one_line(problems: list[str]) -> str:
    """The first problem, and how many more there are."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more
