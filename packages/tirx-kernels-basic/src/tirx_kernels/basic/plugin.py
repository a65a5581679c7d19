# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The basic family: native TIRx kernels, Apache-2.0."""

from __future__ import annotations

from pathlib import Path

from tirx_kernels.core import Family, LicensePolicy, hookimpl

HERE = Path(__file__).parent
SUITE_DIR = HERE / "suite"


@hookimpl
def tirx_kernels_family():
    return Family(
        name="basic",
        category="basic",
        package=__package__,
        license=LicensePolicy(expression="Apache-2.0"),
        description="Native TIRx kernels",
    )


@hookimpl
def tirx_kernels_register_kernels(register):
    # Every public module of the package is a kernel; helpers are private (_name.py).
    for path in sorted(HERE.glob("[!_]*.py")):
        if path.stem != "plugin":
            register(f"{__package__}.{path.stem}")


@hookimpl
def tirx_kernels_suite_configs(register):
    for path in sorted(SUITE_DIR.glob("*.yaml")):
        register(path)
