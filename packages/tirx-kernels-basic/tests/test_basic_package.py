# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The package re-exports its wrappers lazily: listing kernels must not import torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

LISTING = """
import sys
import tirx_kernels.basic, tirx_kernels.basic.plugin
assert 'torch' not in sys.modules, 'importing tirx_kernels.basic imported torch'
assert 'rmsnorm' in dir(tirx_kernels.basic)
from tirx_kernels.basic import rmsnorm
from tirx_kernels.basic.norm import rmsnorm as op_wrapper
assert rmsnorm is op_wrapper and 'torch' in sys.modules
"""


def test_importing_the_package_does_not_import_torch():
    r = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_unknown_names_raise_attribute_error():
    import tirx_kernels.basic

    with pytest.raises(AttributeError, match="has no attribute 'layernorm'"):
        tirx_kernels.basic.layernorm  # noqa: B018
