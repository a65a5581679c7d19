# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The deepgemm family: plugin, license policy, lazy exports, suite file."""

import importlib
import subprocess
import sys

import pytest

import tirx_kernels.deepgemm as package
from tirx_kernels.deepgemm import plugin


def test_importing_the_package_does_not_import_torch():
    code = (
        "import sys, tirx_kernels.deepgemm, tirx_kernels.deepgemm.plugin; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_family_declares_apache_and_mit_with_the_pinned_deepgemm_commit():
    family = plugin.tirx_kernels_family()
    assert family.name == "deepgemm"
    policy = family.license
    assert policy.expression == "Apache-2.0 AND MIT"
    assert policy.upstream.url == "https://github.com/deepseek-ai/DeepGEMM"
    assert policy.upstream.spdx == "MIT"
    assert policy.upstream.copyright == "Copyright (c) 2025 DeepSeek"
    assert policy.upstream.commit == "54e22612409371d6364144b69086735beb54e98b"


@pytest.mark.parametrize("name", sorted(package._PUBLIC))
def test_each_public_name_is_its_op_modules_function(name):
    module = importlib.import_module(f"tirx_kernels.deepgemm.{package._PUBLIC[name]}")
    assert getattr(package, name) is getattr(module, name)
    assert name in package.__all__ and name in dir(package)


def test_other_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        package.no_such_op  # noqa: B018


def test_tirx_run_lists_the_kernel_with_its_configs():
    out = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.cli", "list", "--family", "deepgemm"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "deepgemm_fp8_gemm_nt" in out.stdout
    assert "e4m3_m4096_n7168_k7168" in out.stdout
