# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""tirx-kernels core: the plugin host. Importing it imports neither torch nor the compiler."""

from .family import Family, FileOverride, LicensePolicy, Upstream
from .hookspecs import hookimpl

__all__ = ["Family", "FileOverride", "LicensePolicy", "Upstream", "hookimpl"]
