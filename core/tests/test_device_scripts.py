# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The GPU-run scripts (scripts/h200-validate.sh, scripts/h200-ab.sh) do what their headers
say, run here against stand-ins for python3, nvidia-smi and the environment script: a
mistake in them costs a device call."""

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]

# python3 stand-in: logs its arguments and answers like the tools it stands for
PYTHON = r"""#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_LOG"
case "$*" in
  *upstream_tests.py*) sleep 1; touch "$STUB_LOG.upstream-done" ;;
  "-m tirx_kernels.core.cli bench"*)
    [ -f "$STUB_LOG.upstream-done" ] && echo "bench after upstream" >> "$STUB_LOG"
    echo '{"results": [{"config": "c1", "status": "PASS",'
    echo '"impls_us": {"tirx": 2.0}, "ratio": 1.5}]}' ;;
  "-m tirx_kernels.core.suite --workloads"*)
    dir=$(echo "$*" | sed 's/.*--out-dir \([^ ]*\).*/\1/'); mkdir -p "$dir/runs"
    echo "{\"commit\": \"$TIRX_SUITE_GIT_COMMIT\"}" > "$dir/runs/run.json"; echo '{}' ;;
  "-m tirx_kernels.core.suite compare"*) echo "0 regressions" ;;
  "-m tirx_kernels.core.cli test"*)  # compiles a kernel into the cache, if one is set
    [ -n "${TIRX_KERNELS_CACHE_DIR:-}" ] && echo lib > "$TIRX_KERNELS_CACHE_DIR/new.so" \
      && echo half > "$TIRX_KERNELS_CACHE_DIR/.new.tmp.so" ;;
  "-c "*) shift; exec "$REAL_PYTHON" -c "$@" ;;
  "-m pytest"*) exec "$REAL_PYTHON" "$@" ;;
esac
exit 0
"""

# the validate steps a pytest-only run leaves out (the others are off unless set)
ONLY_PYTEST = {"TEST_ARGS": "skip", "SUITE_ARGS": "skip"}


def _checkout(tmp_path: Path) -> tuple[Path, dict]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("h200-validate.sh", "h200-ab.sh", "failures_now.py"):
        shutil.copy(ROOT / "scripts" / name, repo / "scripts" / name)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "python3").write_text(PYTHON)
    (stubs / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 'NVIDIA H200, GPU-0, 580'\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    (repo / "scripts" / "h200-env.sh").write_text(f'export PATH="{stubs}:$PATH"\n')
    out = tmp_path / "out"
    out.mkdir()
    env = dict(
        os.environ,
        OUT=str(out),
        STUB_LOG=str(tmp_path / "log"),
        REAL_PYTHON=shutil.which("python3") or "python3",
    )
    env.pop("TIRX_KERNELS_CACHE_DIR", None)
    return repo, env


def _run(repo: Path, env: dict, script: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", script, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done


def test_validate_runs_upstream_tests_beside_the_tests_and_benches_after(tmp_path):
    repo, env = _checkout(tmp_path)
    env.update(
        TEST_ARGS="--family flashinfer",
        UPSTREAM_ARGS="--shards 2",
        BENCH_KERNELS="k1 k2",
        BENCH_ARGS="--rounds 3",
        SUITE_ARGS="skip",
    )
    done = _run(repo, env, "scripts/h200-validate.sh", "abc123")
    log = (tmp_path / "log").read_text().splitlines()
    out = tmp_path / "out"
    tests = [line for line in log if "cli test --family flashinfer -j 12" in line]
    assert len(tests) == 1 and "--reuse-workers" in tests[0]  # warm workers by default
    upstream = [line for line in log if "upstream_tests.py run --shards 2 --junit" in line]
    assert len(upstream) == 1 and str(out / "fi-upstream.xml") in upstream[0]
    benches = [line for line in log if "cli bench --kernel" in line]
    assert [b.split("--kernel ")[1].split()[0] for b in benches] == ["k1", "k2"]
    assert all(f"--log-dir {out}/logs-k" in b and "--rounds 3" in b for b in benches)
    assert all("--reuse-workers" in b for b in benches)
    assert log.count("bench after upstream") == 2  # the benches wait for the compile-bound tests
    assert "c1 PASS {'tirx': 2.0} 1.5" in done.stdout
    assert "upstream tests: exit 0" in (out / "fi-upstream.log").read_text()
    assert not any("core.suite" in line for line in log)  # SUITE_ARGS=skip


def test_validate_sends_back_the_kernels_it_compiled(tmp_path):
    """Only cache entries written during the run travel back (not those unpacked from the
    carried archive, nor a half-written temporary)."""
    repo, env = _checkout(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "carried.so").write_text("old")
    os.utime(cache / "carried.so", (time.time() - 3600,) * 2)
    env.update(TIRX_KERNELS_CACHE_DIR=str(cache), TEST_ARGS="--kernel k", SUITE_ARGS="skip")
    done = _run(repo, env, "scripts/h200-validate.sh", "abc123")
    assert "kernels compiled here: 1 cache file(s)" in done.stdout
    with tarfile.open(tmp_path / "out" / "kernel-cache-new.tar.xz") as tar:
        assert tar.getnames() == ["./new.so"]
    env.update(TEST_ARGS="skip")  # nothing compiled: no archive, and no error
    (tmp_path / "out" / "kernel-cache-new.tar.xz").unlink()
    done = _run(repo, env, "scripts/h200-validate.sh", "abc123")
    assert "kernels compiled here: 0 cache file(s)" in done.stdout
    assert not (tmp_path / "out" / "kernel-cache-new.tar.xz").exists()


def test_validate_records_each_pytest_failure_as_it_happens(tmp_path):
    repo, env = _checkout(tmp_path)
    (repo / "test_two.py").write_text(
        "import time\n\ndef test_broken():\n    assert 1 == 2\n\n"
        "def test_slow():\n    time.sleep(30)\n"
    )
    env.update(ONLY_PYTEST, PYTEST_ARGS="test_two.py", PYTEST_T="8")
    _run(repo, env, "scripts/h200-validate.sh", "abc123")
    out = tmp_path / "out"
    assert "exit 124" in (out / "pytest-1.log").read_text()  # killed before pytest's summary
    failures = (out / "pytest-1.failures").read_text()
    assert failures == "test_two.py::test_broken (call): assert 1 == 2\n"


def test_validate_ends_a_hung_test_early_and_names_it(tmp_path):
    repo, env = _checkout(tmp_path)
    (repo / "test_hang.py").write_text(
        "import time\n\ndef test_fine():\n    pass\n\n"
        "def test_hangs():\n    time.sleep(60)\n\n"
        "def test_never_reached():\n    pass\n"
    )
    env.update(ONLY_PYTEST, PYTEST_ARGS="test_hang.py", PYTEST_T="50", TIRX_TEST_TIMEOUT="2")
    started = time.monotonic()
    _run(repo, env, "scripts/h200-validate.sh", "abc123")
    assert time.monotonic() - started < 30  # not the 50 s of PYTEST_T
    out = tmp_path / "out"
    assert "exit 124" in (out / "pytest-1.log").read_text()
    failures = (out / "pytest-1.failures").read_text()
    assert failures == (
        "test_hang.py::test_hangs (timeout): still running after 2 s; the process exits\n"
    )


def test_ab_measures_the_old_tree_then_this_one_and_compares(tmp_path):
    repo, env = _checkout(tmp_path)
    old = tmp_path / "old"
    (old / "core").mkdir(parents=True)
    (old / "packages" / "fam").mkdir(parents=True)
    with tarfile.open(tmp_path / "old.tar.xz", "w:xz") as tar:
        tar.add(old / "core", "core")
        tar.add(old / "packages", "packages")
    (repo / "core").mkdir()
    (repo / "packages" / "fam").mkdir(parents=True)
    (repo / "w.yaml").write_text("workloads: []\n")
    env.update(
        OLD_TAR=str(tmp_path / "old.tar.xz"), AB_TMP=str(tmp_path / "ab"), SUITE_ARGS="--rounds 3"
    )
    done = _run(repo, env, "scripts/h200-ab.sh", "old1", "new2", "w.yaml")
    log = (tmp_path / "log").read_text().splitlines()
    installs = [line for line in log if "-m pip install" in line]
    assert (
        len(installs) == 2 and "/packages/fam/" in installs[0] and "./packages/fam/" in installs[1]
    )
    assert "./core" not in installs[0] and "./core" in installs[1]  # the old tree first
    suites = [line for line in log if "core.suite --workloads" in line]
    assert [f"{tmp_path}/ab/ab-{tag}" in s for tag, s in zip(("before", "after"), suites)] == [
        True,
        True,
    ]
    assert all("--rounds 3" in s and "--no-compare" in s for s in suites)
    out = tmp_path / "out"
    assert (out / "suite-before.json").read_text().strip() == '{"commit": "old1"}'
    assert (out / "suite-after.json").read_text().strip() == '{"commit": "new2"}'
    suite_steps = [line.split()[3] for line in log if "core.suite" in line]
    assert suite_steps == ["--workloads", "--workloads", "promote", "compare", "compare"]
    assert log.index(installs[1]) < log.index(suites[1])  # this tree measured after its install
    assert any(f"promote --merge --baselines {tmp_path}/ab/ab-baselines" in line for line in log)
    assert "0 regressions" in done.stdout
