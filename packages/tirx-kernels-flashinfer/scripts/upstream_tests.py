# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer's own tests, run against our drop-in functions.

    python packages/tirx-kernels-flashinfer/scripts/upstream_tests.py prepare \\
        --git-dir /work/.mirror/flashinfer-ai+flashinfer/repo [--commit SHA] [--dir DIR]
    python packages/tirx-kernels-flashinfer/scripts/upstream_tests.py run \\
        [--only norm|activation|rope ...] [--junit FILE] [--shards N] [--dir DIR] [-- PYTEST ARGS]

``prepare`` copies, with ``git show COMMIT:PATH`` from a (bare) clone of FlashInfer, the test
files of the functions this family replaces (:data:`SUITES`) and the helpers they import into
``DIR`` (default ``.device/fi-tests`` under the repository root: ignored, never committed),
with a ``conftest.py`` that replaces ``flashinfer.norm.*``, ``flashinfer.activation.*``,
``flashinfer.rope.*`` and the top-level ``flashinfer.*`` of the same names with ours
(:data:`PATCHED`) before the tests import anything. ``run`` runs pytest there, offline, on
the tests that call those functions (``-k`` of :data:`SUITES`); FlashInfer must be installed
(its other functions are the references of some tests, e.g. ``apply_rope`` for
``apply_rope_pos_ids``). The session fails when none of our functions was called. The tests
are bound by kernel compiles, one per shape: ``--shards N`` runs N pytest processes at once,
process i taking every N-th collected test from the i-th (logs ``DIR/shard-i.log``, JUnit
``FILE`` with ``.shard-i`` before its suffix), fewer when the GPU's free memory cannot hold
N of the suite's shards (:data:`SHARD_GIB`). Each failure is written as it happens, test id
and first line of its error, to ``DIR/failures-i.txt`` (``failures.txt`` unsharded), so a
run cut short by a timeout still says why its tests failed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository root
DEFAULT_DIR = ROOT / ".device" / "fi-tests"
# The commit the family's ports cite (tirx_kernels.flashinfer.plugin.UPSTREAM_COMMIT).
COMMIT = "fb28d7242b3506a2348265962041acc1fb56cca4"

# suite: (test files at COMMIT, the -k expression selecting the tests of our functions)
SUITES = {
    "norm": (
        ["tests/utils/test_norm.py"],
        "(test_norm or test_qknorm or test_fused_add_rmsnorm or test_gemma_norm"
        " or test_gemma_fused_add_rmsnorm or test_layernorm or int64_stride"
        " or contiguous_overflow) and not quant",
    ),
    "activation": (["tests/utils/test_activation.py"], None),
    "rope": (["tests/attention/test_rope.py"], "test_rope_pos_ids and not llama31"),
}
# GiB of GPU memory one shard of a suite may hold at once (RoPE's largest cases: 11.4 GiB
# seen in a shard; on an 80 GB H100 11 shards ran out of memory, 2026-12-07); the shards
# of a run are capped to what the free memory holds
SHARD_GIB = {"rope": 12}
# FlashInfer functions that selected tests call as their reference, called once before the
# tests: each JIT-builds a module on first use (minutes for rope), which every shard would
# otherwise wait on at once
WARM = {
    "rope": (
        "import torch, flashinfer\n"
        "q = torch.zeros(1, 1, 64, dtype=torch.float16, device='cuda')\n"
        "indptr = torch.tensor([0, 1], dtype=torch.int32, device='cuda')\n"
        "offsets = torch.zeros(1, dtype=torch.int32, device='cuda')\n"
        "flashinfer.apply_rope_inplace(q, q.clone(), indptr, offsets)\n"
    ),
}
HELPERS = ["tests/test_helpers/rope_reference.py"]
NO_TESTS = 5  # pytest's exit code when a session collected nothing  # imported by test_rope.py
PACKAGES = ["tests", "tests/utils", "tests/attention", "tests/test_helpers"]

# flashinfer submodule -> the functions of ours (tirx_kernels.flashinfer.<same>) replacing it
PATCHED = {
    "norm": [
        "rmsnorm",
        "gemma_rmsnorm",
        "fused_add_rmsnorm",
        "gemma_fused_add_rmsnorm",
        "layernorm",
    ],
    "activation": ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"],
    "rope": ["apply_rope_pos_ids", "apply_rope_pos_ids_inplace"],
}

CONFTEST = """\
# Written by tirx-kernels' upstream_tests.py: FlashInfer's tests against our functions.
import functools
import importlib
import os

import pytest

PATCHED = {patched!r}
CALLS = {{}}


def _counted(name, ours):
    @functools.wraps(ours)
    def call(*args, **kwargs):
        CALLS[name] = CALLS.get(name, 0) + 1
        return ours(*args, **kwargs)

    return call


def pytest_configure(config):
    import flashinfer
    import tirx_kernels.flashinfer as ours

    for module, names in PATCHED.items():
        upstream = importlib.import_module(f"flashinfer.{{module}}")
        for name in names:
            replacement = _counted(name, getattr(ours, name))
            setattr(upstream, name, replacement)
            if hasattr(flashinfer, name):
                setattr(flashinfer, name, replacement)


def pytest_collection_modifyitems(config, items):
    shard = os.environ.get("TIRX_FI_SHARD")  # "i/n": every n-th collected test from the i-th
    if shard:
        i, n = map(int, shard.split("/"))
        items[:] = items[i::n]


def pytest_runtest_logreport(report):
    # written at once, so a run killed by a timeout still says why each test failed
    # a chained error is named with its causes: torch.testing's "Comparing" wraps the real one
    if report.failed:
        chain = getattr(report.longrepr, "chain", None) or []
        crashes = [crash for _, crash, _ in reversed(chain) if crash is not None]
        if not crashes:
            crash = getattr(report.longrepr, "reprcrash", None)
            crashes = [crash] if crash else []
        lines = [(c.message.strip().splitlines() or [""])[0] for c in crashes]
        why = " <- ".join(lines) or str(report.longrepr).strip().splitlines()[0]
        with open(os.environ.get("TIRX_FI_FAILURES", "failures.txt"), "a") as f:
            f.write(f"{{report.nodeid}} ({{report.when}}): {{why}}\\n")


def pytest_report_header(config):
    names = ", ".join(f"flashinfer.{{m}}.{{n}}" for m, ns in PATCHED.items() for n in ns)
    return f"tirx-kernels: {{names}} (and top-level names) are tirx_kernels.flashinfer's"


def pytest_sessionfinish(session, exitstatus):
    print("\\ntirx-kernels calls:", CALLS or "none")
    if session.testscollected and not CALLS and exitstatus == 0:
        session.exitstatus = 1  # nothing of ours ran: the patch did not take
"""


def _git_show(git_dir: str, commit: str, path: str) -> str:
    cmd = ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"prepare: {' '.join(cmd)} failed: {done.stderr.strip()}")
    return done.stdout


def prepare(git_dir: str, commit: str, out: Path) -> None:
    files = [f for suite_files, _ in SUITES.values() for f in suite_files] + HELPERS
    for path in files:
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_git_show(git_dir, commit, path))
    for package in PACKAGES:
        (out / package / "__init__.py").touch()
    (out / "conftest.py").write_text(CONFTEST.format(patched=PATCHED))
    # its own pytest config, so the repository's is not picked up; tests import as `tests.*`
    (out / "pytest.ini").write_text("[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n")
    (out / "COMMIT").write_text(commit + "\n")
    print(f"prepared FlashInfer @ {commit} tests in {out}: {', '.join(files)}")


def gpu_free_gib() -> float | None:
    """Free memory of the first GPU (nvidia-smi; no CUDA context here), None if unknown."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(done.stdout.split()[0]) / 1024 if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def fitting_shards(only: list[str], shards: int, free_gib: float | None) -> int:
    """``shards``, or fewer (at least one) where the suites' :data:`SHARD_GIB` times the
    shard count exceeds ``free_gib`` (no cap when the free memory is unknown)."""
    need = max((SHARD_GIB.get(suite, 0) for suite in only), default=0)
    if not need or free_gib is None:
        return shards
    return max(1, min(shards, int(free_gib // need)))


def run(only: list[str], junit: str | None, out: Path, extra: list[str], shards: int = 1) -> int:
    if not (out / "conftest.py").is_file():
        raise SystemExit(f"run: {out} is not prepared; run `prepare` first")
    files, selections = [], []
    for suite in only:
        suite_files, select = SUITES[suite]
        files += suite_files
        selections.append(
            f"({select})" if select else "(" + " or ".join(Path(f).stem for f in suite_files) + ")"
        )
    cmd = [sys.executable, "-m", "pytest", "-c", str(out / "pytest.ini"), "--rootdir", str(out)]
    cmd += [*files, "-k", " or ".join(selections), "-q", "-rfE"]
    for stale in out.glob("failures*.txt"):
        stale.unlink()
    for suite in only:
        if suite in WARM:  # a failure here shows again, per test, in the run itself
            started = time.monotonic()
            code = subprocess.call([sys.executable, "-c", WARM[suite]], cwd=out)
            print(f"warm {suite}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    fit = fitting_shards(only, shards, gpu_free_gib() if shards > 1 else None)
    if fit < shards:
        print(
            f"shards: {fit}, not {shards}: the GPU's free memory holds {fit} of these", flush=True
        )
        shards = fit
    if shards == 1:
        cmd += ["--junitxml", str(Path(junit).resolve())] if junit else []
        print("+", " ".join(cmd + extra), flush=True)
        return subprocess.call(cmd + extra, cwd=out)
    # a timeout's SIGTERM ends the shards too (the finally below), not only this process
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    procs = []
    try:
        for i in range(shards):
            report = Path(junit).resolve() if junit else None
            shard_cmd = cmd + (
                [f"--junitxml={report.with_suffix(f'.shard-{i}{report.suffix}')}"] if report else []
            )
            env = dict(
                os.environ, TIRX_FI_SHARD=f"{i}/{shards}", TIRX_FI_FAILURES=f"failures-{i}.txt"
            )
            print(f"+ TIRX_FI_SHARD={i}/{shards}", " ".join(shard_cmd + extra), flush=True)
            with open(out / f"shard-{i}.log", "w") as log:
                procs.append(
                    subprocess.Popen(shard_cmd + extra, cwd=out, env=env, stdout=log, stderr=log)
                )
        codes = []
        for i, proc in enumerate(procs):
            codes.append(proc.wait())
            summary = (out / f"shard-{i}.log").read_text().strip().splitlines()[-1:]
            print(f"shard {i}/{shards}: exit {codes[-1]}:", *summary, flush=True)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    ran = [code for code in codes if code != NO_TESTS] or codes  # more shards than tests
    return max(ran)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="copy the upstream tests and write the conftest")
    p.add_argument("--git-dir", required=True, help="a clone of flashinfer (bare is fine)")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    r = sub.add_parser("run", help="run them against tirx_kernels.flashinfer")
    r.add_argument("--only", action="append", choices=sorted(SUITES), help="repeatable")
    r.add_argument("--junit", help="write a JUnit XML report here")
    r.add_argument("--shards", type=int, default=1, help="pytest processes at once (>= 1)")
    r.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.git_dir, args.commit, args.dir.resolve())
        return 0
    if args.shards < 1:
        parser.error(f"--shards must be >= 1, got {args.shards}")
    return run(args.only or sorted(SUITES), args.junit, args.dir.resolve(), extra, args.shards)


if __name__ == "__main__":
    sys.exit(main())
