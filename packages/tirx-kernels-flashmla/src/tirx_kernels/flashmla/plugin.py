# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashmla family: TIRx ports of FlashMLA kernels, Apache-2.0 AND MIT."""

from __future__ import annotations

from tirx_kernels.core import Family, LicensePolicy, Upstream, hookimpl

# The upstream commit every port of this family was written from.
UPSTREAM_COMMIT = "9241ae3ef9bac614dd25e45e507e089f888280e0"


@hookimpl
def tirx_kernels_family():
    return Family(
        name="flashmla",
        category="flashmla",
        package=__package__,
        license=LicensePolicy(
            expression="Apache-2.0 AND MIT",
            upstream=Upstream(
                project="FlashMLA",
                url="https://github.com/deepseek-ai/FlashMLA",
                spdx="MIT",
                copyright="Copyright (c) 2025 DeepSeek",
                commit=UPSTREAM_COMMIT,
            ),
            native_files=("__init__.py", "plugin.py", "kernels/__init__.py"),
        ),
        description="TIRx ports of FlashMLA kernels",
    )
