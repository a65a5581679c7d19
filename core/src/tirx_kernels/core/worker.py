# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Child process of the runner: run one config through the family's protocol hook.

``python -m tirx_kernels.core.worker REQUEST.json RESULT.json`` writes one JSON result:
PASS, FAIL (AssertionError, or a compile error), SKIP (unittest.SkipTest) or ERROR.
``python -m tirx_kernels.core.worker --serve`` runs one request after another, each named
on a stdin line ``REQUEST.json<TAB>RESULT.json<TAB>LOG``, its output sent to LOG: the imports and
CUDA set-up are paid once (``runner.WorkerPool``); it exits at the end of stdin.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import unittest
from pathlib import Path

from . import defaults
from .defaults import CompileError
from .lifeline import die_with_parent
from .meta import strip_label
from .registry import Registry
from .runner import ERROR, FAIL, PASS, SKIP, Request


def execute(request: Request) -> dict:
    registry = Registry.load()
    kernel = registry.get(request.kernel)
    bench = request.action == "bench" or request.options.get("bench", False)
    config = strip_label(kernel.config(request.label, bench=bench))
    module = kernel.load()
    hook = registry.pm.hook
    if request.action == "prebuild":
        return {"status": PASS, **defaults.prebuild(kernel, module, config)}
    if request.action == "bench":
        result = hook.tirx_kernels_run_bench(
            kernel=kernel, module=module, config=config, options=request.options
        )
        if not isinstance(result, dict) or "impls" not in result:
            raise TypeError(f"run_bench must return the bench result dict, got {result!r}")
        return {"status": PASS, "bench": result}
    if request.action != "test":
        raise ValueError(f"unknown action {request.action!r}")
    outcome = hook.tirx_kernels_run_test(kernel=kernel, module=module, config=config)
    extra = outcome if isinstance(outcome, dict) else {}
    return {"status": PASS, "launched": extra.get("launched"), "detail": extra.get("detail", "")}


def run_one(request_path: Path, result_path: Path) -> None:
    """Run the request at ``request_path``; write its result atomically to ``result_path``."""
    request = Request(**json.loads(request_path.read_text()))
    try:
        result = execute(request)
    except unittest.SkipTest as e:
        result = {"status": SKIP, "detail": str(e)}
    except AssertionError as e:
        traceback.print_exc()
        result = {"status": FAIL, "detail": f"AssertionError: {e}"}
    except CompileError as e:
        traceback.print_exc()
        result = {"status": FAIL, "detail": f"compile failed: {e}"}
    except Exception as e:  # noqa: BLE001 - every other failure is reported, not raised
        traceback.print_exc()
        result = {"status": ERROR, "detail": f"{type(e).__name__}: {e}"}
    sys.stdout.flush()
    sys.stderr.flush()
    # atomic: a child killed mid-write leaves no result (a crash), never a torn one
    partial = result_path.with_suffix(".partial")
    partial.write_text(json.dumps(result, default=str))
    os.replace(partial, result_path)


def serve(lines) -> None:
    """Run each ``REQUEST RESULT LOG`` line's request, its stdout and stderr (the C-level
    ones too) going to LOG."""
    for line in lines:
        request_path, result_path, log_path = line.rstrip("\n").split("\t")
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        run_one(Path(request_path), Path(result_path))


def main(argv=None) -> int:
    die_with_parent()  # a hung config must not outlive a killed tirx-run / tirx-suite
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--serve"]:
        serve(sys.stdin)
        return 0
    run_one(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
