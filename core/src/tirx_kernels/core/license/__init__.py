# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The license audit: each distribution carries exactly its own terms, and proves it.

Rules read only each family's ``LicensePolicy`` (declared through ``tirx_kernels_family``);
the CLI is ``tirx-license`` (:mod:`.cli`). Rule ids are listed in the README "License".
"""

from .audit import audit, audit_distribution, audit_root, expected_expression, rule_for
from .discover import Distribution, Repo, discover
from .findings import Finding
from .headers import FileRule, check_python
from .wheel import audit_wheel

__all__ = [
    "Distribution",
    "FileRule",
    "Finding",
    "Repo",
    "audit",
    "audit_distribution",
    "audit_root",
    "audit_wheel",
    "check_python",
    "discover",
    "expected_expression",
    "rule_for",
]
