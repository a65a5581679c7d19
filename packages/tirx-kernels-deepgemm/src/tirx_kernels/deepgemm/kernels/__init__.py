# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The kernel modules of the family: the contract only (metadata, configs, test, bench)."""
