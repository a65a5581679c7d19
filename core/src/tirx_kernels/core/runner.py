# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Run one kernel config in its own process, with a timeout.

A sticky CUDA error, an illegal address or a hang then costs one config, not the run.
The child is ``python -m tirx_kernels.core.worker REQUEST RESULT``: it reads a JSON request
and writes a JSON result; its stdout/stderr go to a log file. No result file means it
crashed (ERROR); a run past its deadline is killed with its whole process group (TIMEOUT).
The child dies with this process (:mod:`.lifeline`), so no worker outlives its runner.

:class:`WorkerPool` runs configs in warm workers instead (``worker --serve``): a worker
takes one config after another, so the imports and CUDA set-up (about half of a bench
config's time; README) are paid once; a worker is retired after any config that does not PASS or
SKIP, and a crash or timeout still costs only its config.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .lifeline import child_env

PASS, FAIL, SKIP, ERROR, TIMEOUT = "PASS", "FAIL", "SKIP", "ERROR", "TIMEOUT"
STATUSES = (PASS, FAIL, SKIP, ERROR, TIMEOUT)
FAILED = {FAIL, ERROR, TIMEOUT}
LOG_TAIL_LINES = 30


@dataclass
class Result:
    kernel: str
    label: str
    action: str  # "test", "bench" or "prebuild"
    status: str
    seconds: float = 0.0
    detail: str = ""
    launched: bool | None = None  # test: False when only compiled (no suitable GPU)
    bench: dict | None = None  # bench: the full bench result (microseconds)
    log: str | None = None  # path of the full child log, when kept
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, {})}


@dataclass(frozen=True)
class Request:
    kernel: str
    label: str
    action: str
    # bench: warmup/repeat/timer/rounds/cooldown_s; prebuild: bench=True for a label of the
    # bench matrix
    options: dict = field(default_factory=dict)


class ChildRun:
    """One config running in a child process; poll it, wait for it, or kill it."""

    def __init__(
        self,
        request: Request,
        *,
        env: dict | None = None,
        log_path: Path | None = None,
        python: str | None = None,
        worker: subprocess.Popen | None = None,
    ):
        self.request = request
        self._tmp = tempfile.TemporaryDirectory(prefix="tirx-run-")
        tmp = Path(self._tmp.name)
        self.result_path = tmp / "result.json"
        request_path = tmp / "request.json"
        request_path.write_text(json.dumps(asdict(request)))
        self.keep_log = log_path is not None
        self.log_path = Path(log_path) if log_path else tmp / "child.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.warm = worker is not None
        self._log = open(self.log_path, "wb")
        self.started = time.monotonic()
        if worker is not None:  # a warm worker: it sends this config's output to the log
            assert worker.stdin is not None
            worker.stdin.write(f"{request_path}\t{self.result_path}\t{self.log_path}\n".encode())
            worker.stdin.flush()
            self.proc = worker
            return
        self.proc = _spawn(
            [str(request_path), str(self.result_path)], env, python, stdout=self._log
        )

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def pid(self) -> int:
        return self.proc.pid  # the child (or warm worker) leads its own process group

    def poll(self) -> bool:
        """True once the child has exited (a warm worker: once this config's result is
        written or the worker has exited)."""
        exited = self.proc.poll() is not None
        return exited or (self.warm and self.result_path.exists())

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def wait(self, timeout: float | None) -> Result:
        """Wait up to ``timeout`` seconds, then collect (a late child is killed: TIMEOUT)."""
        if self.warm:  # the worker lives on: wait for the result file
            while not self.poll():
                if timeout is not None and self.elapsed > timeout:
                    return self.expire(timeout)
                time.sleep(0.02)
            return self.collect()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            assert timeout is not None  # only a timed wait expires
            return self.expire(timeout)
        return self.collect()

    def expire(self, timeout: float) -> Result:
        """Kill a child that ran past its deadline: TIMEOUT."""
        self.kill()
        return self._finish(TIMEOUT, f"no result after {timeout:g} s; killed")

    def collect(self) -> Result:
        if self.result_path.exists():  # written atomically by the worker
            data = json.loads(self.result_path.read_text())
            return self._finish(data.pop("status"), data.pop("detail", ""), **data)
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return self._finish(ERROR, f"child crashed ({how}) without a result:\n{self.log_tail()}")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _finish(self, status: str, detail: str, **fields) -> Result:
        seconds = round(self.elapsed, 3)
        if status in FAILED and detail and "\n" not in detail:
            detail = f"{detail}\n{self.log_tail()}"
        self._log.close()
        result = Result(
            self.request.kernel,
            self.request.label,
            self.request.action,
            status,
            seconds,
            detail,
            log=str(self.log_path) if self.keep_log else None,
            **fields,
        )
        if not self.keep_log:
            self._tmp.cleanup()
        return result


def _spawn(args: list[str], env: dict | None, python: str | None, **streams) -> subprocess.Popen:
    """``python -m tirx_kernels.core.worker ARGS`` in its own process group (kill takes it
    all), with the lifeline's environment."""
    environ = {**os.environ, **(env or {}), **child_env()}
    environ.setdefault("PYTHONUNBUFFERED", "1")
    streams.setdefault("stdin", subprocess.DEVNULL)
    streams.setdefault("stderr", subprocess.STDOUT)
    return subprocess.Popen(
        [python or sys.executable, "-m", "tirx_kernels.core.worker", *args],
        env=environ,
        start_new_session=True,
        **streams,
    )


class WorkerPool:
    """Warm workers for :class:`ChildRun`: :meth:`start` hands a config to an idle worker
    (or a new one), :meth:`release` takes the worker back after a PASS or SKIP and retires
    it otherwise (a failed config may leave a sticky CUDA error behind), :meth:`close` ends
    them all."""

    def __init__(self, *, env: dict | None = None, python: str | None = None):
        self.env, self.python = env, python
        self._idle: list[subprocess.Popen] = []
        self._busy: list[subprocess.Popen] = []

    def start(self, request: Request, *, log_path: Path | None = None) -> ChildRun:
        while self._idle and self._idle[-1].poll() is not None:
            self._idle.pop()  # died while idle (its parent's lifeline, a signal)
        worker = self._idle.pop() if self._idle else self._new()
        try:
            child = ChildRun(request, log_path=log_path, worker=worker)
        except BrokenPipeError:  # it died after the check: a fresh one
            _end(worker)
            worker = self._new()
            child = ChildRun(request, log_path=log_path, worker=worker)
        self._busy.append(worker)
        return child

    def _new(self) -> subprocess.Popen:
        streams = {"stdin": subprocess.PIPE, "stdout": subprocess.DEVNULL}
        return _spawn(["--serve"], self.env, self.python, **streams)

    def release(self, child: ChildRun, status: str) -> None:
        """Take back ``child``'s worker, whose config ended with ``status``."""
        self._busy.remove(child.proc)
        if status in (PASS, SKIP) and child.proc.poll() is None:
            self._idle.append(child.proc)
        else:
            _end(child.proc)

    def close(self) -> None:
        for worker in self._idle + self._busy:
            _end(worker)
        self._idle, self._busy = [], []


def _end(worker: subprocess.Popen) -> None:
    """Kill a worker's process group and reap it."""
    if worker.poll() is None:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.wait()
    if worker.stdin:
        worker.stdin.close()


def run_config(
    request: Request,
    *,
    timeout: float | None,
    env: dict | None = None,
    log_path: Path | None = None,
) -> Result:
    """Run one config to completion in a child process."""
    child = ChildRun(request, env=env, log_path=log_path)
    try:
        return child.wait(timeout)
    except BaseException:  # Ctrl-C: take the child down with us
        child.kill()
        raise
