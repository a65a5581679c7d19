# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Multi-GPU configs: one process per rank, and the per-rank timing context.

A kernel whose ``KERNEL_META`` has ``"num_gpus": N`` (N > 1) runs each test/bench config on
N ranks. The worker (already a child of the runner, in its own process group) calls
:func:`launch`, which starts ``python -m tirx_kernels.core.distributed`` once per rank with
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` and NVLink multicast
off. Each rank binds ``cuda:LOCAL_RANK``, joins ``torch.distributed`` (NCCL; gloo for CPU
tests) and calls the module's ``run_test``/``run_bench`` with the config; the kernel reads
its rank from ``torch.distributed``. Rank 0's return value is the config's result; any
rank's failure fails the config and names the rank; the others are then killed. A hang is
the runner's TIMEOUT: the ranks share the worker's process group, so its kill takes them all.

Without N GPUs of a listed arch, test falls back to the compile-only check of single-GPU
kernels (:mod:`.defaults`) and bench is a SKIP saying what it needs.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from pathlib import Path
from typing import Any

from .lifeline import child_env, die_with_parent

# NVLink SHARP / multicast stays off on the lent machines (see the device docs).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
FAILURE_GRACE_S = 5.0  # after one rank fails, the others get this long before the kill


class RankError(RuntimeError):
    """A rank ended with an error or crashed: an ERROR of the config naming the rank."""


def num_gpus(kernel) -> int:
    """Ranks one config of ``kernel`` needs (``KERNEL_META["num_gpus"]``, default 1)."""
    return int(kernel.meta.get("num_gpus", 1))


def gpus_available(archs) -> tuple[int, str | None]:
    """(visible GPUs of a listed arch, arch of GPU 0): 0 when GPU 0's arch is not listed."""
    from . import toolchain

    arch = toolchain.gpu_arch()
    if arch not in archs:
        return 0, arch
    import torch

    return torch.cuda.device_count(), arch


def needs_message(n: int, archs, found: int) -> str:
    return f"needs {n} {'/'.join(archs)} GPUs, found {found}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world_size: int, port: int, addr: str = "127.0.0.1") -> dict:
    """The environment of one rank (torchrun's variables, one node)."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        **MULTICAST_OFF,
    }


def launch(
    module: str, config: dict, action: str, world_size: int, *, options=None, backend: str = "nccl"
):
    """Run ``module.run_test(**config)`` (or ``run_bench(**config, **options)``) on
    ``world_size`` rank processes; return rank 0's result.

    Raises what the failing rank raised (AssertionError, unittest.SkipTest) with
    ``rank R:`` in front, or :class:`RankError` for an error or a crash.
    """
    with tempfile.TemporaryDirectory(prefix="tirx-ranks-") as tmp_name:
        tmp = Path(tmp_name)
        request = tmp / "request.json"
        request.write_text(
            json.dumps(
                {
                    "module": module,
                    "config": config,
                    "action": action,
                    "options": options or {},
                    "backend": backend,
                }
            )
        )
        port = free_port()
        procs = []
        for rank in range(world_size):
            env = {
                **os.environ,
                **rank_env(rank, world_size, port),
                "PYTHONUNBUFFERED": "1",
                **child_env(),
            }  # a rank dies with its worker
            # same process group as the worker: the runner's timeout kill reaches every rank
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tirx_kernels.core.distributed",
                        str(request),
                        str(tmp / f"rank{rank}.json"),
                    ],
                    env=env,
                    stdin=subprocess.DEVNULL,
                )
            )
        results = _wait(procs, tmp)
    return _outcome(results)


def _wait(procs, tmp: Path) -> dict[int, dict]:
    """Wait for every rank; once one has failed, kill the rest after a grace period."""
    results: dict[int, dict] = {}
    failed_at = None  # when the launcher first saw a failed rank
    try:
        while len(results) < len(procs):
            for rank, proc in enumerate(procs):
                if rank in results or proc.poll() is None:
                    continue
                path = tmp / f"rank{rank}.json"
                if path.exists():
                    results[rank] = json.loads(path.read_text())
                else:
                    code = proc.returncode
                    results[rank] = {
                        "status": "CRASH",
                        "detail": f"crashed (exit code {code}) without a result",
                    }
                if results[rank]["status"] != "PASS" and failed_at is None:
                    failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > FAILURE_GRACE_S:
                for rank, proc in enumerate(procs):
                    if rank not in results:
                        proc.kill()
                        proc.wait()
                        results[rank] = {
                            "status": "KILLED",
                            "detail": "killed after another rank failed",
                        }
            time.sleep(0.05)
    finally:
        for proc in procs:  # an exception (Ctrl-C) here must not leave ranks behind
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def _outcome(results: dict[int, dict]):
    bad = [r for r in sorted(results) if results[r]["status"] != "PASS"]
    if not bad:
        return results[0].get("result")
    # the cause: a rank that crashed (it could not report), else the earliest failure;
    # the other ranks usually fail because of it (a peer left a collective)
    rank = min(
        bad,
        key=lambda r: (results[r]["status"] != "CRASH", results[r].get("time", float("inf")), r),
    )
    status, detail = results[rank]["status"], results[rank]["detail"]
    others = ", ".join(f"rank {r} {results[r]['status']}" for r in bad if r != rank)
    message = f"rank {rank}: {detail}" + (f" (also: {others})" if others else "")
    if status == "FAIL":
        raise AssertionError(message)
    if status == "SKIP" and all(results[r]["status"] in ("SKIP", "KILLED") for r in bad):
        raise unittest.SkipTest(message)
    raise RankError(message)


# ---- rank side ---------------------------------------------------------------------------


def init_rank(backend: str = "nccl"):
    """Bind ``cuda:LOCAL_RANK`` (NCCL) and join the process group from the environment."""
    import torch
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(local)
        kwargs["device_id"] = torch.device("cuda", local)
    dist.init_process_group(
        backend, rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]), **kwargs
    )


def rank_callbacks():
    """(barrier, max_reduce) over the default process group, for the distributed timer."""
    import torch
    import torch.distributed as dist

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"

    def barrier():
        dist.barrier()

    def max_reduce(value: float) -> float:
        t = torch.tensor([float(value)], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    return barrier, max_reduce


def bench_context(stream=None):
    """This rank's ``DistributedBenchContext``; ``stream`` defaults to the current CUDA
    stream (the one our launches use). Call it inside ``run_bench`` of a rank."""
    import torch.distributed as dist

    from . import toolchain

    if stream is None:
        import torch

        stream = torch.cuda.current_stream()
    barrier, max_reduce = rank_callbacks()
    return toolchain.distributed_context(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        barrier=barrier,
        max_reduce=max_reduce,
        stream=stream,
    )


def _run_rank(request: dict):
    module = importlib.import_module(request["module"])
    if request["action"] == "bench":
        return module.run_bench(**request["config"], **request["options"])
    return module.run_test(**request["config"])


def main(argv=None) -> int:
    die_with_parent()
    argv = sys.argv[1:] if argv is None else argv
    request, result_path = json.loads(Path(argv[0]).read_text()), Path(argv[1])
    rank = os.environ.get("RANK", "?")
    try:
        init_rank(request["backend"])
    except Exception as e:  # noqa: BLE001 - a harness problem, never the kernel's FAIL
        traceback.print_exc()
        return _finish(
            result_path,
            rank,
            {"status": "ERROR", "detail": f"process group init failed: {type(e).__name__}: {e}"},
        )
    try:
        out = {"status": "PASS", "result": _run_rank(request)}
    except unittest.SkipTest as e:
        out = {"status": "SKIP", "detail": str(e)}
    except AssertionError as e:
        traceback.print_exc()
        out = {"status": "FAIL", "detail": f"AssertionError: {e}"}
    except Exception as e:  # noqa: BLE001 - reported to the launcher, not raised
        traceback.print_exc()
        out = {"status": "ERROR", "detail": f"{type(e).__name__}: {e}"}
    return _finish(result_path, rank, out)


def _finish(result_path: Path, rank: str, out: dict) -> int:
    out["time"] = time.time()  # the launcher blames the earliest failure
    print(f"[rank {rank}] {out['status']}", flush=True)
    result_path.write_text(json.dumps(out, default=str))
    _shutdown(out["status"] == "PASS")
    return 0


def _shutdown(clean: bool) -> None:
    import torch.distributed as dist

    if clean and dist.is_initialized():
        dist.destroy_process_group()
    # after a failure the peers may sit in a collective: exit without waiting for them
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
