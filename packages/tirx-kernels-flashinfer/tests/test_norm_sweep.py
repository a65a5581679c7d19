# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""scripts/norm_sweep.py on the CPU: its probe options (the timing itself needs the H200)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tirx_kernels.core import testing
from tirx_kernels.flashinfer import _norm_schedule

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "norm_sweep.py"


@pytest.fixture(scope="module")
def sweep():
    return testing.load_script(SCRIPT)


def test_a_variant_is_a_name_and_make_keywords(sweep):
    assert sweep.parse_variant('r2={"vecs_per_thread": 4, "rows_per_cta": 2, "lean": true}') == (
        "r2",
        {"vecs_per_thread": 4, "rows_per_cta": 2, "lean": True},
        False,
    )
    assert sweep.parse_variant('lean=+{"lean": true}') == ("lean", {"lean": True}, True)


@pytest.mark.parametrize(
    "spec", ["r2", '={"lean": true}', "r2={lean}", "r2=[1]", 'r2={"a": 1', "r2=+", "r2=++{}"]
)
def test_a_malformed_variant_names_the_expected_form(sweep, spec):
    with pytest.raises(ValueError, match="expected NAME=JSON with a JSON object"):
        sweep.parse_variant(spec)


def test_probes_replace_the_built_in_variants(sweep):
    host = _norm_schedule.schedule("layernorm", 2048, 16384)
    built_in = sweep.variants_of(_norm_schedule, "layernorm", 2048, 1, False, host)
    assert len(built_in) > 3 and ("host", host) not in built_in
    r8 = {"vecs_per_thread": 1, "rows_per_cta": 8}
    probes = [("r8", r8, False), ("lean", {"lean": True}, True)]
    assert sweep.variants_of(_norm_schedule, "layernorm", 2048, 1, False, host, probes) == [
        ("host", host),
        ("r8", r8),
        ("lean", {**host, "lean": True}),
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--variant", "host={}"], "--variant names must be unique and not 'host'"),
        (["--variant", "a={}", "--variant", "a={}"], "--variant names must be unique"),
        (["--variant", "a=1"], "--variant 'a=1': expected NAME=JSON"),
        (["--rounds", "0"], "--rounds 0: must be >= 1"),
    ],
)
def test_bad_options_fail_before_any_gpu_work(tmp_path, args, message):
    out = tmp_path / "out.json"
    p = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True
    )
    assert p.returncode == 2 and message in p.stderr
    assert not out.exists()
