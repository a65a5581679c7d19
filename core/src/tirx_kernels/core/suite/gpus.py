# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""GPUs: inventory, atomic acquisition across processes, and the interference monitor.

- ``inventory()`` asks ``nvidia-smi`` (index, UUID, name, driver, memory, clocks); without it,
  a torch subprocess (the suite process itself never creates a CUDA context).
- ``LockPool`` hands out ``n`` GPUs all-or-nothing; each GPU is also held through an
  exclusive ``flock`` on ``<lock dir>/<uuid>.lock`` so two suites on one host, of any users,
  never share one (:mod:`.lockfile` opens those files safely). The kernel drops the lock
  when the holder dies: no stale locks.
- ``SmiMonitor`` polls ``nvidia-smi --query-compute-apps`` while workloads run and reports
  processes on their GPUs that are not the workload's own (its process group).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .lockfile import note_holder, open_lock_file, prepare_folder

SMI_FIELDS = (
    "index",
    "uuid",
    "name",
    "driver_version",
    "memory.total",
    "clocks.max.sm",
    "clocks.max.memory",
    "clocks.sm",
    "clocks.mem",
)
SMI_MINIMAL = SMI_FIELDS[:4]
ENV_LOCK_DIR = "TIRX_SUITE_LOCK_DIR"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    driver: str | None = None
    memory_mib: int | None = None
    clocks_mhz: dict = field(default_factory=dict, compare=False)  # max_sm, max_mem, sm, mem

    @property
    def model(self) -> str:
        return model_slug(self.name)

    def to_json(self) -> dict:
        return asdict(self)


def model_slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the baseline folder of a GPU model."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def _text(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") or text in ("N/A", "Not Supported") else text


def _mhz(text: str) -> int | None:
    text = _text(text) or ""
    return int(float(text)) if re.fullmatch(r"[0-9]+(\.[0-9]*)?", text) else None


def parse_smi_gpus(text: str, fields=SMI_FIELDS) -> list[Gpu]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(fields):
            continue
        row = dict(zip(fields, parts))
        clocks = {
            k: _mhz(row[f])
            for k, f in (
                ("max_sm", "clocks.max.sm"),
                ("max_mem", "clocks.max.memory"),
                ("sm", "clocks.sm"),
                ("mem", "clocks.mem"),
            )
            if f in row and _mhz(row[f]) is not None
        }
        gpus.append(
            Gpu(
                int(row["index"]),
                row["uuid"],
                row["name"],
                _text(row["driver_version"]),
                _mhz(row.get("memory.total", "")),
                clocks,
            )
        )
    return gpus


def inventory(*, run=subprocess.run) -> tuple[list[Gpu], str]:
    """(GPUs, how they were found). An empty list with the reason when there is none."""
    if shutil.which("nvidia-smi"):
        for fields in (SMI_FIELDS, SMI_MINIMAL):  # old drivers reject some clock fields
            try:
                p = run(
                    [
                        "nvidia-smi",
                        f"--query-gpu={','.join(fields)}",
                        "--format=csv,noheader,nounits",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except (OSError, subprocess.SubprocessError) as e:
                return [], f"nvidia-smi failed: {e}"
            if p.returncode == 0:
                return parse_smi_gpus(p.stdout, fields), "nvidia-smi"
        return [], f"nvidia-smi failed: {(p.stderr or p.stdout).strip()[:200]}"
    return _torch_inventory(run)


_TORCH_PROBE = """
import json, torch
out = []
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append({"index": i, "uuid": str(getattr(p, "uuid", f"cuda{i}")), "name": p.name,
                    "memory_mib": p.total_memory // 2**20})
print(json.dumps(out))
"""


def _torch_inventory(run) -> tuple[list[Gpu], str]:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return [], "no nvidia-smi and no torch"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # indices as the children will use them
    try:
        p = run(
            [sys.executable, "-c", _TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        rows = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return [], f"torch probe failed: {e}"
    if rows is None:
        return [], f"torch probe failed: {p.stderr.strip()[-200:]}"
    if not rows:
        return [], "no nvidia-smi; torch sees no CUDA device"
    return [Gpu(**r) for r in rows], "torch (no nvidia-smi: interference monitor off)"


def default_lock_dir() -> Path:
    return Path(os.environ.get(ENV_LOCK_DIR) or Path(tempfile.gettempdir()) / "tirx-suite-locks")


class LockPool:
    """All-or-nothing acquisition of GPUs, exclusive across processes through flock.

    Every lock file is opened up front, so a folder or file that cannot be used safely is a
    LockError before anything runs, never halfway through a sweep."""

    def __init__(self, gpus: list[Gpu], lock_dir: Path | None = None):
        self.gpus = list(gpus)
        self.lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
        self._fds: dict[str, int] = {}  # uuid -> fd of its lock file (pool lifetime)
        self._held: set[str] = set()  # uuids locked by this pool
        if self.gpus:
            prepare_folder(self.lock_dir)
        try:
            for gpu in self.gpus:
                name = re.sub(r"[^A-Za-z0-9_.-]", "_", gpu.uuid) + ".lock"
                self._fds[gpu.uuid] = open_lock_file(self.lock_dir / name)
        except BaseException:
            self.close()
            raise

    @property
    def total(self) -> int:
        return len(self.gpus)

    def free_count(self) -> int:
        return sum(g.uuid not in self._held for g in self.gpus)

    def acquire(self, n: int) -> list[Gpu] | None:
        """``n`` distinct GPUs, or None (nothing held) when fewer are free right now."""
        if n > self.free_count():
            return None
        got: list[Gpu] = []
        for gpu in self.gpus:
            if len(got) == n:
                break
            if gpu.uuid not in self._held and self._lock(gpu):
                got.append(gpu)
        if len(got) < n:  # another process holds some: give back what we took
            self.release(got)
            return None
        return got

    def release(self, gpus: list[Gpu]) -> None:
        for gpu in gpus:
            if gpu.uuid in self._held:
                self._held.discard(gpu.uuid)
                fcntl.flock(self._fds[gpu.uuid], fcntl.LOCK_UN)

    def close(self) -> None:
        """Release everything and close the lock files (closing drops any flock)."""
        self._held.clear()
        while self._fds:
            os.close(self._fds.popitem()[1])

    def _lock(self, gpu: Gpu) -> bool:
        fd = self._fds[gpu.uuid]
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        note_holder(fd)
        self._held.add(gpu.uuid)
        return True


class NullMonitor:
    """No interference monitoring (no nvidia-smi, or --no-monitor)."""

    available = False

    def watch(self, key, gpus) -> None:
        pass

    def attach(self, key, pid) -> None:
        pass

    def stop(self, key) -> list[str]:
        return []

    def close(self) -> None:
        pass


def parse_compute_apps(text: str) -> list[tuple[str, int, str]]:
    """(gpu uuid, pid, process name) of every compute process nvidia-smi lists."""
    apps = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[1].isdigit():
            apps.append((parts[0], int(parts[1]), parts[2]))
    return apps


def query_compute_apps() -> list[tuple[str, int, str]] | None:
    try:
        p = subprocess.run(
            [
                "nvidia-smi",
                "--query-compute-apps=gpu_uuid,pid,process_name",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_compute_apps(p.stdout) if p.returncode == 0 else None


def probe_pid(pid: int) -> tuple[int | None, bool]:
    """(process group or None when the pid is not visible here, holds a /dev/nvidia* file).

    A pid from another pid namespace may be invisible, or name an unrelated local process:
    only a visible process that really holds the GPU device files counts (unreadable fds:
    another user's process, assumed to hold them since nvidia-smi lists it)."""
    try:
        pgid = os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None, False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return pgid, True
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                return pgid, True
        except OSError:
            continue
    return pgid, False


def classify(apps, uuids, pgid, before, ours_ever, probe=probe_pid) -> list[str]:
    """Foreign processes among ``apps`` on the GPUs ``uuids`` of one workload.

    Ours: in the workload's process group ``pgid``, or a child pid the suite launched
    (``ours_ever``: NVML may list an exited child for a moment). A pid invisible here is
    foreign only when it was already on the GPU before the workload started (``before``).
    """
    found = []
    for uuid, pid, name in apps:
        if uuid not in uuids or pid in ours_ever:
            continue
        group, holds_gpu = probe(pid)
        if group is not None:
            if group == pgid or not holds_gpu:
                continue
        elif pid not in before:
            continue
        found.append(f"pid {pid} ({name}) on {uuid}")
    return found


class SmiMonitor:
    """Polls nvidia-smi in a thread; ``stop(key)`` returns the foreign processes it saw."""

    available = True

    def __init__(self, interval_s: float = 1.0, query=query_compute_apps, probe=probe_pid):
        self.interval_s, self.query, self.probe = interval_s, query, probe
        self._lock = threading.Lock()
        self._watches: dict = {}  # key -> {"uuids", "pgid", "before", "seen"}
        self._ours: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tirx-suite-monitor", daemon=True)
        self._thread.start()

    def watch(self, key, gpus) -> None:
        """Start watching ``gpus`` for ``key``; call before the workload starts."""
        apps = self.query() or []
        uuids = {g.uuid for g in gpus}
        before = {pid for uuid, pid, _ in apps if uuid in uuids}
        with self._lock:
            self._watches[key] = {"uuids": uuids, "pgid": None, "before": before, "seen": {}}

    def attach(self, key, pid) -> None:
        """The workload's child started as ``pid``, leader of its own process group."""
        with self._lock:
            self._ours.add(pid)
            if key in self._watches:
                self._watches[key]["pgid"] = pid

    def stop(self, key) -> list[str]:
        self._poll()  # one last look, so a short workload is watched at least once
        with self._lock:
            watch = self._watches.pop(key, None)
        return list(watch["seen"]) if watch else []

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._poll()

    def _poll(self) -> None:
        with self._lock:
            active = {k: w for k, w in self._watches.items() if w["pgid"] is not None}
        if not active:
            return
        apps = self.query()
        if apps is None:
            return
        with self._lock:
            ours = set(self._ours)
            for w in active.values():
                for item in classify(apps, w["uuids"], w["pgid"], w["before"], ours, self.probe):
                    w["seen"][item] = None  # ordered set
