# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashinfer family: TIRx ports of FlashInfer kernels, Apache-2.0."""

from __future__ import annotations

from tirx_kernels.core import Family, LicensePolicy, Upstream, hookimpl

# The upstream commit every port of this family was written from.
UPSTREAM_COMMIT = "fb28d7242b3506a2348265962041acc1fb56cca4"


@hookimpl
def tirx_kernels_family():
    return Family(
        name="flashinfer",
        category="flashinfer",
        package=__package__,
        license=LicensePolicy(
            expression="Apache-2.0",
            upstream=Upstream(
                project="FlashInfer",
                url="https://github.com/flashinfer-ai/flashinfer",
                spdx="Apache-2.0",
                copyright="Copyright (c) 2023 by FlashInfer team.",
                commit=UPSTREAM_COMMIT,
            ),
            native_files=("__init__.py", "plugin.py", "kernels/__init__.py", "_host.py"),
        ),
        description="TIRx ports of FlashInfer kernels",
    )
