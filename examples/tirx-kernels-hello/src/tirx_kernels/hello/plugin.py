# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The family's plugin: who it is, its license terms, its kernel modules and suite files."""

from __future__ import annotations

from pathlib import Path

from tirx_kernels.core import Family, LicensePolicy, hookimpl
from tirx_kernels.core.registration import register_kernel_modules, register_suite_files

HERE = Path(__file__).parent


@hookimpl
def tirx_kernels_family():
    return Family(
        name="hello",
        category="hello",
        package=__package__,
        license=LicensePolicy(expression="Apache-2.0"),
        description="Example family: an elementwise add",
    )


@hookimpl
def tirx_kernels_register_kernels(register):
    register_kernel_modules(register, f"{__package__}.kernels", HERE / "kernels")


@hookimpl
def tirx_kernels_suite_configs(register):
    register_suite_files(register, HERE / "suite")
