# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``python -m tirx_kernels.core.license`` is ``tirx-license``."""

import sys

from .cli import main

sys.exit(main())
