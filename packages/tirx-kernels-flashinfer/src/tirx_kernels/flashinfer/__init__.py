# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx ports of FlashInfer kernels (Apache-2.0)."""
