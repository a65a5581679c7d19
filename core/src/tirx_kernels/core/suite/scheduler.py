# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The scheduling loop: workloads onto free GPUs, one child each, until all are done.

Pure logic over three interfaces, so CPU tests drive it with fakes:

- executor: ``start(workload, attempt, gpus) -> handle``; a handle has ``pid``, ``poll()``
  (True once exited), ``collect() -> Result``, ``expire(timeout) -> Result``, ``kill()``;
  optionally ``finished(handle, status)``, called once a handle is done with (warm workers).
- pool: ``total``, ``free_count()``, ``acquire(n) -> [Gpu] | None`` (all or nothing),
  ``release(gpus)``.
- monitor: ``watch(key, gpus)`` before a start, ``attach(key, pid)`` after it,
  ``stop(key) -> [foreign process]`` when the child is done.

Larger GPU claims start first; a claim that cannot start reserves its GPUs, so smaller
claims behind it never starve it. Results: PASS, SKIP, FAIL, TIMEOUT, BASELINE_ERROR;
INTERFERED is requeued after a delay (bounded retries, then FAIL). The first real failure
stops new starts (fail-fast) unless ``keep_going``; running children finish. Ctrl-C kills
every child and returns what finished (``interrupted``); so does any other exit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ..impls import is_ours
from ..runner import ERROR as CHILD_ERROR
from ..runner import Result
from . import BASELINE_ERROR, FAIL, FAILED, INTERFERED, PASS, SKIP, TIMEOUT
from .config import Workload


@dataclass
class Attempt:
    status: str
    detail: str
    gpus: list[str]  # UUIDs
    seconds: float
    interference: list[str] = field(default_factory=list)
    log: str | None = None


@dataclass
class Row:
    workload: Workload
    status: str
    detail: str = ""
    result: Result | None = None
    gpus: list = field(default_factory=list)  # Gpu of the final attempt
    attempts: list[Attempt] = field(default_factory=list)


@dataclass
class Outcome:
    rows: list[Row]  # in workload order
    not_run: list[tuple[Workload, str]]
    interrupted: bool = False
    stopped: str | None = None  # why new starts stopped early (fail-fast)


class Events:
    """Progress hooks (the CLI prints and saves the partial run); no-ops here."""

    def start(self, workload, attempt, gpus, started, total) -> None:
        pass

    def retry(self, workload, attempt: Attempt, delay_s: float) -> None:
        pass

    def finish(self, row: Row, done: int, total: int) -> None:
        pass


def judge(result: Result, interference: list[str]) -> tuple[str, str]:
    """The row status of one finished child."""
    if interference and result.status != SKIP:
        return INTERFERED, "foreign GPU process(es) during the measurement: " + "; ".join(
            interference
        )
    if result.status == PASS:
        bench = result.bench if isinstance(result.bench, dict) else {}
        impls = bench.get("impls") or {}
        errors = bench.get("errors") or {}
        if errors:
            return BASELINE_ERROR, "; ".join(
                f"reference {k!r} failed: {v}" for k, v in errors.items()
            )
        if not any(is_ours(k) for k in impls):
            return FAIL, f"bench result has no implementation of ours (tirx*): {sorted(impls)}"
        notes = [result.detail] if result.detail else []
        notes += [
            f"reference {k!r} skipped: {v}"  # optional package not installed
            for k, v in (bench.get("skipped") or {}).items()
        ]
        return PASS, "; ".join(notes)
    if result.status == CHILD_ERROR:
        return FAIL, f"error: {result.detail}"
    if result.status in (SKIP, FAIL, TIMEOUT):
        return result.status, result.detail
    return FAIL, f"unknown child status {result.status!r}: {result.detail}"


@dataclass
class _Job:
    index: int
    workload: Workload
    attempt: int = 0
    number: int = 0  # n of "n/N" in progress lines, fixed at the first start
    not_before: float = 0.0
    attempts: list[Attempt] = field(default_factory=list)


class Handle(Protocol):
    """A started workload, as ``executor.start`` returns it (``runner.ChildRun``)."""

    def poll(self) -> bool: ...
    def kill(self) -> None: ...
    def collect(self) -> Result: ...
    def expire(self, timeout: float) -> Result: ...


@dataclass
class _Running:
    job: _Job
    handle: Handle
    gpus: list
    started: float
    key: tuple


class Scheduler:
    def __init__(
        self,
        executor,
        pool,
        monitor,
        *,
        timeout_s: float,
        max_retries: int = 3,
        retry_delay_s: float = 10.0,
        keep_going: bool = False,
        events: Events | None = None,
        no_gpu_reason: str = "no GPU found",
        clock=time.monotonic,
        sleep=time.sleep,
        poll_s: float = 0.1,
        stop_check=lambda: None,
    ):
        self.executor, self.pool, self.monitor = executor, pool, monitor
        self._finished = getattr(executor, "finished", lambda handle, status: None)
        self.timeout_s, self.max_retries, self.retry_delay_s = timeout_s, max_retries, retry_delay_s
        self.keep_going, self.events = keep_going, events or Events()
        self.no_gpu_reason = no_gpu_reason
        self.clock, self.sleep, self.poll_s = clock, sleep, poll_s
        self.stop_check = stop_check  # raises KeyboardInterrupt once a stop signal came

    def run(self, workloads: list[Workload]) -> Outcome:
        self._total = len(workloads)
        self._rows: dict[int, Row] = {}
        self._started = 0
        self._stopped: str | None = None
        # larger claims first; otherwise the configured order
        jobs = [_Job(i, w) for i, w in enumerate(workloads)]
        pending = sorted(jobs, key=lambda j: (-j.workload.num_gpus, j.index))
        running: list[_Running] = []
        interrupted = False
        try:
            while pending or running:
                if self._stopped is None:
                    self._start_ready(pending, running)
                if not running and (not pending or self._stopped is not None):
                    break
                self.sleep(self.poll_s)
                self.stop_check()
                for r in list(running):
                    result = self._check(r)
                    if result is not None:
                        running.remove(r)
                        self._finished(r.handle, result.status)
                        self._done(r, result, pending)
        except KeyboardInterrupt:
            interrupted = True
        finally:  # Ctrl-C, or a bug in a hook: never leave a child running
            for r in running:
                r.handle.kill()
                self._finished(r.handle, "KILLED")
                self.pool.release(r.gpus)
                self.monitor.stop(r.key)
        # every job without a row is reported, whatever window an interrupt hit
        was_running = {id(r.job) for r in running}
        not_run = []
        for job in jobs:
            if job.index in self._rows:
                continue
            if not interrupted:
                why = f"not started: {self._stopped}"
            elif id(job) in was_running:
                why = "interrupted (Ctrl-C) while running"
            else:
                why = "interrupted (Ctrl-C)"
            not_run.append((job.workload, why))
        rows = [self._rows[i] for i in sorted(self._rows)]
        return Outcome(rows, not_run, interrupted, self._stopped)

    def _start_ready(self, pending: list[_Job], running: list[_Running]) -> None:
        now, reserved = self.clock(), 0
        for job in list(pending):
            n = job.workload.num_gpus
            if n > self.pool.total:
                pending.remove(job)
                why = (
                    self.no_gpu_reason
                    if self.pool.total == 0
                    else f"needs {n} GPUs; this machine has {self.pool.total}"
                )
                self._final(job, Row(job.workload, SKIP, why, attempts=job.attempts))
                continue
            if job.not_before > now:
                continue
            gpus = self.pool.acquire(n) if self.pool.free_count() - reserved >= n else None
            if gpus is None:
                reserved += n  # keep these for the larger (earlier) claim
                continue
            pending.remove(job)
            key = (job.workload.key, job.attempt)
            try:
                self.monitor.watch(key, gpus)
                handle = self.executor.start(job.workload, job.attempt, gpus)
            except KeyboardInterrupt:  # the job has no row: run() reports it as not run
                self.pool.release(gpus)
                raise
            except Exception as e:  # noqa: BLE001 - a start failure is the workload's FAIL
                self.pool.release(gpus)
                self.monitor.stop(key)
                self._final(
                    job,
                    Row(
                        job.workload,
                        FAIL,
                        f"could not start: {type(e).__name__}: {e}",
                        gpus=gpus,
                        attempts=job.attempts,
                    ),
                )
                continue
            self.monitor.attach(key, getattr(handle, "pid", None))
            running.append(_Running(job, handle, gpus, self.clock(), key))
            if not job.number:
                self._started += 1
                job.number = self._started
            self.events.start(job.workload, job.attempt, gpus, job.number, self._total)

    def _check(self, r: _Running) -> Result | None:
        try:
            if r.handle.poll():
                return r.handle.collect()
            if self.clock() - r.started > self.timeout_s:
                return r.handle.expire(self.timeout_s)
        except Exception as e:  # noqa: BLE001 - e.g. an unreadable result file
            r.handle.kill()
            w = r.job.workload
            return Result(
                w.kernel,
                w.config,
                "bench",
                CHILD_ERROR,
                round(self.clock() - r.started, 3),
                f"{type(e).__name__}: {e}",
            )
        return None

    def _done(self, r: _Running, result: Result, pending: list[_Job]) -> None:
        self.pool.release(r.gpus)
        interference = self.monitor.stop(r.key)
        status, detail = judge(result, interference)
        job = r.job
        attempt = Attempt(
            status, detail, [g.uuid for g in r.gpus], result.seconds, interference, result.log
        )
        job.attempts.append(attempt)
        if status == INTERFERED:
            if job.attempt < self.max_retries:
                job.attempt += 1
                job.not_before = self.clock() + self.retry_delay_s
                pending.append(job)
                pending.sort(key=lambda j: (-j.workload.num_gpus, j.index))
                self.events.retry(job.workload, attempt, self.retry_delay_s)
                return
            status = FAIL
            detail = f"interfered on all {len(job.attempts)} attempts; last: {detail}"
        self._final(job, Row(job.workload, status, detail, result, r.gpus, job.attempts))

    def _final(self, job: _Job, row: Row) -> None:
        self._rows[job.index] = row
        self.events.finish(row, len(self._rows), self._total)
        if row.status in FAILED and not self.keep_going and self._stopped is None:
            self._stopped = (
                f"fail-fast after {row.status} of {row.workload.kernel} "
                f"{row.workload.config} (--keep-going runs the rest)"
            )
