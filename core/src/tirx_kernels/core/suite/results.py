# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The run JSON (``.bench-suite/runs/<id>.json``) and its provenance.

Schema (``schema_version`` 1)::

    {"schema_version": 1, "run_id", "started", "finished", "duration_s",
     "interrupted": bool, "complete": bool, "stopped": str|null,
     "selection": {"default_sweep": bool, "kernels", "families", "configs",
                   "workloads_file", "all_configs", "count"},
     "options": {"rounds", "cooldown_s", "timeout_s", "max_retries", "monitor"},
     "provenance": {"host", "python", "gpus": [{index, uuid, name, driver, memory_mib,
                    clocks_mhz}], "gpu_source", "versions": {dist: version},
                    "families": {name: {distribution, version}},
                    "git": {"commit", "dirty", "source"}},
     "rows": [{"kernel", "config", "family", "status", "detail", "default", "num_gpus",
               "settings", "gpus": [uuid], "gpu_name", "gpu_model", "seconds", "log",
               "attempts": [...], "timer", "impls_us": {impl: us},
               "round_samples": {impl: [us]}, "errors", "benchmark_protocol", "ratio"}],
     "not_run": [{"kernel", "config", "reason"}],
     "summary": {"selected", "PASS", "SKIP", "FAIL", "TIMEOUT", "BASELINE_ERROR",
                 "not_run", "retried"}}
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from ..impls import ratio
from . import STATUSES
from .gpus import model_slug
from .scheduler import Outcome, Row
from .schema import one_line, run_problems

SCHEMA_VERSION = 1
TRACKED_DISTRIBUTIONS = (
    "apache-tvm-tirx",
    "torch",
    "triton",
    "tirx-kernels-core",
    "numpy",
    # optional references, recorded when installed
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "deep-gemm",
    "flash-mla",
    "flash-attn",
    "sgl-kernel",
    "nvidia-cutlass-dsl",
)
ENV_GIT_COMMIT, ENV_GIT_DIRTY = "TIRX_SUITE_GIT_COMMIT", "TIRX_SUITE_GIT_DIRTY"


class RunFileError(ValueError):
    pass


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-p{os.getpid()}"


def versions(extra_distributions=()) -> dict[str, str | None]:
    """Installed version of each tracked distribution and each family's (None: missing)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in (*TRACKED_DISTRIBUTIONS, *extra_distributions):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name in TRACKED_DISTRIBUTIONS[:3]:
                out[name] = None  # the core three are always reported
    return out


def _env(name: str) -> str | None:
    """The stripped value of an environment variable; unset or blank: None."""
    return os.environ.get(name, "").strip() or None


def env_git_problem() -> str | None:
    """Why TIRX_SUITE_GIT_COMMIT / TIRX_SUITE_GIT_DIRTY, when set, are unusable (else None):
    a run recording ``ref: refs/heads/main`` as its commit could never be promoted cleanly."""
    commit, dirty = _env(ENV_GIT_COMMIT), _env(ENV_GIT_DIRTY)
    if commit is not None and not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return (
            f"{ENV_GIT_COMMIT}={commit!r} is not a commit hash; fix: set it to "
            "`git rev-parse HEAD` of the checkout the run uses"
        )
    if dirty is not None and dirty not in ("0", "1"):
        return f"{ENV_GIT_DIRTY}={dirty!r} must be 0 (clean checkout) or 1 (uncommitted changes)"
    return None


def git_state(where: Path | None = None) -> dict:
    """Commit and dirty flag of the checkout holding the code (env fallback for copies
    without ``.git``: TIRX_SUITE_GIT_COMMIT, TIRX_SUITE_GIT_DIRTY=0|1)."""
    where = Path(where) if where else Path(__file__).resolve().parent

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=60
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode == 0:
            status = git("status", "--porcelain")
            return {
                "commit": head.stdout.strip(),
                "dirty": bool(status.stdout.strip()),
                "source": "git",
            }
    except (OSError, subprocess.SubprocessError):
        pass
    commit, dirty = _env(ENV_GIT_COMMIT), _env(ENV_GIT_DIRTY)
    return {
        "commit": commit,
        "dirty": None if dirty is None else dirty != "0",
        "source": "environment" if commit else "unknown (no git checkout)",
    }


def provenance(gpus, gpu_source: str, registry) -> dict:
    families = {
        f.family.name: {"distribution": f.distribution, "version": f.version}
        for f in getattr(registry, "families", [])
    }
    dists = [f["distribution"] for f in families.values() if f["distribution"] != "?"]
    return {
        "host": platform.node(),
        "python": platform.python_version(),
        "gpus": [g.to_json() for g in gpus],
        "gpu_source": gpu_source,
        "versions": versions(dists),
        "families": families,
        "git": git_state(),
    }


def row_json(row: Row) -> dict:
    w = row.workload
    settings = {
        k: getattr(w, k) for k in ("timer", "warmup", "repeat") if getattr(w, k) is not None
    }
    d = {
        "kernel": w.kernel,
        "config": w.config,
        "family": w.family,
        "status": row.status,
        "detail": row.detail,
        "default": w.default,
        "num_gpus": w.num_gpus,
        "settings": settings,
        "gpus": [g.uuid for g in row.gpus],
        "gpu_name": row.gpus[0].name if row.gpus else None,
        "gpu_model": row.gpus[0].model if row.gpus else None,
        "seconds": row.result.seconds if row.result else None,
        "log": row.result.log if row.result else None,
        "attempts": [asdict(a) for a in row.attempts],
    }
    bench = row.result.bench if row.result and isinstance(row.result.bench, dict) else None
    if bench:
        impls = bench.get("impls") or {}
        d.update(
            timer=bench.get("timer"),
            impls_us=impls,
            round_samples=bench.get("round_samples") or {},
            errors=bench.get("errors") or {},
            benchmark_protocol=bench.get("benchmark_protocol") or {},
            ratio=ratio(impls),
        )
    return d


def run_document(
    run_id: str, started: float, outcome: Outcome, *, selection: dict, options: dict, prov: dict
) -> dict:
    rows = [row_json(r) for r in outcome.rows]
    summary = {"selected": len(outcome.rows) + len(outcome.not_run)}
    summary.update({s: sum(r["status"] == s for r in rows) for s in STATUSES})
    summary["not_run"] = len(outcome.not_run)
    summary["retried"] = sum(len(r["attempts"]) > 1 for r in rows)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "started": _iso(started),
        "finished": _iso(time.time()),
        "duration_s": round(time.time() - started, 1),
        "interrupted": outcome.interrupted,
        "complete": not outcome.not_run,
        "stopped": outcome.stopped,
        "selection": selection,
        "options": options,
        "provenance": prov,
        "rows": rows,
        "not_run": [
            {"kernel": w.kernel, "config": w.config, "reason": why} for w, why in outcome.not_run
        ],
        "summary": summary,
    }


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def save_json(path: Path, doc: dict) -> Path:
    """Write atomically: a reader (or a Ctrl-C, or a crash) never sees half a file."""
    return save_text(path, json.dumps(doc, indent=1, sort_keys=False) + "\n")


def save_text(path: Path, text: str) -> Path:
    """Write ``text`` atomically (see :func:`save_bytes`)."""
    return save_bytes(path, text.encode("utf-8"))


def save_bytes(path: Path, data: bytes) -> Path:
    """Write to a temp file of this process beside ``path``, flush it to disk, then rename
    it over ``path``: the old content or the new one, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_run(path: Path) -> dict:
    """A run JSON whose every field a command reads is usable; else RunFileError (one line)."""
    fix = "fix: pass a run JSON written by tirx-suite (.bench-suite/runs/<id>.json)"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise RunFileError(f"{path}: cannot read a run JSON: {e}; {fix}") from None
    if isinstance(doc, dict) and doc.get("schema_version") != SCHEMA_VERSION:
        raise RunFileError(
            f"{path}: not a tirx-suite run (schema_version "
            f"{doc.get('schema_version')!r}, expected {SCHEMA_VERSION}); {fix}"
        )
    problems = run_problems(doc)
    if problems:
        raise RunFileError(f"{path}: not a valid tirx-suite run: {one_line(problems)}; {fix}")
    return doc


def row_model(row: dict) -> str | None:
    return row.get("gpu_model") or (model_slug(row["gpu_name"]) if row.get("gpu_name") else None)
