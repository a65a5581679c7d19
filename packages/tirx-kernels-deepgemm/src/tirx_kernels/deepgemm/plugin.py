# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The deepgemm family: TIRx ports of DeepGEMM's sm90 FP8 GEMMs, Apache-2.0 AND MIT."""

from __future__ import annotations

from tirx_kernels.core import Family, Upstream, hookimpl


@hookimpl
def tirx_kernels_family():
    return Family.port(
        "deepgemm",
        __package__,
        "TIRx ports of DeepGEMM's sm90 FP8 GEMMs",
        Upstream(
            project="DeepGEMM",
            url="https://github.com/deepseek-ai/DeepGEMM",
            spdx="MIT",
            copyright="Copyright (c) 2025 DeepSeek",
            commit="54e22612409371d6364144b69086735beb54e98b",
        ),
    )
