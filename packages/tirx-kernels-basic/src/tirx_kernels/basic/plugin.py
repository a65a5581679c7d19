# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The basic family: native TIRx kernels, Apache-2.0."""

from __future__ import annotations

from tirx_kernels.core import Family, hookimpl


@hookimpl
def tirx_kernels_family():
    return Family.native_apache("basic", __package__, "Native TIRx kernels")
