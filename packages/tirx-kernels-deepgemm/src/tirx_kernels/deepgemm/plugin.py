# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The deepgemm family: TIRx ports of DeepGEMM's sm90 FP8 GEMMs, Apache-2.0 AND MIT."""

from __future__ import annotations

from tirx_kernels.core import Family, LicensePolicy, Upstream, hookimpl

# The upstream commit every port of this family was written from.
UPSTREAM_COMMIT = "54e22612409371d6364144b69086735beb54e98b"


@hookimpl
def tirx_kernels_family():
    return Family(
        name="deepgemm",
        category="deepgemm",
        package=__package__,
        license=LicensePolicy(
            expression="Apache-2.0 AND MIT",
            upstream=Upstream(
                project="DeepGEMM",
                url="https://github.com/deepseek-ai/DeepGEMM",
                spdx="MIT",
                copyright="Copyright (c) 2025 DeepSeek",
                commit=UPSTREAM_COMMIT,
            ),
            native_files=("__init__.py", "plugin.py", "kernels/__init__.py"),
        ),
        description="TIRx ports of DeepGEMM's sm90 FP8 GEMMs",
    )
