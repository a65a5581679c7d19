# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""scripts/upstream_tests.py run on the CPU: a stand-in ``flashinfer`` package and a test file
in the prepared layout; the conftest must route flashinfer.norm.rmsnorm to ours, and
``--shards`` must split the tests between processes without losing or repeating one."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tirx_kernels.core import testing

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "upstream_tests.py"

# each test calls flashinfer.norm.rmsnorm on CPU tensors: ours refuses them, the stand-in
# (if the patch did not take) returns None
TESTS = """
import pytest
import torch
import flashinfer


@pytest.mark.parametrize("n", range(7))
def test_norm(n):
    x = torch.ones(2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        flashinfer.norm.rmsnorm(x, x[0])
"""


@pytest.fixture
def script():
    return testing.load_script(SCRIPT)


@pytest.fixture
def prepared(tmp_path, monkeypatch, script):
    """A prepared folder (as ``prepare`` writes it) with a stand-in flashinfer importable."""
    for sub in ("norm", "activation", "rope"):
        (tmp_path / "flashinfer").mkdir(exist_ok=True)
        (tmp_path / "flashinfer" / f"{sub}.py").write_text("def placeholder(*args): return None\n")
    (tmp_path / "flashinfer" / "__init__.py").write_text("from . import activation, norm, rope\n")
    (tmp_path / "tests" / "utils").mkdir(parents=True)
    (tmp_path / "tests" / "utils" / "test_norm.py").write_text(TESTS)
    for package in ("tests", "tests/utils"):
        (tmp_path / package / "__init__.py").touch()
    (tmp_path / "conftest.py").write_text(script.CONFTEST.format(patched=script.PATCHED))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"
    )
    # prepend: on the device, tvm_tirx and torch come from an existing PYTHONPATH entry
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return tmp_path


def _cases(report: Path) -> list[str]:
    return [case.get("name") for case in ET.parse(report).iter("testcase")]


def test_one_process_runs_every_test_on_our_function(prepared, script):
    junit = prepared / "report.xml"
    assert script.run(["norm"], str(junit), prepared, []) == 0
    assert sorted(_cases(junit)) == sorted(f"test_norm[{n}]" for n in range(7))


def test_shards_split_the_tests_without_loss_or_repeat(prepared, script):
    junit = prepared / "report.xml"
    assert script.run(["norm"], str(junit), prepared, [], shards=3) == 0
    shards = [_cases(prepared / f"report.shard-{i}.xml") for i in range(3)]
    assert all(shards) and sorted(sum(shards, [])) == sorted(f"test_norm[{n}]" for n in range(7))
    assert all((prepared / f"shard-{i}.log").is_file() for i in range(3))


def test_more_shards_than_tests_still_pass(prepared, script):
    assert script.run(["norm"], None, prepared, [], shards=9) == 0


def test_a_failing_test_fails_the_sharded_run(prepared, script):
    path = prepared / "tests" / "utils" / "test_norm.py"
    path.write_text(path.read_text() + "\n\ndef test_norm_broken():\n    assert False\n")
    assert script.run(["norm"], None, prepared, [], shards=2) == 1
    # the failure is on record before the run ends (a timeout may end it first)
    failures = "".join(p.read_text() for p in prepared.glob("failures-*.txt"))
    assert failures == "tests/utils/test_norm.py::test_norm_broken (call): assert False\n"
    assert script.run(["norm"], None, prepared, ["-k", "not broken"]) == 0
    assert not list(prepared.glob("failures*.txt"))  # a new run starts a new record


def test_a_wrapped_error_is_recorded_with_its_cause(prepared, script):
    """torch.testing reports an error raised while comparing as "Comparing", its cause (an
    out-of-memory error, on a crowded GPU) chained below: the record names both."""
    path = prepared / "tests" / "utils" / "test_norm.py"
    path.write_text(
        path.read_text()
        + "\n\ndef test_norm_wrapped():\n"
        + "    try:\n        raise MemoryError('CUDA out of memory')\n"
        + "    except MemoryError as e:\n        raise RuntimeError('Comparing\\n\\nmore') from e\n"
    )
    assert script.run(["norm"], None, prepared, ["-k", "wrapped"]) == 1
    assert (prepared / "failures.txt").read_text() == (
        "tests/utils/test_norm.py::test_norm_wrapped (call): "
        "RuntimeError: Comparing <- MemoryError: CUDA out of memory\n"
    )


def test_references_are_built_once_before_the_tests(prepared, script, monkeypatch, capsys):
    """A suite's WARM code runs first, once (here it leaves a file the tests could read);
    a warm-up that fails is reported and the tests still run."""
    monkeypatch.setattr(script, "WARM", {"norm": "open('warmed', 'a').write('x')"})
    assert script.run(["norm"], None, prepared, [], shards=3) == 0
    assert (prepared / "warmed").read_text() == "x"
    monkeypatch.setattr(script, "WARM", {"norm": "raise SystemExit(3)"})
    assert script.run(["norm"], None, prepared, [], shards=2) == 0
    assert "warm norm: exit 3" in capsys.readouterr().out


def test_shards_are_capped_to_what_the_gpu_memory_holds(script):
    assert script.SHARD_GIB["rope"] == 12
    assert script.fitting_shards(["rope"], 11, free_gib=78.5) == 6  # an H100: 11 ran out
    assert script.fitting_shards(["norm", "rope"], 11, free_gib=139.0) == 11
    assert script.fitting_shards(["rope"], 4, free_gib=5.0) == 1
    assert script.fitting_shards(["norm", "activation"], 16, free_gib=5.0) == 16
    assert script.fitting_shards(["rope"], 11, free_gib=None) == 11  # unknown: as asked


def test_a_run_with_too_many_shards_for_the_gpu_says_so(prepared, script, monkeypatch, capsys):
    monkeypatch.setattr(script, "SHARD_GIB", {"norm": 12})
    monkeypatch.setattr(script, "gpu_free_gib", lambda: 30.0)
    assert script.run(["norm"], None, prepared, [], shards=5) == 0
    out = capsys.readouterr().out
    assert "shards: 2, not 5" in out
    assert sorted(p.name for p in prepared.glob("shard-*.log")) == ["shard-0.log", "shard-1.log"]
