# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The root README tells the truth: kernel table, setup and test commands."""

import re
from pathlib import Path

from tirx_kernels.core.cli import kernel_table
from tirx_kernels.core.registry import Registry

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def test_kernel_table_matches_the_registry():
    block = re.search(r"<!-- kernel-table:.*?-->\n(.*?)\n<!-- /kernel-table -->", README, re.S)
    assert block, "README lacks the kernel-table markers"
    expected = kernel_table(Registry.load(strict=True).kernels.values())
    assert block.group(1) == expected, "regenerate: tirx-run list --format markdown"


def test_ci_runs_the_readme_commands():
    setup_test = re.search(r"## Set up and test.*?```bash\n(.*?)\n```", README, re.S).group(1)
    ci = (ROOT / ".ci" / "run").read_text()
    for line in setup_test.splitlines():
        assert line in ci, f".ci/run does not run the README command {line!r}"
