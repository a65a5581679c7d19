# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The family's kernel modules: the contract only (metadata, configs, test, bench)."""
