# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""tirx-run end to end in subprocesses: statuses, exit codes, JSON, timeouts, crashes."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import (
    HEADER,
    interrupt,
    kernel_source,
    kill_9_and_expect_the_worker_gone,
    kill_leftovers,
    wait_gone,
)

MODES = ["pass", "fail", "skip", "error", "crash", "hang"]
CONFIGS = repr([{"label": m, "mode": m} for m in MODES])


def tirx_run(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def modes_family(fake_site):
    fake_site.family("alpha", {"kern": kernel_source("alpha_kern", "alpha", configs=CONFIGS)})
    return fake_site


def test_every_status_and_its_exit_code(modes_family):
    p = tirx_run("test", "--kernel", "alpha_kern", "--json", "--timeout", "5", "-j", "3")
    assert p.returncode == 1, p.stderr
    results = {r["label"]: r for r in json.loads(p.stdout)["results"]}
    assert {k: r["status"] for k, r in results.items()} == {
        "pass": "PASS",
        "fail": "FAIL",
        "skip": "SKIP",
        "error": "ERROR",
        "crash": "ERROR",
        "hang": "TIMEOUT",
    }
    assert "max abs error 0.5" in results["fail"]["detail"]
    assert "no fake GPU" in results["skip"]["detail"]
    assert (
        "SIGSEGV" in results["crash"]["detail"] and "about to crash" in results["crash"]["detail"]
    )
    assert "no result after 5 s" in results["hang"]["detail"]
    assert results["hang"]["seconds"] < 30
    summary = json.loads(p.stdout)["summary"]
    assert (summary["total"], summary["PASS"], summary["TIMEOUT"]) == (6, 1, 1)
    assert "[6/6 done" in p.stderr  # progress


def test_exit_zero_when_nothing_failed(modes_family):
    p = tirx_run("test", "--kernel", "alpha_kern", "--config", "pass", "--config", "skip")
    assert p.returncode == 0, p.stderr
    assert "2 config(s): 1 PASS, 1 SKIP" in p.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["test", "--kernel", "nope"], "no kernel 'nope'; installed kernels: alpha_kern"),
        (["test", "--kernel", "alpha_kern", "--config", "zzz"], "available: pass, fail"),
        (["test", "--config", "pass"], "--config needs exactly one --kernel"),
        (["test", "--family", "nope"], "no family 'nope'; installed families: alpha"),
        (["list", "--family", "nope"], "no family 'nope'"),
        (["test", "--kernel", "alpha_kren"], "no kernel 'alpha_kren' (did you mean 'alpha_kern'?)"),
        (["test", "--family", "alhpa"], "no family 'alhpa' (did you mean 'alpha'?)"),
        (
            ["test", "--kernel", "alpha_kern", "--config", "pas"],
            "no config 'pas' in its CONFIGS (did you mean 'pass'?); available: pass, fail",
        ),
    ],
)
def test_usage_errors_exit_2_and_list_what_exists(modes_family, args, message):
    p = tirx_run(*args)
    assert p.returncode == 2
    assert message in p.stderr


def test_kernel_is_repeatable(fake_site):
    one = repr([{"label": "pass", "mode": "pass"}])
    fake_site.family(
        "alpha",
        {
            "a": kernel_source("alpha_a", "alpha", configs=one),
            "b": kernel_source("alpha_b", "alpha", configs=one),
            "c": kernel_source("alpha_c", "alpha", configs=one),
        },
    )
    p = tirx_run(
        "test", "--kernel", "alpha_a", "--kernel", "alpha_c", "--kernel", "alpha_a", "--json"
    )
    assert p.returncode == 0, p.stderr
    assert [r["kernel"] for r in json.loads(p.stdout)["results"]] == ["alpha_a", "alpha_c"]
    p = tirx_run("test", "--kernel", "alpha_a", "--kernel", "alpha_c", "--config", "pass")
    assert p.returncode == 2 and "--config needs exactly one --kernel" in p.stderr


def test_family_is_repeatable(fake_site):
    one = repr([{"label": "pass", "mode": "pass"}])
    for fam in ("alpha", "beta", "gamma"):
        fake_site.family(fam, {"k": kernel_source(f"{fam}_k", fam, configs=one)})
    p = tirx_run("test", "--family", "alpha", "--family", "gamma", "--family", "alpha", "--json")
    assert p.returncode == 0, p.stderr
    assert sorted(r["kernel"] for r in json.loads(p.stdout)["results"]) == ["alpha_k", "gamma_k"]
    p = tirx_run("list", "--family", "beta", "--family", "gamma", "--format", "json")
    assert sorted(k["name"] for k in json.loads(p.stdout)) == ["beta_k", "gamma_k"]
    p = tirx_run("test", "--family", "alpha", "--family", "beta", "--kernel", "beta_k", "--json")
    assert [r["kernel"] for r in json.loads(p.stdout)["results"]] == ["beta_k"]
    p = tirx_run("test", "--family", "alpha", "--kernel", "gamma_k")
    assert p.returncode == 2 and "kernel 'gamma_k' belongs to family 'gamma'" in p.stderr


def test_list_json_and_text(modes_family):
    p = tirx_run("list", "--format", "json")
    assert p.returncode == 0
    [k] = json.loads(p.stdout)
    assert k["name"] == "alpha_kern" and k["family"] == "alpha" and k["archs"] == ["sm_90a"]
    assert k["configs"] == MODES
    text = tirx_run("list").stdout
    assert "alpha_kern" in text and "sm_90a" in text and "pass, fail" in text


def test_plugins_reports_broken_families(modes_family):
    modes_family.family("broken", plugin=HEADER + "raise ImportError('no such thing')\n")
    p = tirx_run("plugins", "--format", "json")
    data = json.loads(p.stdout)
    assert data["families"][0] | {"version": "1.0"} == {
        "name": "alpha",
        "distribution": "fake-alpha",
        "version": "1.0",
        "license": "Apache-2.0",
        "kernels": 1,
    }
    assert data["broken"][0]["distribution"] == "fake-broken"
    assert "no such thing" in data["broken"][0]["error"]
    assert tirx_run("--strict", "plugins").returncode == 2


def test_bench_forwards_only_given_options_and_prints_ratio(modes_family):
    p = tirx_run("bench", "--kernel", "alpha_kern", "--config", "pass", "--json")
    assert p.returncode == 0, p.stderr
    [row] = json.loads(p.stdout)["results"]
    assert row["impls_us"] == {"tirx": 10.0, "torch": 15.0}
    assert row["ratio"] == pytest.approx(1.5)
    p = tirx_run(
        "bench",
        "--kernel",
        "alpha_kern",
        "--config",
        "pass",
        "--timer",
        "event",
        "--rounds",
        "2",
        "--cooldown",
        "0",
        "--warmup",
        "5",
        "--json",
    )
    [row] = json.loads(p.stdout)["results"]
    assert row["timer"] == "event"
    text = tirx_run("bench", "--kernel", "alpha_kern", "--config", "pass").stdout
    assert "ratio fastest-reference/ours: 1.500" in text and "(timer: proton)" in text


def test_bench_options_reach_run_bench(fake_site):
    body = """
    def run_bench(**kw):
        return {"impls": {"tirx": 1.0}, "errors": {"flashinfer": "not installed"},
                "timer": "proton", "kw": sorted(kw)}
    """
    fake_site.family(
        "alpha", {"kern": kernel_source("alpha_kern", "alpha", body=body)}, protocol=False
    )
    # the default protocol SKIPs bench without a sm_90a GPU (this CPU machine)
    p = tirx_run("bench", "--kernel", "alpha_kern", "--json")
    [row] = json.loads(p.stdout)["results"]
    assert row["status"] == "SKIP" and "needs a sm_90a GPU" in row["detail"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["test", "--timeout", "0"], "argument --timeout: must be a finite number > 0, got '0'"),
        # row 11 of issue #27: a NaN timeout never expires, an infinite one neither
        (
            ["test", "--timeout", "nan"],
            "argument --timeout: must be a finite number > 0, got 'nan'",
        ),
        (["test", "--timeout", "inf"], "argument --timeout: must be a finite number > 0"),
        (["test", "-j", "0"], "argument -j/--jobs: must be an integer >= 1, got '0'"),
        (["test", "-j", "two"], "argument -j/--jobs: must be an integer >= 1, got 'two'"),
        (["bench", "--rounds", "0"], "argument --rounds: must be an integer >= 1"),
        (["bench", "--cooldown", "nan"], "argument --cooldown: must be a finite number >= 0"),
        (["bench", "--warmup", "inf"], "argument --warmup: must be a finite number >= 0"),
        (["bench", "--repeat", "-5"], "argument --repeat: must be a finite number > 0"),
    ],
    ids=[
        "timeout-0",
        "timeout-nan",
        "timeout-inf",
        "jobs-0",
        "jobs-word",
        "rounds-0",
        "cooldown-nan",
        "warmup-inf",
        "repeat-negative",
    ],
)
def test_numbers_must_be_finite_and_in_range(modes_family, args, message):
    p = tirx_run(*args, "--kernel", "alpha_kern", "--config", "pass")
    assert p.returncode == 2, p.stderr
    assert message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr  # one line, no usage dump
    assert "--help" in p.stderr  # where to look for the fix


def start_with_a_hanging_child(*extra):
    """tirx-run running ``pass`` and ``hang`` (-j 2) once only the hanging child is left:
    (the tirx-run process, the pid of its hanging worker)."""
    args = [
        "test",
        "--kernel",
        "alpha_kern",
        "--config",
        "pass",
        "--config",
        "hang",
        "--json",
        "-j",
        "2",
        *extra,
    ]
    p = subprocess.Popen(
        [sys.executable, "-m", "tirx_kernels.core.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        children = subprocess.run(
            ["pgrep", "-P", str(p.pid)], capture_output=True, text=True
        ).stdout.split()
        if len(children) == 1 and "PASS" in _peek_progress(p):
            return p, int(children[0])
    p.kill()
    raise AssertionError("the hanging config never became the only child")


def _peek_progress(p) -> str:
    """The stderr so far, without blocking (progress lines)."""
    import fcntl

    fd = p.stderr.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        chunk = p.stderr.read() or ""
    except (BlockingIOError, TypeError):
        chunk = ""
    p.peeked = getattr(p, "peeked", "") + chunk
    return p.peeked


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "SIGINT every 2 ms"])
def test_signal_kills_the_worker_and_keeps_results(modes_family, how):
    """SIGTERM ends the run and its children, keeping the finished results. Rows 4 and 5 of
    issue #27: SIGHUP left the worker running with no timeout; a second Ctrl-C a few ms after
    the first lost the results and orphaned the workers."""
    p, worker = start_with_a_hanging_child()
    try:
        interrupt(p, how)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130, err
        data = json.loads(out)
        assert data["interrupted"] is True
        assert [(r["label"], r["status"]) for r in data["results"]] == [("pass", "PASS")]
        assert wait_gone([worker], timeout=5) == [], "the hanging worker outlived tirx-run"
    finally:
        p.kill()
        kill_leftovers([worker])


def test_kill_9_of_tirx_run_takes_the_worker_down(modes_family):
    """Row 4 of issue #27: a worker whose tirx-run died (kill -9) ran on, no timeout."""
    p, worker = start_with_a_hanging_child()
    kill_9_and_expect_the_worker_gone(p, worker)


def run_with_closed_stdout(*args):
    """tirx-run with its stdout a pipe whose reader has gone (`| head -1` after one line)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "tirx_kernels.core.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    p.stdout.close()  # before tirx-run writes anything: its first write breaks the pipe
    err = p.stderr.read()
    p.wait(timeout=120)
    return p.returncode, err


def test_list_into_a_closed_pipe_is_one_line(modes_family):
    """Row 13 of issue #27: `tirx-run list | head -1` printed a BrokenPipeError traceback."""
    code, err = run_with_closed_stdout("list")
    assert code == 1 and "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("\n") == 1 and "stdout was closed" in err


def test_json_results_survive_a_closed_stdout(modes_family):
    """Row 14 of issue #27: `test --json` results were lost when stdout was a closed pipe."""
    import re

    code, err = run_with_closed_stdout(
        "test", "--kernel", "alpha_kern", "--config", "pass", "--config", "fail", "--json"
    )
    assert code == 1 and "Traceback" not in err and "Exception ignored" not in err, err
    line = err.strip().splitlines()[-1]
    saved = re.search(r"saved in (\S+\.json)", line)
    assert "stdout was closed" in line and saved, err
    try:
        data = json.loads(open(saved.group(1)).read())
    finally:
        os.unlink(saved.group(1))
    assert [(r["label"], r["status"]) for r in data["results"]] == [
        ("pass", "PASS"),
        ("fail", "FAIL"),
    ]


def test_unwritable_log_dir_is_refused_before_the_run(modes_family, tmp_path):
    """Row 13 of issue #27: an unusable --log-dir gave a traceback after the run started."""
    (tmp_path / "file").write_text("")
    p = tirx_run(
        "test",
        "--kernel",
        "alpha_kern",
        "--config",
        "pass",
        "--log-dir",
        str(tmp_path / "file" / "logs"),
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    [line] = p.stderr.strip().splitlines()  # one line; no config started
    assert "--log-dir" in line and str(tmp_path / "file" / "logs") in line and "fix:" in line


@pytest.mark.parametrize(
    "args",
    [
        ["--strict", "plugins"],
        ["plugins", "--strict"],
        ["list", "--strict"],
        ["test", "--strict", "--kernel", "alpha_kern", "--config", "pass"],
    ],
)
def test_strict_before_or_after_the_subcommand(modes_family, args):
    modes_family.family("broken", plugin=HEADER + "raise ImportError('no such thing')\n")
    p = tirx_run(*args)
    assert p.returncode == 2, p.stderr
    assert "family 'broken' from fake-broken failed to load" in p.stderr
    p = tirx_run(*[a for a in args if a != "--strict"])
    assert p.returncode == 0, p.stderr  # without it: a warning, the rest works


WARM = ["pid", "pid", "fail", "pid", "crash", "pid", "hang", "pid", "skip", "pid"]


@pytest.fixture
def warm_family(fake_site):
    configs = repr([{"label": f"{i}_{m}", "mode": m} for i, m in enumerate(WARM)])
    fake_site.family("warm", {"kern": kernel_source("warm_kern", "warm", configs=configs)})
    return fake_site


def test_reused_workers_keep_every_status_and_retire_after_failures(warm_family, tmp_path):
    p = tirx_run(
        "test", "--kernel", "warm_kern", "--json", "--timeout", "5", "--reuse-workers",
        "--log-dir", str(tmp_path),
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    results = json.loads(p.stdout)["results"]
    statuses = [r["status"] for r in results]
    expected = {"pid": "PASS", "fail": "FAIL", "crash": "ERROR", "hang": "TIMEOUT", "skip": "SKIP"}
    assert statuses == [expected[m] for m in WARM]
    pid = {
        int(r["label"].split("_")[0]): r["detail"] for r in results if r["label"].endswith("pid")
    }
    assert pid[0] == pid[1]  # one warm worker ran both
    assert len({pid[1], pid[3], pid[5], pid[7]}) == 4  # replaced after FAIL, crash, timeout
    assert pid[9] == pid[7]  # a SKIP keeps the worker
    crash_log = (tmp_path / "warm_kern.4_crash.test.log").read_text()
    assert "about to crash" in crash_log
    assert "about to crash" not in (tmp_path / "warm_kern.5_pid.test.log").read_text()
    assert "SIGSEGV" in results[4]["detail"] or "crashed" in results[4]["detail"]


def test_reused_workers_run_in_parallel_too(warm_family):
    p = tirx_run(
        "test", "--kernel", "warm_kern", "--json", "--timeout", "5", "--reuse-workers", "-j", "3"
    )
    assert p.returncode == 1, p.stderr
    statuses = {r["label"]: r["status"] for r in json.loads(p.stdout)["results"]}
    assert statuses["6_hang"] == "TIMEOUT" and statuses["4_crash"] == "ERROR"
    assert sum(s == "PASS" for s in statuses.values()) == 6
