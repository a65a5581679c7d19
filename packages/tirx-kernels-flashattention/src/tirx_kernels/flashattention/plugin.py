# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashattention family: TIRx ports of FlashAttention-3 (hopper/), BSD-3-Clause."""

from __future__ import annotations

from tirx_kernels.core import Family, LicensePolicy, Upstream, hookimpl

# The upstream commit every port of this family was written from.
UPSTREAM_COMMIT = "0251105a2fb19d2957484b7f023cd8c115286ced"


@hookimpl
def tirx_kernels_family():
    return Family(
        name="flashattention",
        category="flashattention",
        package=__package__,
        license=LicensePolicy(
            expression="Apache-2.0 AND BSD-3-Clause",
            upstream=Upstream(
                project="FlashAttention",
                url="https://github.com/Dao-AILab/flash-attention",
                spdx="BSD-3-Clause",
                copyright=(
                    "Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file."
                ),
                commit=UPSTREAM_COMMIT,
                license_texts=(
                    "licenses/flash-attention-LICENSE.txt",
                    "licenses/flash-attention-AUTHORS.txt",
                ),
            ),
            native_files=("__init__.py", "plugin.py", "kernels/__init__.py"),
        ),
        description="TIRx ports of FlashAttention-3 (Hopper forward)",
    )
