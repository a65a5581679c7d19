# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The basic family: native TIRx kernels, Apache-2.0."""

from __future__ import annotations

from tirx_kernels.core import Family, LicensePolicy, hookimpl


@hookimpl
def tirx_kernels_family():
    return Family(
        name="basic",
        category="basic",
        package=__package__,
        license=LicensePolicy(expression="Apache-2.0"),
        description="Native TIRx kernels",
    )
