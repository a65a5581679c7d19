# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Multi-GPU configs on CPU: real rank processes over gloo against a fake family kernel.

The fake family's test hook calls ``distributed.launch(..., backend="gloo")`` itself (the
default hook would compile instead: this machine has no GPU); everything below it (rank
processes, env, process group, result collection, the runner's timeout kill) is the real
code path.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import types
import unittest
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import HEADER, PLUGIN, kernel_source

from tirx_kernels.core import distributed
from tirx_kernels.core.meta import MetaError, validate_meta
from tirx_kernels.core.runner import ChildRun, Request, run_config

GLOO_HOOK = """

@hookimpl
def tirx_kernels_run_test(kernel, module, config):
    from tirx_kernels.core import distributed
    out = distributed.launch(kernel.module, config, "test", kernel.meta["num_gpus"],
                             backend="gloo")
    return {"launched": True, "detail": json.dumps(out)}
"""

# run_test of the fake kernel: collectives over gloo, rank-local checks, a mode per rank
RANK_BODY = """
import json, os, time
import torch
import torch.distributed as dist


def run_test(mode="pass", bad_rank=1, pid_dir=""):
    from tirx_kernels.core import distributed
    rank, world = dist.get_rank(), dist.get_world_size()
    if pid_dir:
        with open(os.path.join(pid_dir, f"rank{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
    assert rank == int(os.environ["RANK"]) == int(os.environ["LOCAL_RANK"])
    if rank == bad_rank:
        if mode == "fail":
            raise AssertionError(f"max abs error 0.5 > 0.01 on rank {rank}")
        if mode == "crash":
            os._exit(3)
        if mode == "hang":
            time.sleep(600)
    ids = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(ids, torch.tensor([rank * 10]))
    gathered = [int(t.item()) for t in ids]
    assert gathered == [10 * r for r in range(world)], gathered
    barrier, max_reduce = distributed.rank_callbacks()
    barrier()
    top = max_reduce(1.5 + rank)
    env = {k: os.environ[k] for k in distributed.MULTICAST_OFF}
    return {"rank": rank, "world": world, "gathered": gathered, "max": top, "env": env,
            "port": os.environ["MASTER_PORT"], "addr": os.environ["MASTER_ADDR"]}
"""


def _gloo_family(fake_site, configs: str):
    src = kernel_source("dist_kern", "dist", configs=configs, body=RANK_BODY)
    src = src.replace('"archs": ["sm_90a"]}', '"archs": ["sm_90a"], "num_gpus": 2}')
    plugin = (
        HEADER
        + "import json\n"
        + PLUGIN.format(kernels=("kern",), name="dist", category="dist")
        + GLOO_HOOK
    )
    fake_site.family("dist", {"kern": src}, plugin=plugin)


def _request(label):
    return Request("dist_kern", label, "test")


# ---- KERNEL_META num_gpus -----------------------------------------------------------------

GOOD = {"name": "k", "category": "basic", "compute_capability": 9, "archs": ["sm_90a"]}


def test_num_gpus_is_an_optional_meta_key():
    validate_meta(GOOD, where="m")
    validate_meta({**GOOD, "num_gpus": 2}, where="m")
    assert distributed.num_gpus(types.SimpleNamespace(meta=GOOD)) == 1
    assert distributed.num_gpus(types.SimpleNamespace(meta={**GOOD, "num_gpus": 4})) == 4


@pytest.mark.parametrize("bad", [0, -2, True, "2", 2.0])
def test_bad_num_gpus_is_rejected(bad):
    with pytest.raises(MetaError, match="num_gpus"):
        validate_meta({**GOOD, "num_gpus": bad}, where="m")


# ---- the launcher over real rank processes -------------------------------------------------


def test_rank_env_sets_torchrun_vars_and_turns_multicast_off():
    env = distributed.rank_env(1, 2, 29555)
    assert env["RANK"] == env["LOCAL_RANK"] == "1" and env["WORLD_SIZE"] == "2"
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == "29555"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"
    port = distributed.free_port()
    with socket.socket() as s:  # really free
        s.bind(("127.0.0.1", port))


def test_two_gloo_ranks_run_collectives_and_rank0_result_wins(fake_site):
    _gloo_family(fake_site, '[{"label": "w2_pass", "mode": "pass"}]')
    r = run_config(_request("w2_pass"), timeout=120)
    assert r.status == "PASS", r.detail
    out = json.loads(r.detail)
    assert out["rank"] == 0 and out["world"] == 2  # rank 0's return value
    assert out["gathered"] == [0, 10]  # all_gather of rank-local data, in rank order
    assert out["max"] == 2.5  # max_reduce over both ranks (1.5 + rank)
    assert out["env"] == distributed.MULTICAST_OFF
    assert out["addr"] == "127.0.0.1" and int(out["port"]) > 0


def test_failing_rank_fails_the_config_and_is_named(fake_site):
    _gloo_family(fake_site, '[{"label": "w2_fail_r1", "mode": "fail", "bad_rank": 1}]')
    r = run_config(_request("w2_fail_r1"), timeout=120)
    assert r.status == "FAIL", r.detail
    assert r.detail.startswith("AssertionError: rank 1: AssertionError: max abs error 0.5")


def test_crashing_rank_is_an_error_naming_it(fake_site):
    _gloo_family(fake_site, '[{"label": "w2_crash_r0", "mode": "crash", "bad_rank": 0}]')
    r = run_config(_request("w2_crash_r0"), timeout=120)
    assert r.status == "ERROR", r.detail
    assert "RankError: rank 0: crashed (exit code 3)" in r.detail


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent has not reaped it


def test_hung_rank_times_out_and_every_rank_is_killed(fake_site, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    _gloo_family(
        fake_site,
        f'[{{"label": "w2_hang_r1", "mode": "hang", "bad_rank": 1, "pid_dir": {str(pids)!r}}}]',
    )
    child = ChildRun(_request("w2_hang_r1"))
    deadline = time.monotonic() + 120
    while len(list(pids.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        assert not child.poll(), child.log_tail()
        time.sleep(0.2)
    rank_pids = [int(p.read_text()) for p in sorted(pids.glob("*.pid"))]
    assert len(rank_pids) == 2 and all(_alive(p) for p in rank_pids)
    time.sleep(1.0)  # rank 0 now waits in all_gather for rank 1, which sleeps
    assert not child.poll()
    r = child.expire(1.0)  # what the runner does at its deadline
    assert r.status == "TIMEOUT"
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in rank_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in rank_pids)


# ---- outcome aggregation (no processes) ----------------------------------------------------


def test_outcome_prefers_the_crash_then_the_earliest_failure():
    with pytest.raises(distributed.RankError, match=r"^rank 1: crashed.*also: rank 0 ERROR"):
        distributed._outcome(
            {
                0: {"status": "ERROR", "detail": "peer gone", "time": 1.0},
                1: {"status": "CRASH", "detail": "crashed (exit code 9)"},
            }
        )
    with pytest.raises(AssertionError, match=r"^rank 1: bad value"):
        distributed._outcome(
            {
                0: {"status": "ERROR", "detail": "peer gone", "time": 5.0},
                1: {"status": "FAIL", "detail": "bad value", "time": 2.0},
            }
        )
    with pytest.raises(unittest.SkipTest, match="rank 0: no GPU"):
        distributed._outcome(
            {
                0: {"status": "SKIP", "detail": "no GPU", "time": 1.0},
                1: {"status": "SKIP", "detail": "no GPU", "time": 1.0},
            }
        )
    assert distributed._outcome(
        {0: {"status": "PASS", "result": {"a": 1}}, 1: {"status": "PASS", "result": {"a": 2}}}
    ) == {"a": 1}


# ---- the default hooks' dispatch -------------------------------------------------------------


@dataclass
class _Kernel:
    meta: dict
    name: str = "k"
    module: str = "fake.k"

    @property
    def archs(self):
        return self.meta["archs"]


def test_default_hooks_launch_ranks_when_enough_gpus(monkeypatch):
    from tirx_kernels.core import defaults

    calls = []
    monkeypatch.setattr(distributed, "gpus_available", lambda archs: (2, "sm_90a"))
    monkeypatch.setattr(distributed, "launch", lambda *a, **k: calls.append((a, k)) or {"x": 1})
    kernel = _Kernel({**GOOD, "num_gpus": 2})
    module = types.SimpleNamespace(__name__="fake.k", run_bench=lambda **_: None)
    out = defaults.tirx_kernels_run_test(kernel=kernel, module=module, config={"n": 1})
    assert out == {"launched": True, "detail": "ran on 2 ranks"}
    res = defaults.tirx_kernels_run_bench(
        kernel=kernel, module=module, config={"n": 1}, options={"rounds": 2}
    )
    assert res == {"x": 1}
    assert calls == [
        (("fake.k", {"n": 1}, "test", 2), {}),
        (("fake.k", {"n": 1}, "bench", 2), {"options": {"rounds": 2}}),
    ]


def test_default_bench_skips_without_enough_gpus(monkeypatch):
    from tirx_kernels.core import defaults

    monkeypatch.setattr(distributed, "gpus_available", lambda archs: (1, "sm_90a"))
    kernel = _Kernel({**GOOD, "num_gpus": 2})
    module = types.SimpleNamespace(__name__="fake.k", run_bench=lambda **_: None)
    with pytest.raises(unittest.SkipTest, match="^needs 2 sm_90a GPUs, found 1$"):
        defaults.tirx_kernels_run_bench(kernel=kernel, module=module, config={}, options={})


def test_gpus_available_on_this_cpu_machine():
    found, arch = distributed.gpus_available(["sm_90a"])
    if arch is None:
        assert found == 0


# ---- the DistributedBenchContext builder -------------------------------------------------------


class _Stream:
    """Stand-in for a CUDA stream (the real class needs triton and a GPU to validate)."""

    def synchronize(self):
        pass


def test_bench_context_assembles_rank_world_callbacks_and_stream(monkeypatch, tmp_path):
    import torch.distributed as dist

    @dataclass(frozen=True)
    class DistributedBenchContext:  # the fields of tvm_tirx's class
        rank: int
        world_size: int
        barrier: object
        max_reduce: object
        stream: object

    # tvm_tirx.testing.bench imports triton (absent on CPU): stand in for the module
    monkeypatch.setitem(
        sys.modules,
        "tvm_tirx.testing.bench",
        types.SimpleNamespace(DistributedBenchContext=DistributedBenchContext),
    )
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        stream = _Stream()
        ctx = distributed.bench_context(stream=stream)
        assert isinstance(ctx, DistributedBenchContext)
        assert (ctx.rank, ctx.world_size, ctx.stream) == (0, 1, stream)
        ctx.barrier()
        assert ctx.max_reduce(3.25) == 3.25
    finally:
        dist.destroy_process_group()


def test_rank_entry_point_writes_an_error_result(tmp_path):
    """A rank that cannot even join the group still reports (ERROR), then exits."""
    request = tmp_path / "req.json"
    request.write_text(
        json.dumps(
            {
                "module": "json",
                "config": {},
                "action": "test",
                "options": {},
                "backend": "no-such-backend",
            }
        )
    )
    result = tmp_path / "rank0.json"
    env = {**os.environ, **distributed.rank_env(0, 1, distributed.free_port())}
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.distributed", str(request), str(result)],
        env=env,
        check=True,
        timeout=120,
    )
    out = json.loads(result.read_text())
    assert out["status"] == "ERROR", out
    assert out["detail"].startswith("process group init failed")
    assert "no-such-backend" in out["detail"]


# ---- the suite takes num_gpus from KERNEL_META -----------------------------------------------


def test_suite_num_gpus_defaults_to_kernel_meta(tmp_path):
    from tirx_kernels.core.suite.config import load_suite

    kernels = {
        "ag": types.SimpleNamespace(
            name="ag", family="fam", bench_labels=["a", "b", "c"], meta={**GOOD, "num_gpus": 2}
        ),
        "one": types.SimpleNamespace(name="one", family="fam", bench_labels=["a"], meta=GOOD),
    }
    ag = tmp_path / "ag.yaml"
    ag.write_text(
        "kernel: ag\nconfigs:\n  - {config: a, default: true}\n"
        "  - {config: b, default: false, num_gpus: 4}\n"
    )
    one = tmp_path / "one.yaml"
    one.write_text("kernel: one\nconfigs:\n  - {config: a, default: true}\n")
    workloads = load_suite([("fam", ag), ("fam", one)], kernels)
    assert [(w.kernel, w.config, w.num_gpus) for w in workloads] == [
        ("ag", "a", 2),
        ("ag", "b", 4),
        ("one", "a", 1),
    ]
    ag.write_text("kernel: ag\ndefaults: {num_gpus: 8}\nconfigs:\n  - {config: c, default: true}\n")
    assert [w.num_gpus for w in load_suite([("fam", ag)], kernels)] == [8]


# ---- the real kernel, through the real runner (slow: nvcc) -------------------------------------


def test_allgather_gemm_compiles_to_cubin_without_gpus():
    from tirx_kernels.core.registry import Registry

    kernel = Registry.load().get("allgather_gemm")
    assert kernel.meta["num_gpus"] == 2
    r = run_config(Request("allgather_gemm", "bf16_w2_ml333_n520_k264", "test"), timeout=600)
    found, arch = distributed.gpus_available(kernel.archs)
    if found >= 2:
        pytest.skip("this machine can launch it: covered by the GPU run")
    assert r.status == "PASS", r.detail
    assert r.launched is False
    assert "compiled 1 kernel(s) to sm_90a cubin" in r.detail
    assert f"launch skipped: needs 2 sm_90a GPUs, found {found}" in r.detail
