# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fakes for the tirx-suite tests: kernels, registry, GPUs, clock, executor, monitor.

A fake workload's behaviour is its config label: ``pass``, ``fail``, ``skip``, ``crash``,
``hang``, ``baseline_error``, ``no_ours``, ``interfere1`` (foreign process on the first
attempt only), ``interfere`` (on every attempt), ``boom`` (the executor cannot start it).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tirx_kernels.core.registry import UnknownKernel
from tirx_kernels.core.runner import Result
from tirx_kernels.core.suite.cli import Backend
from tirx_kernels.core.suite.config import Workload
from tirx_kernels.core.suite.gpus import Gpu, LockPool

BEHAVIOURS = (
    "pass",
    "fail",
    "skip",
    "crash",
    "hang",
    "baseline_error",
    "no_ours",
    "interfere1",
    "interfere",
    "boom",
)


class FakeKernel:
    def __init__(self, name, family="fam", labels=BEHAVIOURS, import_error=None):
        self.name, self.family, self.bench_labels = name, family, list(labels)
        self.module = f"fake.{name}"
        self.import_error = import_error
        self.loaded = 0

    def load(self):
        self.loaded += 1
        if self.import_error:
            raise ImportError(self.import_error)
        return object()


class FakeRegistry:
    def __init__(self, kernels, files=()):
        self.kernels = {k.name: k for k in kernels}
        self.files = list(files)
        self.families, self.broken = [], []

    def suite_files(self):
        return self.files

    def get(self, name):
        if name not in self.kernels:
            raise UnknownKernel(
                f"no kernel {name!r}; installed kernels: {', '.join(sorted(self.kernels))}"
            )
        return self.kernels[name]

    def family(self, name):
        if name not in {k.family for k in self.kernels.values()}:
            raise UnknownKernel(f"no family {name!r}")
        return name


def write_yaml(folder: Path, name: str, text: str) -> Path:
    path = Path(folder) / name
    path.write_text(textwrap.dedent(text))
    return path


def fake_gpus(n: int, name="NVIDIA H200") -> list[Gpu]:
    return [Gpu(i, f"GPU-fake-{i}", name, "580.1", 143771, {"max_sm": 1980}) for i in range(n)]


def workload(config="pass", kernel="k", num_gpus=1, **kw) -> Workload:
    return Workload(kernel, config, "fam", num_gpus=num_gpus, **kw)


class FakeClock:
    """Virtual time: ``sleep`` advances it; ``interrupt_at`` raises Ctrl-C there."""

    def __init__(self, interrupt_at=None):
        self.t = 0.0
        self.interrupt_at = interrupt_at

    def __call__(self):
        return self.t

    def sleep(self, dt):
        self.t += dt
        assert self.t < 1e5, "runaway scheduler loop: it never finished"
        if self.interrupt_at is not None and self.t >= self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt


def bench(impls=None, samples=None, errors=None):
    impls = impls or {"tirx": 10.0, "torch": 15.0}
    samples = samples or {k: [v * 0.99, v, v * 1.01] for k, v in impls.items()}
    return {
        "impls": impls,
        "round_samples": samples,
        "errors": errors or {},
        "timer": "proton",
        "benchmark_protocol": {"rounds": 3, "cooldown_s": 1.0, "round_aggregate": "mean"},
    }


class FakeHandle:
    def __init__(self, ex, workload, attempt, gpus):
        self.ex, self.workload, self.attempt, self.gpus = ex, workload, attempt, gpus
        self.pid = 1000 + len(ex.started)
        self.start_t = ex.clock()
        self.duration = ex.duration(workload)
        self.live = True
        self.killed = False

    def poll(self):
        return self.workload.config != "hang" and self.ex.clock() >= self.start_t + self.duration

    def _result(self, status, detail="", bench_result=None):
        self.live = False
        w = self.workload
        return Result(
            w.kernel,
            w.config,
            "bench",
            status,
            round(self.ex.clock() - self.start_t, 3),
            detail,
            bench=bench_result,
            log=f"/logs/{w.kernel}.{w.config}.{self.attempt}.log",
        )

    def collect(self):
        c = self.workload.config
        if c == "fail":
            return self._result("FAIL", "AssertionError: max abs error 0.5 at (3, 7)")
        if c == "skip":
            return self._result("SKIP", "needs flashinfer")
        if c == "crash":
            return self._result("ERROR", "child crashed (signal SIGSEGV) without a result")
        if c == "baseline_error":
            return self._result("PASS", "", bench(errors={"flashinfer": "JIT failed"}))
        if c == "no_ours":
            return self._result("PASS", "", bench({"torch": 3.0}))
        return self._result("PASS", "", bench(self.ex.impls.get(self.workload.key)))

    def expire(self, timeout):
        self.kill()
        return self._result("TIMEOUT", f"no result after {timeout:g} s; killed")

    def kill(self):
        self.killed = self.killed or self.live
        self.live = False


class FakeExecutor:
    """Starts FakeHandles; checks that running workloads never share a GPU."""

    def __init__(self, clock, durations=None, impls=None):
        self.clock = clock
        self.durations = durations or {}
        self.impls = impls or {}
        self.started: list[FakeHandle] = []
        self.max_concurrent = 0

    def duration(self, workload):
        return self.durations.get(workload.key, self.durations.get(workload.config, 10.0))

    def start(self, workload, attempt, gpus):
        if workload.config == "boom":
            raise OSError("cannot exec python")
        live = [h for h in self.started if h.live]
        held = {g.uuid for h in live for g in h.gpus}
        assert not held & {g.uuid for g in gpus}, "two running workloads share a GPU"
        assert len({g.uuid for g in gpus}) == len(gpus) == workload.num_gpus
        handle = FakeHandle(self, workload, attempt, gpus)
        self.started.append(handle)
        self.max_concurrent = max(self.max_concurrent, len(live) + 1)
        return handle

    def calls(self):
        return [(h.workload.kernel, h.workload.config, h.attempt) for h in self.started]


class FakeMonitor:
    """Reports a foreign process for ``interfere`` (always) and ``interfere1`` (attempt 0)."""

    available = True

    def __init__(self):
        self.watching = {}
        self.attached = {}

    def watch(self, key, gpus):
        self.watching[key] = gpus

    def attach(self, key, pid):
        self.attached[key] = pid

    def stop(self, key):
        (kernel, config), attempt = key
        self.watching.pop(key, None)
        if config == "interfere" or (config == "interfere1" and attempt == 0):
            return [f"pid 4242 (python) on {self.attached.get(key)}"]
        return []

    def close(self):
        pass


class FakeBackend(Backend):
    """The CLI's outside world, faked: registry, N GPUs, executor, monitor and clock."""

    def __init__(self, registry, n_gpus=1, tmp=None, interrupt_at=None, impls=None, durations=None):
        self._registry = registry
        self.n_gpus = n_gpus
        self.clock = FakeClock(interrupt_at)
        self.fake_executor = FakeExecutor(self.clock, durations, impls)
        self.tmp = Path(tmp) if tmp else None

    def registry(self, strict):
        return self._registry

    def gpus(self):
        return fake_gpus(self.n_gpus), "nvidia-smi" if self.n_gpus else "no nvidia-smi"

    def pool(self, gpus, lock_dir):
        return LockPool(gpus, self.tmp / "locks")

    def monitor(self, interval_s):
        return FakeMonitor()

    def executor(self, run_dir, **kwargs):
        self.executor_kwargs = kwargs
        return self.fake_executor

    def scheduler_options(self):
        return {"clock": self.clock, "sleep": self.clock.sleep, "poll_s": 0.5}


def test_fake_clock_interrupts_once():
    clock = FakeClock(interrupt_at=1.0)
    clock.sleep(0.5)
    try:
        clock.sleep(0.5)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("no interrupt")
    clock.sleep(5)
    assert clock() == 6.0
