# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The real executor: each workload attempt is ``tirx_kernels.core.worker`` in a child.

The child sees only its acquired GPUs (``CUDA_VISIBLE_DEVICES`` in nvidia-smi's PCI order)
and gets ``TIRX_BENCH_CACHE_DIR``, an absolute cache folder qualified by GPU model, driver
and package versions, for reference adapters' caches. Its output goes to
``<run dir>/logs/<kernel>.<config>.<attempt>.log``. With ``reuse_workers`` the children are
warm workers (``runner.WorkerPool``, one pool per GPU set), given back by :meth:`finished`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..runner import ChildRun, Request, WorkerPool
from .config import Workload
from .gpus import Gpu


def cache_dir(root: Path, gpu: Gpu, versions: dict) -> Path:
    """``<root>/<gpu model>-driver<x>/<pkg><version>_...``: absolute, never shared across
    GPU models, drivers or versions of the packages that build the cached artefacts."""
    keys = ("apache-tvm-tirx", "torch", "triton")
    tag = "_".join(f"{k.replace('apache-', '')}{versions[k]}" for k in keys if versions.get(k))
    gpu_tag = f"{gpu.model}-driver{gpu.driver or 'unknown'}"
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.+-]", "_", s)  # noqa: E731
    return (Path(root) / safe(gpu_tag) / safe(tag or "unversioned")).resolve()


class ChildExecutor:
    def __init__(
        self,
        run_dir: Path,
        *,
        rounds: int,
        cooldown_s: float,
        cache_root: Path,
        versions: dict,
        python: str | None = None,
        reuse_workers: bool = False,
    ):
        self.log_dir = Path(run_dir) / "logs"
        self.rounds, self.cooldown_s = rounds, cooldown_s
        self.cache_root, self.versions, self.python = Path(cache_root), versions, python
        self._pools: dict[str, WorkerPool] | None = {} if reuse_workers else None
        self._pool_of: dict[int, WorkerPool] = {}  # a started handle's pool, by id

    def start(self, workload: Workload, attempt: int, gpus: list[Gpu]) -> ChildRun:
        cache = cache_dir(self.cache_root, gpus[0], self.versions)
        cache.mkdir(parents=True, exist_ok=True)
        env = {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # the order nvidia-smi's indices use
            "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in gpus),
            "TIRX_BENCH_CACHE_DIR": str(cache),
        }
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{workload.kernel}.{workload.config}")
        request = Request(
            workload.kernel,
            workload.config,
            "bench",
            workload.bench_options(self.rounds, self.cooldown_s),
        )
        log = self.log_dir / f"{name}.{attempt}.log"
        if self._pools is None:
            return ChildRun(request, env=env, log_path=log, python=self.python)
        key = f"{env['CUDA_VISIBLE_DEVICES']}|{env['TIRX_BENCH_CACHE_DIR']}"
        pool = self._pools.setdefault(key, WorkerPool(env=env, python=self.python))
        handle = pool.start(request, log_path=log)
        self._pool_of[id(handle)] = pool
        return handle

    def finished(self, handle: ChildRun, status: str) -> None:
        """A workload is done (``status``; killed ones too): its warm worker goes back to its
        pool, or is retired after anything but PASS or SKIP."""
        pool = self._pool_of.pop(id(handle), None)
        if pool is not None:
            pool.release(handle, status)

    def close(self) -> None:
        """End every warm worker."""
        for pool in (self._pools or {}).values():
            pool.close()
