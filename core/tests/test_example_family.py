# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The example family (examples/tirx-kernels-hello) installs with pip like a third-party
family and works: listed, validated against the protocol, compiled, and its own tests pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tirx-kernels-hello"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder holding only the example family, installed by pip from its source."""
    target = tmp_path_factory.mktemp("hello-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    env = dict(
        os.environ,
        PYTHONPATH=f"{target}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        TIRX_KERNELS_FAMILIES="hello",
        TIRX_KERNELS_STRICT="1",
    )
    return env


def run(env, *args, timeout=600):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=EXAMPLE,
    )


def test_it_is_listed_as_its_own_family(site):
    out = run(site, "-m", "tirx_kernels.core.cli", "list", "--format", "json")
    assert out.returncode == 0, out.stderr
    kernels = {k["name"]: k for k in json.loads(out.stdout)}
    assert set(kernels) == {"hello_add"}
    assert kernels["hello_add"]["family"] == "hello"
    assert kernels["hello_add"]["distribution"] == "tirx-kernels-hello"


def test_every_config_passes_the_protocol_and_compiles(site):
    out = run(site, "-m", "tirx_kernels.core.cli", "test", "--kernel", "hello_add", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(out.stdout)["results"]
    assert [r["status"] for r in rows] == ["PASS"] * 3


def test_its_own_tests_pass(site):
    out = run(site, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert out.returncode == 0, out.stdout + out.stderr
    assert " passed" in out.stdout
