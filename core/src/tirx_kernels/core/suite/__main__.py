# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``python -m tirx_kernels.core.suite`` is ``tirx-suite``."""

import sys

from .cli import main

sys.exit(main())
