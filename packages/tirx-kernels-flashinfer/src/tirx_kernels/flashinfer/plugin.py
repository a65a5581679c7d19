# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashinfer family: TIRx ports of FlashInfer kernels, Apache-2.0."""

from __future__ import annotations

from tirx_kernels.core import Family, Upstream, hookimpl
from tirx_kernels.core.family import PORT_NATIVE_FILES

# The upstream commit every port of this family was written from.
UPSTREAM_COMMIT = "fb28d7242b3506a2348265962041acc1fb56cca4"


@hookimpl
def tirx_kernels_family():
    return Family.port(
        "flashinfer",
        __package__,
        "TIRx ports of FlashInfer kernels",
        Upstream(
            project="FlashInfer",
            url="https://github.com/flashinfer-ai/flashinfer",
            spdx="Apache-2.0",
            copyright="Copyright (c) 2023 by FlashInfer team.",
            commit=UPSTREAM_COMMIT,
        ),
        native_files=(*PORT_NATIVE_FILES, "_host.py"),
    )
