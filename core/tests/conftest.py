# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Fake kernel families installed into a temporary site directory, and process helpers.

Each fake family is a real distribution (a ``.dist-info`` with an ``entry_points.txt``) on
``sys.path`` and ``PYTHONPATH``, so in-process loading and child processes both see it.
``TIRX_KERNELS_FAMILIES`` limits loading to the fakes, hiding the installed families.
``fake_nvidia_smi`` puts an ``nvidia-smi`` reporting two H200s first on ``PATH``;
``alive``/``wait_gone`` tell whether a process still runs (a zombie does not).
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

# split so this file carries one SPDX tag (its own), as the license audit and reuse require
HEADER = (
    "# SPDX-" + "License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright TIRx authors\n"
)

PLUGIN = """
from pathlib import Path
from tirx_kernels.core import Family, LicensePolicy, hookimpl

KERNELS = {kernels!r}


@hookimpl
def tirx_kernels_family():
    return Family(name={name!r}, category={category!r}, package=__package__,
                  license=LicensePolicy(expression="Apache-2.0"))


@hookimpl
def tirx_kernels_register_kernels(register):
    for k in KERNELS:
        register(f"{{__package__}}.{{k}}")


@hookimpl
def tirx_kernels_suite_configs(register):
    for path in sorted(Path(__file__).parent.glob("*.yaml")):
        register(path)
"""

# A protocol hook driven by the config's "mode": lets CPU tests exercise every status.
FAKE_PROTOCOL = """

@hookimpl
def tirx_kernels_run_test(config):
    import os, signal, time
    mode = config.get("mode", "pass")
    if mode == "pass":
        return {"launched": True, "detail": "fake pass"}
    if mode == "pid":  # which process ran it (warm workers)
        return {"launched": True, "detail": f"pid {os.getpid()}"}
    if mode == "fail":
        raise AssertionError("max abs error 0.5 > 0.01")
    if mode == "skip":
        import unittest
        raise unittest.SkipTest("no fake GPU")
    if mode == "error":
        raise RuntimeError("harness exploded")
    if mode == "crash":
        print("about to crash", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(600)


@hookimpl
def tirx_kernels_run_bench(config, options):
    return {"impls": {"tirx": 10.0, "torch": 15.0}, "round_samples": {}, "errors": {},
            "timer": options.get("timer", "proton"), "options": options}
"""


def kernel_source(
    name, category, configs='[{"label": "a", "mode": "pass"}]', cc=9, archs='["sm_90a"]', body=""
):
    return (
        HEADER
        + textwrap.dedent(f"""
        KERNEL_META = {{"name": {name!r}, "category": {category!r},
                       "compute_capability": {cc}, "archs": {archs}}}
        CONFIGS = {configs}
        """)
        + textwrap.dedent(body)
        + PROTOCOL_MEMBERS
    )


# The rest of the kernel-module protocol, for fake modules whose body does not define it.
PROTOCOL_MEMBERS = """
if "PUBLIC_OPS" not in globals():
    PUBLIC_OPS = ()
for _name in ("get_kernel", "prepare_data", "run_test"):
    globals().setdefault(_name, lambda **config: None)
"""


class FakeSite:
    def __init__(self, root: Path, monkeypatch):
        self.root = root
        self.names: list[str] = []
        self.monkeypatch = monkeypatch
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setenv("PYTHONPATH", str(root) + ":" + _env_pythonpath())
        monkeypatch.delenv("TIRX_KERNELS_STRICT", raising=False)
        monkeypatch.delenv("TIRX_KERNELS_DISABLE", raising=False)

    def family(
        self,
        name,
        kernels: dict[str, str] | None = None,
        *,
        category=None,
        protocol=True,
        plugin=None,
        dist=None,
        files: dict[str, str] | None = None,
        package=None,
    ):
        """Install fake family ``name`` with kernel modules {module_name: source}, as the
        import package ``package`` (default ``fake_<name>``) of distribution ``dist``."""
        category = category or name
        kernels = (
            kernels if kernels is not None else {"kern": kernel_source(f"{name}_kern", category)}
        )
        package = package or f"fake_{name}"
        pkg = self.root / package
        pkg.mkdir()
        (pkg / "__init__.py").write_text(HEADER)
        if plugin is None:
            plugin = HEADER + PLUGIN.format(kernels=tuple(kernels), name=name, category=category)
            plugin += FAKE_PROTOCOL if protocol else ""
        (pkg / "plugin.py").write_text(plugin)
        for mod, src in kernels.items():
            (pkg / f"{mod}.py").write_text(src)
        for fname, text in (files or {}).items():
            (pkg / fname).write_text(text)
        dist = dist or f"fake-{name}"
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[tirx_kernels]\n{name} = {package}.plugin\n")
        self.names.append(name)
        self.monkeypatch.setenv("TIRX_KERNELS_FAMILIES", ",".join(dict.fromkeys(self.names)))
        importlib.invalidate_caches()
        return pkg


def _env_pythonpath():
    import os

    return os.environ.get("PYTHONPATH", "")


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    yield FakeSite(root, monkeypatch)
    for mod in [m for m in sys.modules if m.startswith(("fake_", "impostor"))]:
        del sys.modules[mod]


FAKE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=*)
    echo "0, GPU-fake-0, NVIDIA H200, 580.1, 143771, 1980, 3201, 345, 3201"
    echo "1, GPU-fake-1, NVIDIA H200, 580.1, 143771, 1980, 3201, 345, 3201" ;;
  *--query-compute-apps=*) ;;
  *) echo "fake nvidia-smi: unsupported $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def selftest_tree(tmp_path):
    """The license audit's self-test repository (``license.selftest.build_tree``) at
    ``tmp_path/repo``."""
    from tirx_kernels.core.license import selftest

    root = tmp_path / "repo"
    selftest.build_tree(root)
    return root


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    """An ``nvidia-smi`` reporting two H200 GPUs, first on PATH (children see it too)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    return smi


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pids, timeout: float = 15.0) -> list[int]:
    """Wait until no pid of ``pids`` runs; the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def interrupt(p, how: str) -> None:
    """Send ``how`` to the process ``p``: one ``SIGTERM`` or ``SIGHUP``, or, for
    ``"SIGINT every 2 ms"``, 20 Ctrl-C in a row (the later ones land in the cleanup and in
    the writing of the results)."""
    import signal

    if how == "SIGINT every 2 ms":
        for _ in range(20):
            p.send_signal(signal.SIGINT)
            time.sleep(0.002)
    else:
        p.send_signal(getattr(signal, how))


def kill_9_and_expect_the_worker_gone(p, worker: int) -> None:
    """Kill -9 the runner ``p``: its worker ``worker`` must not outlive it."""
    try:
        p.kill()
        p.wait()
        assert wait_gone([worker]) == [], "the worker outlived its killed parent"
    finally:
        kill_leftovers([worker])


def kill_leftovers(pids) -> None:
    """Kill processes a failing test left behind (each one this test started)."""
    import signal

    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
