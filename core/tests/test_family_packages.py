# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Every installed family package re-exports its API lazily: listing kernels imports the
package and its plugin, which must not import torch; each public name is its op module's
function; any other name is an AttributeError."""

import importlib
import subprocess
import sys

import pytest

from tirx_kernels.core.plugins import load_families

PACKAGES = sorted(loaded.family.package for loaded in load_families(strict=True)[1])
PUBLIC_NAMES = [
    (package, name)
    for package in PACKAGES
    for name in sorted(getattr(importlib.import_module(package), "_PUBLIC", {}))
]


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_the_package_and_its_plugin_does_not_import_torch(package):
    code = f"import sys, {package}, {package}.plugin; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("package, name", PUBLIC_NAMES)
def test_each_public_name_is_its_op_modules_function(package, name):
    family = importlib.import_module(package)
    module = importlib.import_module(f"{package}.{family._PUBLIC[name]}")
    assert getattr(family, name) is getattr(module, name)
    assert name in family.__all__ and name in dir(family)


@pytest.mark.parametrize("package", PACKAGES)
def test_other_names_are_attribute_errors(package):
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        importlib.import_module(package).no_such_op  # noqa: B018
