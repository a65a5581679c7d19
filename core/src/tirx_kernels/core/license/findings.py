# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A finding: one broken rule, where, what was expected and what was found."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    rule: str  # stable id, e.g. "port-url" (README "License" lists them)
    path: str  # repository-relative path, or "<wheel>!<member>"
    message: str
    expected: str = ""
    found: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        text = f"{where}: [{self.rule}] {self.message}"
        if self.expected or self.found:
            text += f"\n    expected: {self.expected or '-'}\n    found:    {self.found or '-'}"
        return text

    def to_json(self) -> dict:
        return asdict(self)
