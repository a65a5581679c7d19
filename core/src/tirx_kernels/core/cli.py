# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-run``: list kernels and families, test and bench kernel configs, prebuild their
kernels for a GPU machine.

Exit codes: 0 nothing failed, 1 a FAIL/ERROR/TIMEOUT, 2 a usage error (unknown kernel,
family or label; broken families under --strict), 130 interrupted (Ctrl-C, SIGTERM or
SIGHUP: the running children are killed and reaped, what finished is still printed).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from . import kernel_cache
from .cliargs import (
    Parser,
    add_config_option,
    non_negative_float,
    positive_float,
    positive_int,
    report_internal_error,
    unwritable,
)
from .impls import is_ours, ratio
from .interrupts import StopSignals, raise_interrupt
from .meta import MetaError, strip_label
from .output import StdoutClosed, emit, flush_stdout, note, stdout_closed_line
from .plugins import PluginError
from .registry import Registry, RegistryError, UnknownConfig, UnknownKernel
from .runner import FAILED, STATUSES, ChildRun, Request, Result, WorkerPool

DEFAULT_TIMEOUT = 900.0


class UsageError(Exception):
    pass


FAMILY_OPTION: dict[str, Any] = dict(
    action="append", dest="families", metavar="NAME", help="a family (repeatable); default: all"
)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="tirx-run", description=__doc__.splitlines()[0])
    strict_help = "a family that fails to load is an error (env TIRX_KERNELS_STRICT=1)"
    p.add_argument("--strict", action="store_true", default=None, help=strict_help)
    sub = p.add_subparsers(dest="command", required=True)
    # --strict is also accepted after the subcommand; SUPPRESS keeps one given before it
    common = Parser(add_help=False)
    common.add_argument(
        "--strict", action="store_true", default=argparse.SUPPRESS, help=strict_help
    )

    ls = sub.add_parser(
        "list", parents=[common], help="kernels with family, archs and config labels"
    )
    ls.add_argument("--family", **FAMILY_OPTION)
    ls.add_argument("--format", choices=("text", "json", "markdown"), default="text")

    pl = sub.add_parser("plugins", parents=[common], help="installed families and broken plugins")
    pl.add_argument("--format", choices=("text", "json"), default="text")

    for name, help_ in (
        ("test", "compile, launch and validate configs (compile only without a suitable GPU)"),
        ("bench", "time configs against their references"),
        (
            "prebuild",
            f"build the kernels of every config and bench config into ${kernel_cache.ENV}, "
            "as a GPU machine of the same TIRx and nvcc loads them (no GPU needed)",
        ),
    ):
        c = sub.add_parser(name, parents=[common], help=help_)
        c.add_argument(
            "--kernel",
            action="append",
            dest="kernels",
            metavar="NAME",
            required=name == "bench",
            help="a kernel (repeatable); default: all",
        )
        add_config_option(c, "a config label (repeatable); default: every config")
        c.add_argument("--json", action="store_true", help="print results as JSON on stdout")
        c.add_argument(
            "--timeout",
            type=positive_float,
            default=DEFAULT_TIMEOUT,
            help=f"seconds per config before TIMEOUT (default {DEFAULT_TIMEOUT:g})",
        )
        c.add_argument("--log-dir", type=Path, help="keep each config's full child log here")
        c.add_argument(
            "--reuse-workers",
            action="store_true",
            help="run configs one after another in warm worker processes (imports and CUDA "
            "set-up once per worker; a worker is replaced after a config that does not PASS "
            "or SKIP)",
        )
        if name != "bench":
            c.add_argument("--family", **FAMILY_OPTION)
            c.add_argument(
                "-j",
                "--jobs",
                type=positive_int,
                default=1,
                help="configs run in parallel (each in its own process)",
            )
        else:
            c.add_argument("--timer", choices=("proton", "event", "cudagraph_proton"))
            c.add_argument("--warmup", type=non_negative_float, help="warmup budget in ms")
            c.add_argument("--repeat", type=positive_float, help="repeat budget in ms")
            c.add_argument("--rounds", type=positive_int, default=5)
            c.add_argument(
                "--cooldown", type=non_negative_float, default=1.0, help="seconds before each impl"
            )
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    # `timeout`, a CI cancel, a closed terminal: as Ctrl-C (a run defers them: StopSignals)
    previous = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        registry = Registry.load(strict=args.strict)
        code = COMMANDS[args.command](registry, args)
        flush_stdout()
        return code
    except (UsageError, UnknownKernel, UnknownConfig) as e:
        note(f"tirx-run: error: {e}")
        return 2
    except (PluginError, RegistryError, MetaError) as e:
        note(f"tirx-run: error: {e}")
        return 2
    except StdoutClosed as e:
        note(stdout_closed_line("tirx-run", e))
        return e.code or 1
    except BrokenPipeError:  # a listing written to a reader that left (`| head -1`)
        note(stdout_closed_line("tirx-run", StdoutClosed()))
        return 1
    except KeyboardInterrupt:
        note("tirx-run: interrupted")
        return 130
    except Exception as e:  # noqa: BLE001 - a bug must still be one line, not a traceback
        report_internal_error(lambda line: note(f"tirx-run: {line}"), e)
        return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _warn_broken(registry: Registry) -> None:
    for b in registry.broken:
        note(f"warning: family {b.name!r} ({b.distribution}) skipped: {b.error}")


def cmd_list(registry: Registry, args) -> int:
    _warn_broken(registry)
    kernels = registry.select(families=args.families or ())
    if args.format == "json":
        print(json.dumps([k.to_json() for k in kernels], indent=2))
        return 0
    if args.format == "markdown":
        print(kernel_table(kernels))
        return 0
    for k in sorted(kernels, key=lambda k: (k.family, k.name)):
        print(f"{k.name:<36} {k.family:<16} {','.join(k.archs):<10} {', '.join(k.labels)}")
    return 0


def kernel_table(kernels) -> str:
    """The README's kernel table (a test keeps the README in sync with the registry)."""
    rows = ["| kernel | family | archs | configs | bench configs |", "|---|---|---|---|---|"]
    for k in sorted(kernels, key=lambda k: (k.family, k.name)):
        rows.append(
            f"| `{k.name}` | {k.family} | {', '.join(k.archs)} | {len(k.labels)} "
            f"| {len(k.bench_labels)} |"
        )
    return "\n".join(rows)


def cmd_plugins(registry: Registry, args) -> int:
    counts = {f.family.name: 0 for f in registry.families}
    for k in registry.kernels.values():
        counts[k.family] += 1
    families: list[dict[str, Any]] = [
        {
            "name": f.family.name,
            "distribution": f.distribution,
            "version": f.version,
            "license": f.family.license.expression,
            "kernels": counts[f.family.name],
        }
        for f in registry.families
    ]
    broken = [
        {"name": b.name, "distribution": b.distribution, "error": b.error} for b in registry.broken
    ]
    if args.format == "json":
        print(json.dumps({"families": families, "broken": broken}, indent=2))
        return 0
    for f in families:
        print(
            f"{f['name']:<16} {f['distribution'] + ' ' + f['version']:<34} "
            f"{f['license']:<28} {f['kernels']} kernel(s)"
        )
    for b in broken:
        print(f"BROKEN {b['name']:<9} {b['distribution']}: {b['error']}")
    return 0


def _requests(registry: Registry, args, action: str) -> list[Request]:
    names = list(dict.fromkeys(args.kernels or []))  # repeats run once
    if args.configs and len(names) != 1:
        raise UsageError("--config needs exactly one --kernel (labels belong to one kernel)")
    kernels = registry.select(names, getattr(args, "families", None) or ())
    bench = action == "bench"
    options = {}
    if bench:
        options = {"rounds": args.rounds, "cooldown_s": args.cooldown}
        # forwarded only when given, so each timer keeps its own defaults
        options.update(
            {
                k: v
                for k, v in (
                    ("timer", args.timer),
                    ("warmup", args.warmup),
                    ("repeat", args.repeat),
                )
                if v is not None
            }
        )
    requests = []
    for k in kernels:
        labels = args.configs or (k.bench_labels if bench else k.labels)
        for label in labels:
            k.config(label, bench=bench)  # unknown label: usage error listing what exists
            requests.append(Request(k.name, label, action, options))
    if not requests:
        raise UsageError("nothing selected: no kernels installed for that selection")
    _check_log_dir(args)
    return requests


def _check_log_dir(args) -> None:
    problem = args.log_dir and unwritable(args.log_dir)
    if problem:  # found now, not halfway through the run
        raise UsageError(
            f"--log-dir {args.log_dir} is not a writable folder ({problem}); "
            "fix: pass a folder you can write, or leave --log-dir out"
        )


def _run_all(
    requests: list[Request], args, stop: StopSignals, jobs: int = 1
) -> tuple[list[Result], bool]:
    """Run requests in child processes, ``jobs`` at a time, reporting progress on stderr.

    Returns the finished results in request order and whether the run was interrupted
    (a stop signal: running children are killed, finished results are kept). Every exit,
    an error included, kills and reaps the running children.
    """
    total, done, pending = len(requests), [], list(enumerate(requests))
    running: list[tuple[int, ChildRun]] = []
    pool = WorkerPool() if args.reuse_workers else None
    started = time.monotonic()
    interrupted = False
    try:
        while pending or running:
            while pending and len(running) < jobs:
                i, req = pending.pop(0)
                log = (
                    args.log_dir / f"{req.kernel}.{req.label}.{req.action}.log"
                    if args.log_dir
                    else None
                )
                note(f"[{i + 1}/{total}] {req.kernel} {req.label} ...")
                child = pool.start(req, log_path=log) if pool else ChildRun(req, log_path=log)
                running.append((i, child))
            time.sleep(0.05)
            stop.check()
            for item in list(running):
                i, child = item
                if child.poll():
                    result = child.collect()
                elif child.elapsed > args.timeout:
                    result = child.expire(args.timeout)
                else:
                    continue
                running.remove(item)
                if pool:
                    pool.release(child, result.status)
                done.append((i, result))
                _progress(result, len(done), total, time.monotonic() - started)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for _, child in running:
            child.kill()
        if pool:
            pool.close()
    if interrupted:
        note(
            f"tirx-run: interrupted after {len(done)}/{total} config(s); killed "
            f"{len(running)} running"
        )
    return [r for _, r in sorted(done, key=lambda x: x[0])], interrupted


def _progress(r: Result, n: int, total: int, elapsed: float) -> None:
    why = ""
    if r.status == "PASS" and r.launched is False:
        why = " (compile only; launch skipped)"
    elif r.status != "PASS":
        why = f": {r.detail.splitlines()[0] if r.detail else ''}"
    note(
        f"  {r.status:<7} {r.kernel} {r.label} {r.seconds:.1f}s{why}  "
        f"[{n}/{total} done, {elapsed:.0f}s]"
    )


def _summary(results: list[Result]) -> dict:
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    return {
        "total": len(results),
        **counts,
        "compile_only": sum(r.launched is False for r in results),
    }


def cmd_test(registry: Registry, args) -> int:
    _warn_broken(registry)
    requests = _requests(registry, args, "test")
    with StopSignals() as stop:  # until the results are out, a stop signal cannot cut in
        results, interrupted = _run_all(requests, args, stop, jobs=args.jobs)
        return _report_test(results, interrupted, args)


def _report_test(results: list[Result], interrupted: bool, args) -> int:
    summary = _summary(results)
    doc = {
        "results": [r.to_json() for r in results],
        "summary": summary,
        "interrupted": interrupted,
    }
    if args.json:
        text = json.dumps(doc, indent=2)
    else:
        text = "".join(
            f"--- {r.status} {r.kernel} {r.label}\n{r.detail}\n\n"
            for r in results
            if r.status in FAILED
        ) + _summary_line(summary)
    code = _exit_code(results, interrupted)
    emit(text, results=doc, code=code, prog="tirx-run")  # stdout gone: saved to a file
    return code


def _exit_code(results: list[Result], interrupted: bool) -> int:
    if interrupted:
        return 130
    return 1 if any(r.status in FAILED for r in results) else 0


def _summary_line(s: dict) -> str:
    parts = ", ".join(f"{s[k]} {k}" for k in STATUSES if s[k])
    extra = f" ({s['compile_only']} compile only)" if s.get("compile_only") else ""
    return f"{s['total']} config(s): {parts}{extra}"


def cmd_prebuild(registry: Registry, args) -> int:
    where = kernel_cache.folder()
    if where is None:
        raise UsageError(
            f"{kernel_cache.ENV} is not set; fix: name the folder to fill, e.g. "
            f"{kernel_cache.ENV}=/tmp/kc tirx-run prebuild ..., and carry it to the GPU machine"
        )
    problem = unwritable(where)
    if problem:
        raise UsageError(f"{kernel_cache.ENV}={where} is not a writable folder ({problem})")
    _warn_broken(registry)
    requests = _prebuild_requests(registry, args)
    with StopSignals() as stop:
        results, interrupted = _run_all(requests, args, stop, jobs=args.jobs)
        return _report_test(results, interrupted, args)


def _prebuild_requests(registry: Registry, args) -> list[Request]:
    """A request per config, then per bench config whose parameters no config has (a
    config's kernels are its parameters'), each label of ``--config`` in either matrix."""
    names = list(dict.fromkeys(args.kernels or []))
    if args.configs and len(names) != 1:
        raise UsageError("--config needs exactly one --kernel (labels belong to one kernel)")
    requests = []
    for k in registry.select(names, args.families or ()):
        tested = [strip_label(c) for c in k.configs]
        wanted = [(label, False) for label in k.labels]
        wanted += [(c["label"], True) for c in k.bench_matrix if strip_label(c) not in tested]
        for label in args.configs or ():
            if label not in k.labels and label not in k.bench_labels:
                k.config(label)  # unknown label: usage error listing what exists
        if args.configs:
            wanted = [w for w in wanted if w[0] in args.configs]
        for label, bench in wanted:
            requests.append(Request(k.name, label, "prebuild", {"bench": True} if bench else {}))
    if not requests:
        raise UsageError("nothing selected: no kernels installed for that selection")
    _check_log_dir(args)
    return requests


def cmd_bench(registry: Registry, args) -> int:
    _warn_broken(registry)
    requests = _requests(registry, args, "bench")
    with StopSignals() as stop:
        results, interrupted = _run_all(requests, args, stop)
        return _report_bench(results, interrupted, args)


def _report_bench(results: list[Result], interrupted: bool, args) -> int:
    rows = [_bench_row(r) for r in results]
    doc: dict[str, Any] = {
        "results": rows,
        "summary": _summary(results),
        "interrupted": interrupted,
    }
    if args.json:
        text = json.dumps(doc, indent=2)
    else:
        text = "\n".join([*map(_format_bench_row, rows), _summary_line(doc["summary"])])
    code = _exit_code(results, interrupted)
    emit(text, results=doc, code=code, prog="tirx-run")
    return code


def _bench_row(r: Result) -> dict:
    row: dict[str, Any] = {"kernel": r.kernel, "config": r.label, "status": r.status}
    if r.bench:
        impls = r.bench.get("impls", {})
        row.update(
            impls_us=impls,
            errors=r.bench.get("errors", {}),
            skipped=r.bench.get("skipped", {}),
            timer=r.bench.get("timer"),
            ratio=ratio(impls),
            round_samples=r.bench.get("round_samples", {}),
        )
    if r.detail:
        row["detail"] = r.detail
    return row


def _format_bench_row(row: dict) -> str:
    head = f"{row['kernel']} {row['config']}"
    if row["status"] != "PASS":
        return f"{head}: {row['status']} {row.get('detail', '')}"
    lines = [f"{head}  (timer: {row['timer']})"]
    for name, us in sorted(row["impls_us"].items(), key=lambda kv: (not is_ours(kv[0]), kv[0])):
        lines.append(f"  {name:<24} {us:10.2f} us")
    for name, err in row["errors"].items():
        lines.append(f"  {name:<24} BASELINE_ERROR: {err}")
    for name, why in row["skipped"].items():
        lines.append(f"  {name:<24} SKIP: {why}")
    r = row["ratio"]
    lines.append(f"  ratio fastest-reference/ours: {'n/a' if r is None else f'{r:.3f}'}")
    return "\n".join(lines)


COMMANDS = {
    "list": cmd_list,
    "plugins": cmd_plugins,
    "test": cmd_test,
    "bench": cmd_bench,
    "prebuild": cmd_prebuild,
}

if __name__ == "__main__":
    sys.exit(main())
