# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The family's plugin: who it is and its license terms.

Its kernel modules (``kernels/*.py``) and suite files (``suite/*.yaml``) are registered by
convention (``tirx_kernels.core.registration``).
"""

from __future__ import annotations

from tirx_kernels.core import Family, hookimpl


@hookimpl
def tirx_kernels_family():
    return Family.native_apache("hello", __package__, "Example family: an elementwise add")
