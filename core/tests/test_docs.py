# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Every hook is documented in core/README.md, with its arguments and result kind."""

import inspect
import re
from pathlib import Path

import pytest

from tirx_kernels.core import hookspecs

README = (Path(__file__).parents[1] / "README.md").read_text()
HOOKS = [
    (n, f) for n, f in vars(hookspecs).items() if n.startswith("tirx_kernels_") and callable(f)
]


@pytest.mark.parametrize("name, spec", HOOKS, ids=[n for n, _ in HOOKS])
def test_hook_is_documented(name, spec):
    section = re.search(rf"### `{name}\((.*?)\)`(.*?)(?=\n### |\Z)", README, re.S)
    assert section, f"core/README.md has no '### `{name}(...)`' section"
    args = [a.strip() for a in section.group(1).split(",") if a.strip()]
    assert args == list(inspect.signature(spec).parameters)
    firstresult = spec.tirx_kernels_spec["firstresult"]
    assert ("firstresult" in section.group(2)) == firstresult
