# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashattention family: TIRx ports of FlashAttention-3 (hopper/), BSD-3-Clause."""

from __future__ import annotations

from tirx_kernels.core import Family, Upstream, hookimpl
from tirx_kernels.core.family import PORT_NATIVE_FILES


@hookimpl
def tirx_kernels_family():
    return Family.port(
        "flashattention",
        __package__,
        "TIRx ports of FlashAttention-3 (Hopper forward)",
        Upstream(
            project="FlashAttention",
            url="https://github.com/Dao-AILab/flash-attention",
            spdx="BSD-3-Clause",
            copyright=(
                "Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file."
            ),
            commit="0251105a2fb19d2957484b7f023cd8c115286ced",
            license_texts=(
                "licenses/flash-attention-LICENSE.txt",
                "licenses/flash-attention-AUTHORS.txt",
            ),
        ),
        # the bench's FlashInfer references call FlashInfer's API: native code, no port
        native_files=(*PORT_NATIVE_FILES, "_references.py"),
    )
