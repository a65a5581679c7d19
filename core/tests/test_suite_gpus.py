# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""GPU inventory parsing, atomic cross-process acquisition, the interference monitor."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_suite_support import fake_gpus

from tirx_kernels.core.suite import gpus as G
from tirx_kernels.core.suite.executor import cache_dir
from tirx_kernels.core.suite.lockfile import LockError

SMI = """0, GPU-aaaa, NVIDIA H200, 580.159.03, 143771, 1980, 3201, 345, 3201
1, GPU-bbbb, NVIDIA H200, 580.159.03, 143771, 1980, 3201, [N/A], 3201
"""


def test_parse_smi_inventory():
    a, b = G.parse_smi_gpus(SMI)
    assert (a.index, a.uuid, a.name, a.driver, a.memory_mib) == (
        0,
        "GPU-aaaa",
        "NVIDIA H200",
        "580.159.03",
        143771,
    )
    assert a.clocks_mhz == {"max_sm": 1980, "max_mem": 3201, "sm": 345, "mem": 3201}
    assert "sm" not in b.clocks_mhz and b.index == 1
    assert a.model == "nvidia-h200" == G.model_slug("NVIDIA  H200 ")


def test_inventory_falls_back_to_minimal_fields(monkeypatch):
    monkeypatch.setattr(G.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    calls = []

    def run(cmd, **kw):
        calls.append(cmd[1])
        if "clocks.max.sm" in cmd[1]:
            return SimpleNamespace(returncode=2, stdout="", stderr="Field not valid")
        return SimpleNamespace(returncode=0, stdout="0, GPU-x, NVIDIA H100, 550.1\n", stderr="")

    found, source = G.inventory(run=run)
    assert source == "nvidia-smi" and len(calls) == 2
    assert found == [G.Gpu(0, "GPU-x", "NVIDIA H100", "550.1")]


def test_inventory_without_nvidia_smi_uses_torch_subprocess(monkeypatch):
    monkeypatch.setattr(G.shutil, "which", lambda name: None)
    seen = {}

    def run(cmd, **kw):
        seen["cmd"], seen["env"] = cmd, kw["env"]
        return SimpleNamespace(returncode=0, stdout="[]\n", stderr="")

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    found, source = G.inventory(run=run)
    assert found == [] and "torch sees no CUDA device" in source
    assert seen["cmd"][0] == sys.executable  # never in the suite process itself
    assert "CUDA_VISIBLE_DEVICES" not in seen["env"]
    assert seen["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_lock_pool_is_all_or_nothing_and_exclusive_across_pools(tmp_path):
    gpus = fake_gpus(4)
    a, b = G.LockPool(gpus, tmp_path), G.LockPool(gpus, tmp_path)  # two suite processes
    two = a.acquire(2)
    assert [g.index for g in two] == [0, 1] and a.free_count() == 2
    assert a.acquire(3) is None and a.free_count() == 2  # too many: nothing taken
    got = b.acquire(2)
    assert [g.index for g in got] == [2, 3]  # b skips a's locked GPUs
    assert b.acquire(1) is None  # b thinks 2 are free, but a holds them: all or nothing
    assert b.free_count() == 2
    a.release(two)
    assert [g.index for g in b.acquire(2)] == [0, 1]
    a.close()
    b.close()


def test_lock_is_released_when_the_holder_dies(tmp_path):
    code = (
        "import sys; from tirx_kernels.core.suite.gpus import LockPool, Gpu;"
        f"p = LockPool([Gpu(0, 'GPU-z', 'x')], {str(tmp_path)!r});"
        "assert p.acquire(1); print('held', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "held"
    pool = G.LockPool([G.Gpu(0, "GPU-z", "x")], tmp_path)
    assert pool.acquire(1) is None
    child.kill()
    child.wait()
    assert pool.acquire(1) is not None
    pool.close()


def test_parse_compute_apps():
    text = "GPU-aaaa, 123, python3\nGPU-bbbb, 456, /usr/bin/app\ngarbage\n"
    assert G.parse_compute_apps(text) == [
        ("GPU-aaaa", 123, "python3"),
        ("GPU-bbbb", 456, "/usr/bin/app"),
    ]
    assert G.parse_compute_apps("") == []


def test_classify_foreign_processes():
    probe = {10: (10, True), 11: (10, True), 20: (20, True), 30: (30, False)}.get
    apps = [
        ("G0", 10, "ours"),
        ("G0", 11, "our helper"),
        ("G0", 20, "other job"),
        ("G0", 30, "unrelated local pid"),
        ("G1", 20, "other gpu"),
        ("G0", 99, "invisible"),
        ("G0", 98, "invisible before"),
        ("G0", 77, "our exited child"),
    ]

    def classify(before=(), ours=()):
        return G.classify(
            apps, {"G0"}, 10, set(before), set(ours), probe=lambda pid: probe(pid, (None, False))
        )

    assert classify() == ["pid 20 (other job) on G0"]
    assert classify(before={98}) == ["pid 20 (other job) on G0", "pid 98 (invisible before) on G0"]
    assert classify(before={77}, ours={77}) == ["pid 20 (other job) on G0"]


def test_probe_pid_of_this_process_and_of_a_missing_one():
    group, _ = G.probe_pid(os.getpid())
    assert group == os.getpgid(0)
    assert G.probe_pid(2**22 + 12345) == (None, False)


def test_smi_monitor_reports_foreign_process_during_watch():
    apps = []
    mon = G.SmiMonitor(
        interval_s=0.01, query=lambda: list(apps), probe=lambda pid: (pid, True)
    )  # each pid its own group, on the GPU
    gpus = fake_gpus(2)
    mon.watch("w", gpus[:1])
    mon.attach("w", 500)
    apps.append((gpus[0].uuid, 500, "our child"))
    time.sleep(0.05)
    apps.append((gpus[1].uuid, 600, "on another gpu"))
    apps.append((gpus[0].uuid, 700, "intruder"))
    time.sleep(0.05)
    assert mon.stop("w") == [f"pid 700 (intruder) on {gpus[0].uuid}"]
    mon.watch("clean", gpus[1:])
    mon.attach("clean", 600)
    assert mon.stop("clean") == []
    mon.close()


def test_smi_monitor_survives_a_failing_query():
    mon = G.SmiMonitor(interval_s=0.01, query=lambda: None)
    mon.watch("w", fake_gpus(1))
    mon.attach("w", 1)
    time.sleep(0.03)
    assert mon.stop("w") == []
    mon.close()


def test_cache_dir_is_absolute_and_qualified(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gpu = fake_gpus(1)[0]
    path = cache_dir(
        "rel/cache", gpu, {"apache-tvm-tirx": "0.1.0a4", "torch": "2.11.0+cu130", "triton": None}
    )
    assert path.is_absolute()
    assert path == tmp_path / "rel/cache/nvidia-h200-driver580.1/tvm-tirx0.1.0a4_torch2.11.0+cu130"
    other = cache_dir("rel/cache", G.Gpu(0, "u", "NVIDIA H100", "580.1"), {"torch": "2.11"})
    assert other.parent.name == "nvidia-h100-driver580.1"


# --- lock files on a host shared by several users (issue #27 rows 1, 6 and 13) ------------

NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="acting as a second user needs root (setuid child)"
)


def attempt(lock_dir, n_gpus=1):
    """(pool or None, the exception LockPool(...).acquire(n_gpus) raised or None)."""
    try:
        pool = G.LockPool(fake_gpus(n_gpus), lock_dir)
        pool.acquire(n_gpus)
        return pool, None
    except Exception as e:  # noqa: BLE001 - the test inspects it
        return None, e


def test_a_planted_symlink_lock_file_never_truncates_its_target(tmp_path):
    """Row 1: another user's symlink <lock dir>/<uuid>.lock -> a file of yours."""
    victim = tmp_path / "precious.txt"
    victim.write_text("my thesis\n")
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o1777)
    (locks / "GPU-fake-0.lock").symlink_to(victim)
    pool, error = attempt(locks)
    assert victim.read_text() == "my thesis\n", "the symlink's target was truncated"
    assert isinstance(error, LockError), error
    assert "symbolic link" in str(error) and "GPU-fake-0.lock" in str(error)


def test_a_planted_lock_folder_symlink_is_refused(tmp_path, monkeypatch):
    """Row 1: the default folder has a fixed name in the temp dir; it may be planted."""
    monkeypatch.delenv(G.ENV_LOCK_DIR, raising=False)
    monkeypatch.setattr(G.tempfile, "gettempdir", lambda: str(tmp_path))
    mine = tmp_path / "my-files"
    mine.mkdir()
    (tmp_path / "tirx-suite-locks").symlink_to(mine)
    pool, error = attempt(None)
    assert list(mine.iterdir()) == [], "lock files were created through the symlink"
    assert isinstance(error, LockError) and "symbolic link" in str(error)


def test_a_folder_others_may_write_must_be_sticky(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    locks.chmod(0o777)  # anyone could swap the lock files of anyone
    pool, error = attempt(locks)
    assert isinstance(error, LockError) and "chmod 1777" in str(error)
    locks.chmod(0o1777)
    pool, error = attempt(locks)
    assert error is None and pool.free_count() == 0
    pool.close()


def test_lock_folder_and_files_are_created_for_every_user(tmp_path):
    """Row 6: a lock file created 0644 (umask 022) locked every other user out."""
    old = os.umask(0o022)
    try:
        pool, error = attempt(tmp_path / "locks", n_gpus=2)
    finally:
        os.umask(old)
    assert error is None, error
    assert stat.S_IMODE((tmp_path / "locks").stat().st_mode) == 0o1777
    for name in ("GPU-fake-0.lock", "GPU-fake-1.lock"):
        assert stat.S_IMODE((tmp_path / "locks" / name).stat().st_mode) == 0o666
    pool.close()


def as_nobody(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` as a second user (uid 65534), importing this checkout's core."""
    import pluggy

    import tirx_kernels.core

    path = [str(Path(tirx_kernels.core.__file__).parents[2]), str(Path(pluggy.__file__).parents[1])]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(path), "PYTHONDONTWRITEBYTECODE": "1"}
    # the venv's interpreter may live in root's home, out of the second user's reach
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            p = subprocess.run(
                [python, "-c", textwrap.dedent(code)],
                user=NOBODY,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                cwd="/",
            )
        except PermissionError:
            continue
        return p
    pytest.skip("no Python interpreter the second user may run")


@pytest.fixture
def shared_tmp():
    """A folder in the temp dir that a second user can reach (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="tirx-locks-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@needs_root
def test_two_users_share_the_gpus_through_one_lock_folder(shared_tmp):
    """Row 6: the second user's suite crashed with a PermissionError traceback."""
    lock_dir = shared_tmp / "tirx-suite-locks"
    old = os.umask(0o022)
    try:
        mine = G.LockPool(fake_gpus(2), lock_dir)
        assert [g.index for g in mine.acquire(1)] == [0]  # this user holds GPU 0
    finally:
        os.umask(old)
    p = as_nobody(f"""
        from tirx_kernels.core.suite.gpus import LockPool, Gpu
        pool = LockPool([Gpu(i, f"GPU-fake-{{i}}", "x") for i in (0, 1)], {str(lock_dir)!r})
        got = pool.acquire(1)
        print([g.index for g in got] if got else None, pool.acquire(1))
        """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["[1]", "None"]  # GPU 1 is free; GPU 0 is the first user's
    mine.close()


@needs_root
def test_a_lock_file_of_another_user_is_locked_read_only_or_named(shared_tmp):
    """Row 13: a lock owned by another user gave a raw traceback."""
    lock_dir = shared_tmp / "locks"
    lock_dir.mkdir(mode=0o1777)
    lock_dir.chmod(0o1777)
    legacy = lock_dir / "GPU-fake-0.lock"
    legacy.write_text("")
    legacy.chmod(0o644)  # what an older suite of another user left: readable, not writable
    code = f"""
        from tirx_kernels.core.suite import gpus as G
        from tirx_kernels.core.suite.lockfile import LockError
        try:
            print(G.LockPool([G.Gpu(0, "GPU-fake-0", "x")], {str(lock_dir)!r}).acquire(1))
        except LockError as e:
            print("LockError:", e)
        """
    p = as_nobody(code)
    assert p.returncode == 0 and "Gpu(index=0" in p.stdout, p.stdout + p.stderr
    legacy.chmod(0o600)  # not even readable: cannot lock, say so in one line
    p = as_nobody(code)
    assert p.returncode == 0 and p.stdout.startswith("LockError:"), p.stdout + p.stderr
    assert str(legacy) in p.stdout and "--lock-dir" in p.stdout


def test_a_lock_folder_that_cannot_exist_is_one_error(tmp_path):
    (tmp_path / "file").write_text("")
    pool, error = attempt(tmp_path / "file" / "locks")
    assert isinstance(error, LockError) and "--lock-dir" in str(error)
