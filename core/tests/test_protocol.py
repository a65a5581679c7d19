# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The kernel-module protocol: a module that breaks it is named with the member, on load."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
from conftest import HEADER

from tirx_kernels.core.protocol import KernelModule, ProtocolError, validate_module

CONFIGS = [{"label": "a", "dtype": "bfloat16", "hidden": 8}]


def module(**members):
    mod = types.ModuleType("fake_family.kern")
    mod.KERNEL_META = {"name": "kern"}
    mod.CONFIGS = CONFIGS
    mod.PUBLIC_OPS = ()
    mod.get_kernel = lambda dtype, hidden: None
    mod.prepare_data = lambda **config: None
    mod.run_test = lambda dtype, hidden, **_: None
    for name, value in members.items():
        if value is None:
            delattr(mod, name)
        else:
            setattr(mod, name, value)
    return mod


def test_a_conforming_module_passes_and_is_a_kernel_module():
    mod = module()
    validate_module(mod, CONFIGS)
    assert isinstance(mod, KernelModule)


@pytest.mark.parametrize(
    "member", ["KERNEL_META", "CONFIGS", "PUBLIC_OPS", "get_kernel", "prepare_data", "run_test"]
)
def test_a_missing_member_is_named(member):
    with pytest.raises(ProtocolError, match=rf"fake_family\.kern: missing required \w* ?{member}"):
        validate_module(module(**{member: None}), CONFIGS)


def test_a_function_that_rejects_a_config_key_is_named_with_the_config():
    mod = module(get_kernel=lambda dtype: None)
    with pytest.raises(ProtocolError, match=r"get_kernel\(\) does not accept hidden of config 'a'"):
        validate_module(mod, CONFIGS)


def test_a_required_parameter_no_config_gives_is_named():
    mod = module(run_test=lambda dtype, hidden, tokens: None)
    with pytest.raises(ProtocolError, match=r"run_test\(\) requires tokens"):
        validate_module(mod, CONFIGS)


def test_run_bench_must_take_the_bench_options():
    def run_bench(dtype, hidden, *, rounds=1, cooldown_s=1.0):
        return {}

    with pytest.raises(ProtocolError, match=r"run_bench\(\) does not accept repeat, timer, warmup"):
        validate_module(module(run_bench=run_bench), CONFIGS)

    def good(dtype, hidden, *, warmup=None, repeat=None, timer=None, rounds=1, cooldown_s=1.0):
        return {}

    validate_module(module(run_bench=good), CONFIGS)


def test_run_bench_is_checked_against_the_bench_matrix():
    bench = [{"label": "b", "dtype": "bfloat16", "hidden": 8, "tokens": 4}]
    mod = module(run_bench=lambda dtype, hidden, **options: {})
    validate_module(mod, CONFIGS, bench)  # **options takes tokens
    mod = module(run_bench=lambda dtype, hidden, *, warmup, repeat, timer, rounds, cooldown_s: {})
    with pytest.raises(ProtocolError, match="tokens of config 'b'"):
        validate_module(mod, CONFIGS, bench)


@pytest.mark.parametrize("ops", [["x"], "x", (1,)])
def test_public_ops_must_be_a_tuple_of_names(ops):
    with pytest.raises(ProtocolError, match="PUBLIC_OPS must be a tuple"):
        validate_module(module(PUBLIC_OPS=ops), CONFIGS)


def test_an_unregistered_public_op_is_named():
    with pytest.raises(ProtocolError, match="torch.ops.tirx_kernels.no_such_op is not registered"):
        validate_module(module(PUBLIC_OPS=("no_such_op",)), CONFIGS)


BROKEN = (
    HEADER
    + """
KERNEL_META = {"name": "broken_kern", "category": "proto", "compute_capability": 9,
               "archs": ["sm_90a"]}
CONFIGS = [{"label": "a", "hidden": 8}]
PUBLIC_OPS = ()


def get_kernel(hidden):
    return None


def run_test(hidden):
    return None
"""
)


def test_a_broken_module_is_an_error_row_in_tirx_run(fake_site):
    fake_site.family("proto", {"kern": BROKEN}, protocol=False)
    out = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.cli", "test", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    rows = json.loads(out.stdout)["results"]
    assert [r["status"] for r in rows] == ["ERROR"]
    assert "fake_proto.kern: missing required function prepare_data" in rows[0]["detail"]


def test_check_imports_fails_on_a_broken_module(fake_site, tmp_path):
    fake_site.family("proto", {"kern": BROKEN}, protocol=False)
    suite = tmp_path / "w.yaml"
    suite.write_text("workloads:\n  - {kernel: broken_kern, config: a, default: true}\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tirx_kernels.core.suite",
            "--check-imports",
            "--workloads",
            str(suite),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "missing required function prepare_data" in out.stdout + out.stderr
