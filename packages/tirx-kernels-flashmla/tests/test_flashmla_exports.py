# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The package re-exports FlashMLA's API lazily: listing kernels imports the package, and
must not import torch."""

import importlib
import subprocess
import sys

import pytest

import tirx_kernels.flashmla as package


def test_importing_the_package_does_not_import_torch():
    code = (
        "import sys, tirx_kernels.flashmla, tirx_kernels.flashmla.plugin; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("name", sorted(package._PUBLIC))
def test_each_public_name_is_its_op_modules_function(name):
    module = importlib.import_module(f"tirx_kernels.flashmla.{package._PUBLIC[name]}")
    assert getattr(package, name) is getattr(module, name)
    assert name in package.__all__ and name in dir(package)


def test_other_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        package.no_such_op  # noqa: B018
