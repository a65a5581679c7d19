# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-suite``: run the curated regression sweep, compare it to the baseline, promote it.

  tirx-suite [--kernel K] [--family F] [--config LABEL] [--all] [--workloads FILE] [options]
  tirx-suite --check-imports | --list
  tirx-suite promote RUN.json [--merge | --prune] [--force]
  tirx-suite compare RUN.json [--threshold PCT]
  tirx-suite report RUN.json

Exit codes: 0 ok, 1 a failure (FAIL, TIMEOUT, BASELINE_ERROR, an import error, a refused
promotion), 2 a config or usage error (nothing ran), 3 a regression against the baseline
beyond the threshold, 130 interrupted (Ctrl-C, SIGTERM or SIGHUP: the children are killed
and reaped, the partial run is still written).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from ..cliargs import (
    Parser,
    add_config_option,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    report_internal_error,
    unwritable,
)
from ..impls import ratio
from ..interrupts import StopSignals, raise_interrupt
from ..meta import MetaError
from ..output import StdoutClosed, emit, flush_stdout, note, stdout_closed_line
from ..plugins import PluginError
from ..registry import Registry, RegistryError, UnknownConfig, UnknownKernel, did_you_mean
from . import FAILED, INTERFERED
from . import baseline as baselines
from .config import ConfigError, Workload, load_suite, load_workloads_file
from .executor import ChildExecutor
from .gpus import LockPool, NullMonitor, SmiMonitor, inventory
from .lockfile import LockError
from .plot import write_ratio_plot
from .report import run_report
from .results import (
    RunFileError,
    env_git_problem,
    load_run,
    new_run_id,
    provenance,
    run_document,
    save_json,
    save_text,
)
from .scheduler import Events, Outcome, Scheduler

PROG = "tirx-suite"
SUBCOMMANDS = ("run", "promote", "compare", "report")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REGRESSION, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    pass


class Backend:
    """What the CLI touches outside itself; CPU tests pass a fake one to ``main``."""

    def registry(self, strict):
        return Registry.load(strict=strict)

    def gpus(self):
        return inventory()

    def pool(self, gpus, lock_dir):
        return LockPool(gpus, lock_dir)

    def monitor(self, interval_s):
        return SmiMonitor(interval_s)

    def executor(self, run_dir, **kwargs):
        return ChildExecutor(run_dir, **kwargs)

    def scheduler_options(self) -> dict:
        return {}


def _run_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description=__doc__.splitlines()[0],
        epilog="Subcommands: promote, compare, report (RUN.json).",
    )
    sel = p.add_argument_group("selection (default: every default: true entry)")
    sel.add_argument("--kernel", action="append", default=[], help="repeatable")
    sel.add_argument("--family", action="append", default=[], help="repeatable")
    add_config_option(
        sel, "only these labels (repeatable; includes default: false entries)", default=[]
    )
    sel.add_argument("--all", action="store_true", help="include default: false entries")
    sel.add_argument(
        "--workloads",
        type=Path,
        metavar="FILE",
        help="a flat `workloads:` YAML list instead of the families' files",
    )
    p.add_argument(
        "--check-imports",
        action="store_true",
        help="import every selected kernel module (no GPU, no compile) and stop",
    )
    p.add_argument("--list", action="store_true", help="print the selected workloads and stop")
    p.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="a family that fails to load is an error",
    )
    run = p.add_argument_group("running")
    run.add_argument(
        "--rounds", type=positive_int, default=5, help="measurement rounds (default 5)"
    )
    run.add_argument(
        "--cooldown",
        type=non_negative_float,
        default=1.0,
        help="seconds before each implementation in each round (default 1.0)",
    )
    run.add_argument(
        "--timeout",
        type=positive_float,
        default=900.0,
        help="seconds per workload before TIMEOUT (default 900)",
    )
    run.add_argument(
        "--retries",
        type=non_negative_int,
        default=3,
        help="requeues of an INTERFERED workload before FAIL (default 3)",
    )
    run.add_argument(
        "--retry-delay",
        type=non_negative_float,
        default=10.0,
        help="seconds before a requeued workload starts again (default 10)",
    )
    run.add_argument("--keep-going", action="store_true", help="do not stop at the first FAIL")
    run.add_argument(
        "--reuse-workers",
        action="store_true",
        help="run workloads one after another in warm worker processes, one per GPU set "
        "(imports and CUDA set-up once; replaced after anything but PASS or SKIP)",
    )
    run.add_argument("--gpus", help="comma-separated nvidia-smi indices to use (default: all)")
    run.add_argument(
        "--no-monitor", action="store_true", help="do not watch the GPUs for foreign processes"
    )
    run.add_argument(
        "--monitor-interval",
        type=positive_float,
        default=1.0,
        help="seconds between nvidia-smi polls (default 1.0)",
    )
    run.add_argument(
        "--lock-dir",
        type=Path,
        help="GPU lock files, shared by every user of "
        "the host (default: $TIRX_SUITE_LOCK_DIR or <tmp>/tirx-suite-locks; "
        "created sticky, mode 1777)",
    )
    out = p.add_argument_group("results")
    out.add_argument(
        "--out-dir",
        type=Path,
        default=Path(".bench-suite"),
        help="runs/, logs and reports/ go here (default: .bench-suite)",
    )
    out.add_argument(
        "--cache-dir", type=Path, help="root of TIRX_BENCH_CACHE_DIR (default: <out-dir>/cache)"
    )
    _compare_args(out)
    out.add_argument("--no-compare", action="store_true", help="skip the baseline comparison")
    out.add_argument("--json", action="store_true", help="print the run summary JSON")
    return p


def _compare_args(p) -> None:
    p.add_argument(
        "--baselines", type=Path, help="baselines folder (default: <git root>/baselines)"
    )
    p.add_argument(
        "--threshold",
        type=positive_float,
        metavar="PCT",
        help="fixed regression threshold in percent (default: from measured noise)",
    )


def _file_parser(cmd: str) -> argparse.ArgumentParser:
    p = Parser(prog=f"{PROG} {cmd}")
    p.add_argument("run_json", type=Path, metavar="RUN.json")
    if cmd == "promote":
        p.add_argument(
            "--merge", action="store_true", help="update only this run's rows, keep the others"
        )
        p.add_argument(
            "--force",
            action="store_true",
            help="promote despite refusals (failed rows are still left out)",
        )
        p.add_argument(
            "--prune",
            action="store_true",
            help="also remove the baseline rows this complete default sweep no "
            "longer has (each is listed); never a SKIP row",
        )
        p.add_argument("--baselines", type=Path)
    else:
        _compare_args(p)
    if cmd == "report":
        p.add_argument("--out-dir", type=Path, default=Path(".bench-suite"))
        p.add_argument("--no-compare", action="store_true")
    if cmd == "compare":
        p.add_argument("--json", action="store_true")
    return p


def main(argv=None, *, backend: Backend | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv and argv[0] in SUBCOMMANDS else "run"
    try:
        args = (_run_parser() if cmd == "run" else _file_parser(cmd)).parse_args(argv)
    except SystemExit as e:  # a usage error (one line printed) or --help
        assert isinstance(e.code, int)  # argparse exits with 2 (usage) or 0 (--help)
        return e.code
    backend = backend or Backend()
    # a kill or a closed terminal acts as Ctrl-C (a run defers them: StopSignals)
    previous = {s: _set_signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if cmd == "run":
            code = cmd_run(args, backend)
        else:
            code = {"promote": cmd_promote, "compare": cmd_compare, "report": cmd_report}[cmd](args)
        flush_stdout()
        return code
    except ConfigError as e:
        _err(f"invalid suite configuration ({len(e.problems)} problem(s)); nothing ran:")
        for problem in e.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_USAGE
    except (
        UsageError,
        UnknownKernel,
        UnknownConfig,
        RunFileError,
        PluginError,
        RegistryError,
        MetaError,
        baselines.BaselineError,
        LockError,
    ) as e:
        _err(str(e))
        return EXIT_USAGE
    except baselines.PromotionRefused as e:
        _err("promotion refused:")
        for reason in e.reasons:
            print(f"  {reason}", file=sys.stderr)
        print("  (--force promotes anyway; failed rows are never promoted)", file=sys.stderr)
        return EXIT_FAILED
    except StdoutClosed as e:
        note(stdout_closed_line(PROG, e))
        return e.code or EXIT_FAILED
    except BrokenPipeError:  # a listing written to a reader that left (`| head -1`)
        note(stdout_closed_line(PROG, StdoutClosed()))
        return EXIT_FAILED
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except OSError as e:  # e.g. a disk that filled up while writing the run
        _err(
            f"error: {e.strerror or e}{f': {e.filename}' if e.filename else ''}; fix: free "
            "space or pass a writable --out-dir"
        )
        return EXIT_FAILED
    except Exception as e:  # noqa: BLE001 - a bug must still be one line, not a traceback
        report_internal_error(_err, e)
        return EXIT_FAILED
    finally:
        for s, handler in previous.items():
            if handler is not None:
                _set_signal(s, handler)


def _set_signal(signum, handler):
    """Install a handler; the previous one (None off the main thread: nothing changed)."""
    try:
        return signal.signal(signum, handler)
    except ValueError:
        return None


def _err(msg: str) -> None:
    note(f"{PROG}: {msg}")


def select(registry, args) -> tuple[list[Workload], dict]:
    """The workloads the arguments select (validating every suite file) and a description."""
    kernels = registry.kernels
    if args.workloads:
        workloads = load_workloads_file(args.workloads, kernels)
    else:
        workloads = load_suite(registry.suite_files(), kernels)
    for fam in args.family:
        registry.family(fam)  # unknown family: UnknownKernel listing the installed ones
    for name in args.kernel:
        registry.get(name)
        if not any(w.kernel == name for w in workloads):
            raise UsageError(
                f"kernel {name!r} has no suite entry; add suite/{name}.yaml to its family"
            )
    if args.family:
        workloads = [w for w in workloads if w.family in args.family]
    if args.kernel:
        workloads = [w for w in workloads if w.kernel in args.kernel]
    if args.configs:
        labels = sorted({w.config for w in workloads})
        missing = sorted(set(args.configs) - set(labels))
        if missing:
            named = ", ".join(m + did_you_mean(m, labels) for m in missing)
            raise UsageError(
                f"no selected suite entry has config(s) {named}"
                "; `tirx-suite --list --all` shows them"
            )
        workloads = [w for w in workloads if w.config in args.configs]
    elif not (args.all or args.workloads):
        workloads = [w for w in workloads if w.default]
    if not workloads:
        raise UsageError(
            "nothing selected"
            + ("" if args.all else " (no default: true entry; --all adds the rest)")
        )
    default_sweep = not (args.workloads or args.family or args.kernel or args.configs or args.all)
    selection = {
        "default_sweep": bool(default_sweep),
        "kernels": args.kernel,
        "families": args.family,
        "configs": args.configs,
        "workloads_file": str(args.workloads) if args.workloads else None,
        "all_configs": args.all,
        "count": len(workloads),
    }
    return workloads, selection


def check_imports(registry, workloads) -> int:
    names = list(dict.fromkeys(w.kernel for w in workloads))
    for name in names:
        kernel = registry.get(name)
        try:
            kernel.load()
        except Exception as e:  # noqa: BLE001 - report it, fail the gate
            frames = traceback.extract_tb(e.__traceback__)
            where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
            _err(
                f"import of kernel {name!r} ({kernel.module}) failed: {type(e).__name__}: "
                f"{e}{where}; fix: make it importable (TIRX_KERNELS_DEBUG=1 prints the "
                "traceback)"
            )
            if os.environ.get("TIRX_KERNELS_DEBUG"):
                traceback.print_exc()
            return EXIT_FAILED
    print(f"imported {len(names)} kernel module(s) of the selected sweep: {', '.join(names)}")
    return EXIT_OK


def _validate(args) -> None:
    problem = env_git_problem()
    if problem:
        raise UsageError(problem)
    if not args.no_compare and args.baselines is None:
        args.baselines = baselines.default_dir()  # before running: a run must not lose its gate


def _choose_gpus(gpus, spec: str | None):
    if not spec:
        return gpus
    try:
        wanted = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--gpus takes comma-separated indices, got {spec!r}") from None
    if len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus names a GPU twice: {spec!r}; fix: list each index once")
    known = {g.index: g for g in gpus}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise UsageError(f"--gpus: no GPU with index {unknown}; found {sorted(known) or 'none'}")
    return [known[i] for i in wanted]


def cmd_run(args, backend: Backend) -> int:
    _validate(args)
    registry = backend.registry(args.strict)
    for b in getattr(registry, "broken", []):
        _err(f"warning: family {b.name!r} ({b.distribution}) skipped: {b.error}")
    workloads, selection = select(registry, args)
    if args.check_imports:
        return check_imports(registry, workloads)
    if args.list:
        wk, wc = (max(len(getattr(w, a)) for w in workloads) for a in ("kernel", "config"))
        for w in workloads:
            extra = " ".join(
                f"{k}={getattr(w, k)}"
                for k in ("timer", "warmup", "repeat")
                if getattr(w, k) is not None
            )
            print(
                f"{w.kernel:<{wk}}  {w.config:<{wc}}  {w.family:<12} "
                f"{'default' if w.default else '-':<8} num_gpus={w.num_gpus} {extra}".rstrip()
            )
        return EXIT_OK

    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        _err(
            "note: ignoring CUDA_VISIBLE_DEVICES; the suite acquires GPUs itself "
            "(--gpus restricts them)"
        )
    found, gpu_source = backend.gpus()
    gpus = _choose_gpus(found, args.gpus)
    out_dir = args.out_dir.resolve()
    cache_root = (args.cache_dir or out_dir / "cache").resolve()
    for option, folder in (("--out-dir", out_dir), ("--cache-dir", cache_root)):
        problem = unwritable(folder)
        if problem:  # found now, not when the first row is saved
            raise UsageError(
                f"{option} {folder} is not a writable folder ({problem}); fix: "
                f"pass {option} with a folder you can write"
            )
    run_id = new_run_id()
    for n in range(2, 1000):  # same second, same process (tests): keep both runs
        if not (out_dir / "runs" / f"{run_id}.json").exists():
            break
        run_id = f"{new_run_id()}-{n}"
    run_path = out_dir / "runs" / f"{run_id}.json"
    run_dir = out_dir / "runs" / run_id
    prov = provenance(gpus, gpu_source, registry)
    use_monitor = bool(gpus) and not args.no_monitor and gpu_source == "nvidia-smi"
    options = {
        "rounds": args.rounds,
        "cooldown_s": args.cooldown,
        "timeout_s": args.timeout,
        "max_retries": args.retries,
        "retry_delay_s": args.retry_delay,
        "keep_going": args.keep_going,
        "reuse_workers": args.reuse_workers,
        "monitor": "nvidia-smi"
        if use_monitor
        else f"off ({'--no-monitor' if args.no_monitor else 'needs nvidia-smi'})",
    }
    started = time.time()
    if not gpus:
        _err(f"no GPU: {gpu_source}; every workload is SKIP")
    _err(
        f"run {run_id}: {len(workloads)} workload(s) on {len(gpus)} GPU(s) "
        f"[{', '.join(f'{g.index}: {g.name}' for g in gpus) or 'none'}]; "
        f"logs in {run_dir / 'logs'}"
    )

    def save_partial(rows, remaining):
        outcome = Outcome(
            rows, [(w, "not finished (run in progress or killed)") for w in remaining]
        )
        try:
            save_json(
                run_path,
                run_document(
                    run_id, started, outcome, selection=selection, options=options, prov=prov
                ),
            )
        except OSError as e:  # e.g. a full disk: the run goes on; the final save says more
            _err(f"warning: could not save the partial run to {run_path}: {e.strerror or e}")

    events = Progress(workloads, save_partial)
    pool = backend.pool(gpus, args.lock_dir)  # an unusable lock file: LockError, nothing ran
    monitor = backend.monitor(args.monitor_interval) if use_monitor else NullMonitor()
    executor = backend.executor(
        run_dir,
        rounds=args.rounds,
        cooldown_s=args.cooldown,
        cache_root=cache_root,
        versions=prov["versions"],
        reuse_workers=args.reuse_workers,
    )
    # a stop signal stops new starts at a safe point; later ones cannot cut the writing short
    with StopSignals() as stop:
        scheduler = Scheduler(
            executor,
            pool,
            monitor,
            timeout_s=args.timeout,
            max_retries=args.retries,
            retry_delay_s=args.retry_delay,
            keep_going=args.keep_going,
            events=events,
            no_gpu_reason=f"no GPU: {gpu_source}",
            stop_check=stop.check,
            **backend.scheduler_options(),
        )
        try:
            outcome = scheduler.run(workloads)
        finally:
            monitor.close()
            pool.close()
            getattr(executor, "close", lambda: None)()
        doc = run_document(
            run_id, started, outcome, selection=selection, options=options, prov=prov
        )
        comparison = None
        if not args.no_compare:
            try:
                comparison = _compare(doc, args)
                doc["comparison"] = comparison
            except baselines.BaselineError as e:  # the run is kept; only the gate failed
                doc["comparison_error"] = str(e)
        save_json(run_path, doc)
        report = write_report(doc, comparison, out_dir)
        code = exit_code(doc, comparison)
        _summarise(doc, comparison, run_path, report, code)
        if args.json:  # stdout gone: the run JSON on disk has it all
            emit(
                json.dumps(summary_json(doc, run_path, report, code), indent=1),
                saved=run_path,
                code=code,
            )
    return code


def _compare(doc: dict, args) -> dict:
    threshold = None if args.threshold is None else args.threshold / 100.0
    return baselines.compare(doc, args.baselines or baselines.default_dir(), threshold=threshold)


def exit_code(doc: dict, comparison: dict | None) -> int:
    if doc.get("interrupted"):
        return EXIT_INTERRUPTED
    if any(r["status"] in FAILED for r in doc["rows"]) or doc.get("comparison_error"):
        return EXIT_FAILED
    if comparison and comparison["regressions"]:
        return EXIT_REGRESSION
    return EXIT_OK


def write_report(doc: dict, comparison: dict | None, out_dir: Path) -> Path:
    folder = Path(out_dir) / "reports" / doc["run_id"]
    folder.mkdir(parents=True, exist_ok=True)
    plot = write_ratio_plot(doc["rows"], folder / "ratios.png")
    note = "" if plot else "No measured ratio to plot."
    path = folder / "report.md"
    save_text(path, run_report(doc, comparison, plot.name if plot else None, note))
    return path


def summary_json(doc: dict, run_path: Path, report: Path, code: int) -> dict:
    return {
        "run_id": doc["run_id"],
        "run_json": str(run_path),
        "report": str(report),
        "exit_code": code,
        "interrupted": doc["interrupted"],
        "stopped": doc["stopped"],
        "summary": doc["summary"],
        "regressions": (doc.get("comparison") or {}).get("regressions"),
        "rows": [
            {k: r.get(k) for k in ("kernel", "config", "status", "ratio", "impls_us")}
            | {"detail": (r.get("detail") or "").split("\n")[0]}
            for r in doc["rows"]
        ],
        "not_run": doc["not_run"],
    }


def _summarise(doc, comparison, run_path, report, code) -> None:
    s = doc["summary"]
    parts = ", ".join(
        f"{s[k]} {k}" for k in ("PASS", "SKIP", "FAIL", "TIMEOUT", "BASELINE_ERROR") if s.get(k)
    )
    _err(
        f"{parts or 'nothing ran'}"
        + (f", {s['not_run']} not run" if s["not_run"] else "")
        + f" in {doc['duration_s']:g} s"
    )
    if doc.get("stopped"):
        _err(f"stopped: {doc['stopped']}")
    if doc.get("comparison_error"):
        _err(f"no comparison: {doc['comparison_error']}")
    if comparison is not None:
        regress = [r for r in comparison["rows"] if r["verdict"] == "regression"]
        for r in regress:
            _err(
                f"REGRESSION {r['kernel']} {r['config']}: {r['before_us']:.2f} -> "
                f"{r['after_us']:.2f} us ({r['change']:+.1%} > {r['threshold']:.1%})"
            )
        if comparison["rows"] and not any(comparison["baselines"].values()):
            _err("no baseline for this GPU model yet (tirx-suite promote RUN.json)")
    _err(f"run: {run_path}\nreport: {report}\nexit {code}")


class Progress(Events):
    """Progress lines on stderr (n/N, kernel, elapsed, ETA); saves the run after each row."""

    def __init__(self, workloads, save, out=None, clock=time.monotonic):
        self.workloads, self.save, self.out, self.clock = workloads, save, out, clock
        self.t0 = clock()
        self.rows = []

    def _print(self, msg: str) -> None:
        if self.out is None:
            note(msg)
        else:
            print(msg, file=self.out, flush=True)

    def _times(self, done: int, total: int) -> str:
        elapsed = self.clock() - self.t0
        eta = f", ETA {_hms(elapsed / done * (total - done))}" if done and done < total else ""
        return f"{_hms(elapsed)} elapsed{eta}"

    def start(self, workload, attempt, gpus, started, total) -> None:
        again = f" (attempt {attempt + 1})" if attempt else ""
        where = ",".join(str(g.index) for g in gpus)
        self._print(
            f"[{started}/{total}] {workload.kernel} {workload.config} on GPU {where}"
            f"{again} | {self._times(len(self.rows), total)}"
        )

    def retry(self, workload, attempt, delay_s) -> None:
        self._print(
            f"  {INTERFERED} {workload.kernel} {workload.config}: {attempt.detail}; "
            f"requeued in {delay_s:g} s"
        )

    def finish(self, row, done, total) -> None:
        self.rows.append(row)
        r = row.result
        bench = (r.bench if r and isinstance(r.bench, dict) else None) or {}
        rt = ratio(bench.get("impls") or {})
        note = f" ratio {rt:.3f}" if rt is not None else ""
        if row.status != "PASS" and row.detail:
            note += f": {row.detail.splitlines()[0][:160]}"
        secs = f" {r.seconds:.1f}s" if r else ""
        self._print(
            f"  {row.status:<14} {row.workload.kernel} {row.workload.config}{secs}"
            f"{note} [{done}/{total} done, {self._times(done, total)}]"
        )
        finished = {x.workload.key for x in self.rows}
        self.save(list(self.rows), [w for w in self.workloads if w.key not in finished])


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def cmd_promote(args) -> int:
    if args.prune and args.merge:
        raise UsageError(
            "--prune needs a complete default sweep (promote without --merge); "
            "a targeted run cannot tell which rows left the sweep"
        )
    run = load_run(args.run_json)
    done = baselines.promote(
        run,
        args.baselines or baselines.default_dir(),
        merge=args.merge,
        force=args.force,
        prune=args.prune,
    )
    for model, kernel, config in done.pruned:
        print(f"removed {model} {kernel} {config} (not in this sweep)")
    if done.kept:
        print(
            f"kept {done.kept} baseline row(s) this run did not measure (a SKIP, or not "
            "selected)" + ("" if args.merge else "; --prune removes rows no longer in the sweep")
        )
    for path in done.written:
        print(f"wrote {path}")
    return EXIT_OK


def cmd_compare(args) -> int:
    from .report import comparison_section

    run = load_run(args.run_json)
    threshold = None if args.threshold is None else args.threshold / 100.0
    c = baselines.compare(run, args.baselines or baselines.default_dir(), threshold=threshold)
    print(json.dumps(c, indent=1) if args.json else comparison_section(c))
    return EXIT_REGRESSION if c["regressions"] else EXIT_OK


def cmd_report(args) -> int:
    run = load_run(args.run_json)
    comparison = None if args.no_compare else _compare(run, args)
    path = write_report(run, comparison, args.out_dir.resolve())
    print(f"wrote {path}")
    return EXIT_OK
