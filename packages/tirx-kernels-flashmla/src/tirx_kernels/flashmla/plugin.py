# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashmla family: TIRx ports of FlashMLA kernels, Apache-2.0 AND MIT."""

from __future__ import annotations

from tirx_kernels.core import Family, Upstream, hookimpl


@hookimpl
def tirx_kernels_family():
    return Family.port(
        "flashmla",
        __package__,
        "TIRx ports of FlashMLA kernels",
        Upstream(
            project="FlashMLA",
            url="https://github.com/deepseek-ai/FlashMLA",
            spdx="MIT",
            copyright="Copyright (c) 2025 DeepSeek",
            commit="9241ae3ef9bac614dd25e45e507e089f888280e0",
        ),
    )
