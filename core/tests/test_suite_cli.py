# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""tirx-suite end to end: fake backend (in process, virtual time), then real child processes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    HEADER,
    PLUGIN,
    interrupt,
    kernel_source,
    kill_9_and_expect_the_worker_gone,
    kill_leftovers,
    wait_gone,
)
from test_suite_support import FakeBackend, FakeKernel, FakeRegistry, fake_gpus, write_yaml

from tirx_kernels.core.suite import cli, results
from tirx_kernels.core.suite.cli import Backend, main
from tirx_kernels.core.suite.gpus import LockPool

CLEAN = {"commit": "a" * 40, "dirty": False, "source": "git"}


@pytest.fixture
def clean_git(monkeypatch):
    monkeypatch.setattr(results, "git_state", lambda where=None: dict(CLEAN))


def suite(tmp_path, entries=("pass", "skip"), kernel="k", extra=""):
    lines = "\n".join(f"  - {{config: {c}, default: true}}" for c in entries)
    f = write_yaml(tmp_path, f"{kernel}.yaml", f"kernel: {kernel}\nconfigs:\n{lines}\n{extra}")
    return FakeRegistry([FakeKernel(kernel, "fam")], [("fam", f)])


def run_cli(tmp_path, registry, *args, **backend_kw):
    backend = FakeBackend(registry, tmp=tmp_path, **backend_kw)
    code = main(
        ["--out-dir", str(tmp_path / "out"), "--baselines", str(tmp_path / "base"), *args],
        backend=backend,
    )
    runs = sorted((tmp_path / "out" / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
    doc = json.loads(runs[-1].read_text()) if runs else None
    return code, doc, backend


def test_sweep_writes_run_json_report_and_plot(tmp_path, capsys, clean_git):
    code, doc, backend = run_cli(tmp_path, suite(tmp_path), "--rounds", "3", "--cooldown", "0.5")
    err = capsys.readouterr().err
    assert code == 0, err
    assert doc["schema_version"] == 1 and doc["complete"] and not doc["interrupted"]
    assert doc["selection"]["default_sweep"] is True
    assert doc["options"]["rounds"] == 3 and doc["options"]["cooldown_s"] == 0.5
    assert doc["options"]["monitor"] == "nvidia-smi"
    assert backend.executor_kwargs["rounds"] == 3
    assert backend.executor_kwargs["cache_root"] == (tmp_path / "out" / "cache").resolve()
    prov = doc["provenance"]
    assert prov["gpus"][0]["name"] == "NVIDIA H200" and prov["gpus"][0]["uuid"] == "GPU-fake-0"
    assert prov["git"] == CLEAN
    assert {"apache-tvm-tirx", "torch", "triton"} <= set(prov["versions"])
    row, skip = doc["rows"]
    assert (row["status"], row["impls_us"], row["ratio"], row["timer"]) == (
        "PASS",
        {"tirx": 10.0, "torch": 15.0},
        1.5,
        "proton",
    )
    assert row["round_samples"]["tirx"] == [9.9, 10.0, 10.1]
    assert row["gpu_model"] == "nvidia-h200" and row["gpus"] == ["GPU-fake-0"]
    assert skip["status"] == "SKIP" and skip["detail"] == "needs flashinfer"
    assert doc["summary"]["PASS"] == 1 and doc["summary"]["SKIP"] == 1
    report = (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()
    assert "| config | status | timer | tirx (µs) | torch (µs) | ratio ref/ours |" in report
    assert "| pass | PASS | proton | 10.00 | 15.00 | 1.500 |" in report
    assert "no baseline yet" in report and "![ratio" in report
    png = (tmp_path / "out" / "reports" / doc["run_id"] / "ratios.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert "[1/2] k pass on GPU 0" in err and "[2/2 done" in err and "ETA" in err


def test_fail_fast_exit_1_and_keep_going(tmp_path, clean_git):
    reg = suite(tmp_path, ("pass", "fail", "crash", "skip"))
    code, doc, backend = run_cli(tmp_path, reg)
    assert code == 1
    assert [r["status"] for r in doc["rows"]] == ["PASS", "FAIL"]
    assert [x["config"] for x in doc["not_run"]] == ["crash", "skip"]
    assert "fail-fast" in doc["stopped"] and not doc["complete"]
    report = (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()
    assert "## Failures" in report and "max abs error 0.5" in report
    assert "## Not run" in report
    code, doc, _ = run_cli(tmp_path, reg, "--keep-going")
    assert code == 1 and [r["status"] for r in doc["rows"]] == ["PASS", "FAIL", "FAIL", "SKIP"]


def test_timeout_and_interference_in_the_run_json(tmp_path, clean_git):
    reg = suite(tmp_path, ("hang", "interfere1"))
    code, doc, _ = run_cli(tmp_path, reg, "--timeout", "20", "--keep-going")
    assert code == 1
    hang, interfered = doc["rows"]
    assert hang["status"] == "TIMEOUT" and "no result after 20 s" in hang["detail"]
    assert interfered["status"] == "PASS"
    assert [a["status"] for a in interfered["attempts"]] == ["INTERFERED", "PASS"]
    assert interfered["attempts"][0]["interference"]
    assert doc["summary"]["retried"] == 1
    report = (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()
    assert "## Interference" in report and "k interfere1: 2 attempts, final PASS" in report


def test_ctrl_c_writes_the_partial_run_and_exits_130(tmp_path, capsys, clean_git):
    reg = suite(tmp_path, ("pass", "hang", "skip"))
    code, doc, backend = run_cli(tmp_path, reg, interrupt_at=15.0)
    assert code == 130
    assert doc["interrupted"] and not doc["complete"]
    assert [r["status"] for r in doc["rows"]] == ["PASS"]
    assert [(x["config"], x["reason"].split()[0]) for x in doc["not_run"]] == [
        ("hang", "interrupted"),
        ("skip", "interrupted"),
    ]
    assert backend.fake_executor.started[1].killed
    assert "Interrupted" in (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()


def test_partial_run_is_saved_after_every_row(tmp_path, clean_git, monkeypatch):
    saved = []
    real_save = cli.save_json
    monkeypatch.setattr(
        cli, "save_json", lambda p, d: saved.append(json.loads(json.dumps(d))) or real_save(p, d)
    )
    run_cli(tmp_path, suite(tmp_path, ("pass", "skip")))
    first = saved[0]
    assert [r["config"] for r in first["rows"]] == ["pass"]
    assert first["not_run"] == [
        {"kernel": "k", "config": "skip", "reason": "not finished (run in progress or killed)"}
    ]
    assert saved[-1]["complete"]


def test_regression_against_the_promoted_baseline_exits_3(tmp_path, capsys, clean_git):
    reg = suite(tmp_path, ("pass",))
    code, doc, _ = run_cli(tmp_path, reg)
    assert code == 0
    run_json = tmp_path / "out" / "runs" / f"{doc['run_id']}.json"
    assert main(["promote", str(run_json), "--baselines", str(tmp_path / "base")]) == 0
    assert (tmp_path / "base" / "nvidia-h200" / "baseline.json").exists()
    assert (
        "| pass | proton | 10.00 | 15.00 | 1.500 |"
        in (tmp_path / "base" / "nvidia-h200" / "baseline.md").read_text()
    )
    slower = {("k", "pass"): {"tirx": 12.0, "torch": 15.0}}
    code, doc, _ = run_cli(tmp_path, reg, impls=slower)
    err = capsys.readouterr().err
    assert code == 3, err
    (row,) = doc["comparison"]["rows"]
    assert row["verdict"] == "regression" and row["before_us"] == 10.0 and row["after_us"] == 12.0
    assert "REGRESSION k pass: 10.00 -> 12.00 us (+20.0% > 4.0%)" in err
    report = (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()
    assert "**REGRESSION**" in report and "max(3%, 2 × measured noise)" in report
    # a threshold above the change: fine
    code, doc, _ = run_cli(tmp_path, reg, "--threshold", "25", impls=slower)
    assert code == 0
    run_json = tmp_path / "out" / "runs" / f"{doc['run_id']}.json"
    assert main(["compare", str(run_json), "--baselines", str(tmp_path / "base")]) == 3
    assert (
        main(["compare", str(run_json), "--baselines", str(tmp_path / "base"), "--threshold", "30"])
        == 0
    )
    assert (
        main(
            [
                "report",
                str(run_json),
                "--baselines",
                str(tmp_path / "base"),
                "--out-dir",
                str(tmp_path / "out2"),
            ]
        )
        == 0
    )


def test_json_summary_on_stdout(tmp_path, capsys, clean_git):
    code, doc, _ = run_cli(
        tmp_path, suite(tmp_path, ("pass", "baseline_error")), "--json", "--keep-going"
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["exit_code"] == 1 and out["run_id"] == doc["run_id"]
    assert [(r["config"], r["status"]) for r in out["rows"]] == [
        ("pass", "PASS"),
        ("baseline_error", "BASELINE_ERROR"),
    ]
    assert "reference 'flashinfer' failed" in out["rows"][1]["detail"]
    assert out["summary"]["BASELINE_ERROR"] == 1


def test_no_gpu_skips_cleanly(tmp_path, capsys, clean_git):
    code, doc, backend = run_cli(tmp_path, suite(tmp_path), n_gpus=0)
    assert code == 0
    assert {r["status"] for r in doc["rows"]} == {"SKIP"}
    assert doc["rows"][0]["detail"] == "no GPU: no nvidia-smi"
    assert backend.fake_executor.started == []
    assert "no GPU" in capsys.readouterr().err


def test_multi_gpu_sweep_spreads_over_all_gpus(tmp_path, clean_git):
    entries = ("pass",)
    f = write_yaml(tmp_path, "k.yaml", "kernel: k\nconfigs: [{config: pass, default: true}]")
    g = write_yaml(
        tmp_path,
        "g.yaml",
        "kernel: g\ndefaults: {num_gpus: 2}\nconfigs: [{config: pass, default: true}]",
    )
    h = write_yaml(
        tmp_path,
        "h.yaml",
        "kernel: h\ndefaults: {num_gpus: 8}\nconfigs: [{config: pass, default: true}]",
    )
    extra = [
        write_yaml(
            tmp_path, f"k{i}.yaml", f"kernel: k{i}\nconfigs: [{{config: pass, default: true}}]"
        )
        for i in range(5)
    ]
    reg = FakeRegistry(
        [FakeKernel(n, "fam", entries) for n in ("k", "g", "h")]
        + [FakeKernel(f"k{i}", "fam", entries) for i in range(5)],
        [("fam", p) for p in (f, g, h, *extra)],
    )
    code, doc, backend = run_cli(tmp_path, reg, n_gpus=4)
    assert code == 0
    ex = backend.fake_executor
    assert ex.started[0].workload.kernel == "g" and ex.max_concurrent == 4
    status = {r["kernel"]: r["status"] for r in doc["rows"]}
    assert status["h"] == "SKIP" and all(s == "PASS" for k, s in status.items() if k != "h")
    assert len(next(r for r in doc["rows"] if r["kernel"] == "g")["gpus"]) == 2


def test_check_imports(tmp_path, capsys):
    ok = FakeKernel("k", "fam")
    reg = suite(tmp_path)
    reg.kernels["k"] = ok
    assert main(["--check-imports"], backend=FakeBackend(reg, tmp=tmp_path)) == 0
    assert ok.loaded == 1 and "imported 1 kernel module(s)" in capsys.readouterr().out
    f1 = write_yaml(tmp_path, "a.yaml", "kernel: a\nconfigs: [{config: pass, default: true}]")
    f2 = write_yaml(tmp_path, "b.yaml", "kernel: b\nconfigs: [{config: pass, default: true}]")
    f3 = write_yaml(tmp_path, "c.yaml", "kernel: c\nconfigs: [{config: pass, default: false}]")
    kernels = [
        FakeKernel("a", "fam"),
        FakeKernel("b", "fam", import_error="No module 'x'"),
        FakeKernel("c", "fam", import_error="not in the default sweep"),
    ]
    reg = FakeRegistry(kernels, [("fam", f1), ("fam", f2), ("fam", f3)])
    assert main(["--check-imports"], backend=FakeBackend(reg, tmp=tmp_path)) == 1
    err = capsys.readouterr().err
    assert "import of kernel 'b' (fake.b) failed" in err and "No module 'x'" in err
    assert "Traceback" not in err and "TIRX_KERNELS_DEBUG=1" in err  # one line unless asked
    assert kernels[2].loaded == 0  # only the default sweep is imported


def test_list(tmp_path, capsys):
    reg = suite(tmp_path, ("pass", "skip"))
    assert main(["--list", "--config", "skip"], backend=FakeBackend(reg, tmp=tmp_path)) == 0
    assert capsys.readouterr().out.split() == ["k", "skip", "fam", "default", "num_gpus=1"]


def test_cuda_visible_devices_is_ignored_with_a_note(tmp_path, capsys, clean_git, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    code, doc, _ = run_cli(tmp_path, suite(tmp_path, ("pass",)), n_gpus=2)
    assert code == 0 and doc["rows"][0]["gpus"] == ["GPU-fake-0"]
    assert "ignoring CUDA_VISIBLE_DEVICES" in capsys.readouterr().err


# --- real child processes: the worker, the ChildExecutor and process-group kills -----------

BENCH_HOOK = """

@hookimpl
def tirx_kernels_run_bench(config, options):
    import os, signal, time, unittest
    mode = config.get("mode")
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        print("child", os.getpid(), flush=True)
        time.sleep(600)
    if mode == "skip":
        raise unittest.SkipTest("needs fakeref")
    env = {k: os.environ.get(k) for k in
           ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TIRX_BENCH_CACHE_DIR")}
    n = options["rounds"]
    return {"impls": {"tirx": 10.0, "torch": 12.0},
            "round_samples": {"tirx": [10.0] * n, "torch": [12.0] * n}, "errors": {},
            "timer": options.get("timer", "proton"),
            "benchmark_protocol": {"options": options, "env": env, "pid": os.getpid()}}
"""

MODES = ("pass", "crash", "hang", "skip")
YAML = "kernel: child_kern\nconfigs:\n" + "".join(
    f"  - {{config: {m}, default: true{', timer: event' if m == 'pass' else ''}}}\n" for m in MODES
)


class ChildBackend(Backend):
    """Real registry and executor; two fake GPUs; optionally a Ctrl-C mid-run."""

    def __init__(self, tmp, interrupt=False):
        self.tmp, self.interrupt = tmp, interrupt

    def gpus(self):
        return fake_gpus(2), "test GPUs"

    def pool(self, gpus, lock_dir):
        return LockPool(gpus, self.tmp / "locks")

    def scheduler_options(self):
        if not self.interrupt:
            return {"poll_s": 0.05}
        deadline = time.monotonic() + 60

        def sleep(dt):  # Ctrl-C once the hanging child has started (or after 60 s)
            time.sleep(dt)
            started = any("child" in p.read_text() for p in self.tmp.glob("out/runs/*/logs/*"))
            if started or time.monotonic() > deadline:
                raise KeyboardInterrupt

        return {"poll_s": 0.05, "sleep": sleep}


@pytest.fixture
def child_family(fake_site):
    configs = repr([{"label": m, "mode": m} for m in MODES])
    plugin = (
        HEADER + PLUGIN.format(kernels=("kern",), name="childfam", category="childfam") + BENCH_HOOK
    )
    fake_site.family(
        "childfam",
        {"kern": kernel_source("child_kern", "childfam", configs=configs)},
        plugin=plugin,
        files={"kern.yaml": YAML},
    )
    return fake_site


def test_real_children_statuses_env_and_logs(tmp_path, child_family, clean_git):
    out = tmp_path / "out"
    code = main(
        ["--out-dir", str(out), "--timeout", "10", "--keep-going", "--rounds", "2", "--no-compare"],
        backend=ChildBackend(tmp_path),
    )
    doc = json.loads(next((out / "runs").glob("*.json")).read_text())
    rows = {r["config"]: r for r in doc["rows"]}
    assert code == 1
    assert {k: r["status"] for k, r in rows.items()} == {
        "pass": "PASS",
        "crash": "FAIL",
        "hang": "TIMEOUT",
        "skip": "SKIP",
    }
    protocol = rows["pass"]["benchmark_protocol"]
    assert protocol["options"] == {"rounds": 2, "cooldown_s": 1.0, "timer": "event"}
    env = protocol["env"]
    assert env["CUDA_VISIBLE_DEVICES"] in ("0", "1") and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    cache = env["TIRX_BENCH_CACHE_DIR"]
    assert os.path.isabs(cache) and cache.startswith(str(out / "cache" / "nvidia-h200-driver"))
    assert "SIGSEGV" in rows["crash"]["detail"]
    assert rows["skip"]["detail"] == "needs fakeref"
    log = rows["hang"]["log"]
    assert log.startswith(str(out / "runs" / doc["run_id"] / "logs")) and os.path.exists(log)
    pid = int(open(log).read().split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung child was killed


WARM_MODES = ("pass", "crash", "pass", "hang", "pass", "skip", "pass")


@pytest.fixture
def warm_family(fake_site):
    configs = repr([{"label": f"{m}{i}", "mode": m} for i, m in enumerate(WARM_MODES)])
    yaml = "kernel: warm_kern\nconfigs:\n" + "".join(
        f"  - {{config: {m}{i}, default: true}}\n" for i, m in enumerate(WARM_MODES)
    )
    plugin = HEADER + PLUGIN.format(kernels=("kern",), name="warmfam", category="warmfam")
    fake_site.family(
        "warmfam",
        {"kern": kernel_source("warm_kern", "warmfam", configs=configs)},
        plugin=plugin + BENCH_HOOK,
        files={"kern.yaml": yaml},
    )
    return fake_site


def test_real_warm_workers_keep_statuses_and_serve_several_workloads(
    tmp_path, warm_family, clean_git
):
    out = tmp_path / "out"
    args = ["--out-dir", str(out), "--timeout", "10", "--keep-going", "--rounds", "1"]
    code = main([*args, "--no-compare", "--reuse-workers"], backend=ChildBackend(tmp_path))
    doc = json.loads(next((out / "runs").glob("*.json")).read_text())
    rows = {r["config"]: r for r in doc["rows"]}
    assert code == 1 and doc["options"]["reuse_workers"] is True
    statuses = {"pass": "PASS", "crash": "FAIL", "hang": "TIMEOUT", "skip": "SKIP"}
    assert {c: r["status"] for c, r in rows.items()} == {
        f"{m}{i}": statuses[m] for i, m in enumerate(WARM_MODES)
    }
    pids = [r["benchmark_protocol"]["pid"] for c, r in rows.items() if c.startswith("pass")]
    assert len(set(pids)) < len(pids)  # a warm worker ran more than one workload
    assert "SIGSEGV" in rows["crash1"]["detail"]
    hung = int(open(rows["hang3"]["log"]).read().split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)  # the hung worker was killed
    for pid in set(pids):  # and every warm worker is gone once the run is over
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_real_children_killed_on_ctrl_c(tmp_path, child_family, clean_git):
    out = tmp_path / "out"
    yaml = tmp_path / "w.yaml"
    yaml.write_text("workloads:\n  - {kernel: child_kern, config: hang}\n")
    code = main(
        ["--out-dir", str(out), "--workloads", str(yaml), "--no-compare"],
        backend=ChildBackend(tmp_path, interrupt=True),
    )
    assert code == 130
    doc = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert doc["interrupted"] and doc["not_run"][0]["config"] == "hang"
    log = next((out / "runs" / doc["run_id"] / "logs").glob("*.log")).read_text()
    pid = int(log.split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(
    "var,value", [("TIRX_SUITE_GIT_COMMIT", "ref: refs/heads/main"), ("TIRX_SUITE_GIT_DIRTY", "no")]
)
def test_bad_git_environment_is_refused_before_running(tmp_path, capsys, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    code, doc, _ = run_cli(tmp_path, suite(tmp_path, ("pass",)))
    assert code == 2 and doc is None  # nothing ran, no run file
    assert var in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, value, message",
    [
        # row 10 of issue #27: NaN or infinity would switch the regression gate off
        ("--threshold", "nan", "argument --threshold: must be a finite number > 0, got 'nan'"),
        ("--threshold", "inf", "argument --threshold: must be a finite number > 0, got 'inf'"),
        # row 11: a NaN timeout never expires
        ("--timeout", "nan", "argument --timeout: must be a finite number > 0, got 'nan'"),
        ("--cooldown", "inf", "argument --cooldown: must be a finite number >= 0"),
        ("--retry-delay", "nan", "argument --retry-delay: must be a finite number >= 0"),
        ("--monitor-interval", "0", "argument --monitor-interval: must be a finite number > 0"),
        ("--rounds", "0", "argument --rounds: must be an integer >= 1, got '0'"),
        ("--retries", "-1", "argument --retries: must be an integer >= 0, got '-1'"),
    ],
)
def test_run_numbers_must_be_finite_and_in_range(tmp_path, capsys, clean_git, flag, value, message):
    code, doc, backend = run_cli(tmp_path, suite(tmp_path, ("pass",)), flag, value)
    err = capsys.readouterr().err
    assert code == 2 and doc is None and backend.fake_executor.started == []
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("value", ["nan", "inf", "-3"])
def test_compare_threshold_cannot_switch_the_gate_off(tmp_path, capsys, clean_git, value):
    reg = suite(tmp_path, ("pass",))
    code, doc, _ = run_cli(tmp_path, reg)
    run_json = tmp_path / "out" / "runs" / f"{doc['run_id']}.json"
    assert main(["promote", str(run_json), "--baselines", str(tmp_path / "base")]) == 0
    code, doc, _ = run_cli(
        tmp_path, reg, "--no-compare", impls={("k", "pass"): {"tirx": 20.0, "torch": 15.0}}
    )  # 2x slower
    run_json = tmp_path / "out" / "runs" / f"{doc['run_id']}.json"
    capsys.readouterr()
    code = main(
        ["compare", str(run_json), "--baselines", str(tmp_path / "base"), "--threshold", value]
    )
    assert code == 2, "the 100% slowdown passed the gate"
    assert "argument --threshold: must be a finite number > 0" in capsys.readouterr().err


def test_default_baselines_folder_does_not_depend_on_the_current_directory(tmp_path, monkeypatch):
    from tirx_kernels.core.suite import baseline as B

    root = Path(__file__).resolve().parents[2]  # the checkout holding this code
    monkeypatch.chdir(tmp_path)  # not a git checkout
    assert B.default_dir() == root / "baselines"
    # code outside any checkout (a plain install): no guess from the current directory
    with pytest.raises(B.BaselineError, match="pass --baselines DIR"):
        B.default_dir(code_dir=tmp_path)


def test_run_without_a_baselines_folder_is_refused_before_running(
    tmp_path, capsys, clean_git, monkeypatch
):
    from tirx_kernels.core.suite import baseline as B

    monkeypatch.setattr(
        B,
        "default_dir",
        lambda code_dir=None: (_ for _ in ()).throw(
            B.BaselineError("cannot find the baselines folder; fix: pass --baselines DIR")
        ),
    )
    backend = FakeBackend(suite(tmp_path, ("pass",)), tmp=tmp_path)
    code = main(["--out-dir", str(tmp_path / "out")], backend=backend)
    assert code == 2 and backend.fake_executor.started == []
    assert "pass --baselines DIR" in capsys.readouterr().err


def test_corrupt_baseline_keeps_the_run_and_fails_the_gate(tmp_path, capsys, clean_git):
    """Row 7 of issue #27, in a sweep: the run is written, the comparison error is one line."""
    reg = suite(tmp_path, ("pass",))
    code, doc, _ = run_cli(tmp_path, reg)
    run_json = tmp_path / "out" / "runs" / f"{doc['run_id']}.json"
    assert main(["promote", str(run_json), "--baselines", str(tmp_path / "base")]) == 0
    (tmp_path / "base" / "nvidia-h200" / "baseline.json").write_text('{"schema_version": 1,')
    capsys.readouterr()
    code, doc, _ = run_cli(tmp_path, reg)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert doc["rows"][0]["status"] == "PASS" and "baseline.json" in doc["comparison_error"]
    assert "git checkout" in err
    report = (tmp_path / "out" / "reports" / doc["run_id"] / "report.md").read_text()
    assert "baseline.json" in report


def test_an_unusable_lock_file_is_one_line_before_anything_runs(tmp_path, capsys, clean_git):
    """Row 1/13 of issue #27 at the CLI: a planted lock symlink is refused, exit 2."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "locks").mkdir(mode=0o1777)
    (tmp_path / "locks" / "GPU-fake-0.lock").symlink_to(victim)
    code, doc, backend = run_cli(tmp_path, suite(tmp_path, ("pass",)))
    err = capsys.readouterr().err
    assert code == 2 and backend.fake_executor.started == [] and "Traceback" not in err
    assert "symbolic link" in err.strip().splitlines()[-1] and victim.read_text() == "keep me"


def start_suite_with_a_hanging_child(tmp_path):
    """tirx-suite in its own process (two fake GPUs) running ``pass`` and ``hang``, once
    ``pass`` is done and ``hang`` runs: (the suite process, the hanging worker's pid, out)."""
    out, yaml = tmp_path / "out", tmp_path / "w.yaml"
    yaml.write_text(
        "workloads:\n  - {kernel: child_kern, config: pass}\n"
        "  - {kernel: child_kern, config: hang}\n"
    )
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tirx_kernels.core.suite",
            "--workloads",
            str(yaml),
            "--out-dir",
            str(out),
            "--lock-dir",
            str(tmp_path / "locks"),
            "--no-compare",
            "--no-monitor",
            "--rounds",
            "1",
            "--cooldown",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TIRX_SUITE_GIT_COMMIT": "a" * 40, "TIRX_SUITE_GIT_DIRTY": "0"},
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        time.sleep(0.2)
        runs = list((out / "runs").glob("*.json"))
        logs = [x.read_text() for x in (out / "runs").glob("*/logs/*hang*.log")]
        done = runs and [r["config"] for r in json.loads(runs[0].read_text())["rows"]]
        if done == ["pass"] and logs and logs[0].startswith("child"):
            return p, int(logs[0].split()[1]), out
        if p.poll() is not None:
            break
    p.kill()
    raise AssertionError(f"the hanging workload never started: {p.communicate()[1]}")


@pytest.mark.parametrize("how", ["SIGHUP", "SIGINT every 2 ms"])
def test_suite_hangup_or_repeated_ctrl_c_kills_the_worker_and_writes_the_run(
    tmp_path, child_family, fake_nvidia_smi, how
):
    """Rows 4 and 5 of issue #27 for tirx-suite."""
    p, worker, out = start_suite_with_a_hanging_child(tmp_path)
    try:
        interrupt(p, how)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        doc = json.loads(next((out / "runs").glob("*.json")).read_text())
        assert doc["interrupted"] and [r["status"] for r in doc["rows"]] == ["PASS"]
        assert [x["config"] for x in doc["not_run"]] == ["hang"]
        assert (out / "reports" / doc["run_id"] / "report.md").exists()
        assert wait_gone([worker], timeout=5) == [], "the hanging worker outlived the suite"
    finally:
        p.kill()
        kill_leftovers([worker])


def test_kill_9_of_the_suite_takes_the_worker_down(tmp_path, child_family, fake_nvidia_smi):
    """Row 4 of issue #27: a worker whose suite died (kill -9) ran on, with no timeout."""
    p, worker, _ = start_suite_with_a_hanging_child(tmp_path)
    kill_9_and_expect_the_worker_gone(p, worker)


@pytest.mark.parametrize("option", ["--out-dir", "--cache-dir"])
def test_unwritable_output_folder_is_refused_before_the_run(tmp_path, capsys, clean_git, option):
    """Row 13 of issue #27: an unusable --out-dir gave a traceback after the run started."""
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "sub"
    code, doc, backend = run_cli(tmp_path, suite(tmp_path, ("pass",)), option, str(bad))
    err = capsys.readouterr().err
    assert code == 2 and backend.fake_executor.started == [] and "Traceback" not in err
    assert option in err.strip().splitlines()[-1] and str(bad) in err


def test_suite_list_into_a_closed_pipe_is_one_line(tmp_path, child_family):
    """Row 13 of issue #27 for tirx-suite: `tirx-suite --list | head -1`."""
    p = subprocess.Popen(
        [sys.executable, "-m", "tirx_kernels.core.suite", "--list", "--all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=120)
    assert p.returncode == 1 and "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("\n") == 1 and "stdout was closed" in err
