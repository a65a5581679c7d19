# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The deepgemm family: plugin, license policy, listing (lazy exports: core's
test_family_packages)."""

import subprocess
import sys

from tirx_kernels.deepgemm import plugin


def test_family_declares_apache_and_mit_with_the_pinned_deepgemm_commit():
    family = plugin.tirx_kernels_family()
    assert family.name == "deepgemm"
    policy = family.license
    assert policy.expression == "Apache-2.0 AND MIT"
    assert policy.upstream.url == "https://github.com/deepseek-ai/DeepGEMM"
    assert policy.upstream.spdx == "MIT"
    assert policy.upstream.copyright == "Copyright (c) 2025 DeepSeek"
    assert policy.upstream.commit == "54e22612409371d6364144b69086735beb54e98b"


def test_tirx_run_lists_the_kernel_with_its_configs():
    out = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.cli", "list", "--family", "deepgemm"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "deepgemm_fp8_gemm_nt" in out.stdout
    assert "e4m3_m4096_n7168_k7168" in out.stdout
