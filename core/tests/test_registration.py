# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The registration helpers families call instead of writing their own loops."""

from __future__ import annotations

from tirx_kernels.core.registration import register_kernel_modules, register_suite_files


def test_public_modules_are_kernels_private_plugin_and_ops_are_not(tmp_path):
    for name in ("rmsnorm.py", "rope.py", "_norm.py", "plugin.py", "ops.py", "notes.md"):
        (tmp_path / name).write_text("")
    found: list[str] = []
    register_kernel_modules(found.append, "tirx_kernels.fam.kernels", tmp_path)
    assert found == ["tirx_kernels.fam.kernels.rmsnorm", "tirx_kernels.fam.kernels.rope"]


def test_suite_files_are_the_yaml_files_sorted(tmp_path):
    for name in ("b.yaml", "a.yaml", "c.yml", "d.txt"):
        (tmp_path / name).write_text("")
    found = []
    register_suite_files(found.append, tmp_path)
    assert [p.name for p in found] == ["a.yaml", "b.yaml"]
