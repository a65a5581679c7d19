# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Conformance of every installed kernel, and every config compiled to a sm_90a cubin.

On a machine without a suitable GPU, each config runs through the real runner (its own
process, the family's test protocol), which compiles it with nvcc and skips the launch.
"""

import inspect

import pytest

from tirx_kernels.core.registry import Registry
from tirx_kernels.core.runner import PASS, Request, run_config

REGISTRY = Registry.load(strict=True)
KERNELS = sorted(REGISTRY.kernels.values(), key=lambda k: k.name)
CONFIGS = [(k.name, label) for k in KERNELS for label in k.labels]
CONTRACT = ("get_kernel", "prepare_data", "run_test", "run_bench")


def test_families_are_installed():
    assert {"basic", "flashinfer"} <= {f.family.name for f in REGISTRY.families}
    assert REGISTRY.broken == []


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_module_contract(kernel):
    module = kernel.load()  # imports without optional packages (flashinfer is absent here)
    for name in CONTRACT:
        assert callable(getattr(module, name, None)), f"{kernel.module} lacks {name}()"
    params = inspect.signature(module.run_bench).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for option in ("warmup", "repeat", "timer", "rounds", "cooldown_s"):
        assert takes_any or option in params, f"{kernel.module}.run_bench lacks {option!r}"
    for cfg in kernel.bench_matrix:  # the bench matrix is in the kernel's domain too
        assert set(cfg) - {"label"}, f"{kernel.name} config {cfg['label']} has no parameters"


@pytest.mark.parametrize("kernel_name, label", CONFIGS)
def test_config_compiles_to_cubin(kernel_name, label):
    result = run_config(Request(kernel_name, label, "test"), timeout=600)
    assert result.status == PASS, result.detail


def test_suite_import_gate_passes():
    """`tirx-suite --check-imports`: every kernel of the default sweep imports (CI gate)."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.suite", "--check-imports"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("fam", REGISTRY.families, ids=lambda f: f.family.name)
def test_family_imports_only_core(fam):
    """A family importing another family would leak code across a license boundary."""
    import ast
    import importlib.util
    from pathlib import Path

    own = fam.family.package
    root = Path(importlib.util.find_spec(own).origin).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                if name.startswith("tirx_kernels."):
                    assert name.startswith((own, "tirx_kernels.core")), (
                        f"{path} imports {name}: a family imports only core and itself"
                    )
