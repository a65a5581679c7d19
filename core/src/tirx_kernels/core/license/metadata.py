# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The METADATA rules a built distribution must pass, wheel or installed: PEP 639
(Metadata-Version >= 2.4) and a valid License-Expression with the distribution's terms."""

from __future__ import annotations

from email.message import Message

from .findings import Finding
from .spdx import invalid, terms


def metadata_version(meta: Message) -> tuple[int, ...]:
    return tuple(int(x) for x in meta.get("Metadata-Version", "0").split(".") if x.isdigit())


def check_metadata(
    meta: Message, want: str | None, where: str, rules: tuple[str, str]
) -> list[Finding]:
    """``rules``: the ids of (a metadata problem, a License-Expression problem)."""
    meta_rule, expr_rule = rules
    out = []
    if metadata_version(meta) < (2, 4):
        out.append(
            Finding(
                meta_rule,
                where,
                "PEP 639 metadata needs Metadata-Version 2.4 or later",
                ">= 2.4",
                meta.get("Metadata-Version", "(missing)"),
            )
        )
    expr = meta.get("License-Expression")
    if not expr:
        out.append(
            Finding(
                meta_rule,
                where,
                "METADATA has no License-Expression",
                want or "an SPDX expression",
                "(missing)",
            )
        )
    elif invalid(expr):
        out.append(
            Finding(
                expr_rule,
                where,
                f"License-Expression is not a valid SPDX expression: {invalid(expr)}",
                want or "an SPDX expression",
                expr,
            )
        )
    elif want is not None and terms(expr) != terms(want):
        out.append(
            Finding(
                expr_rule, where, "License-Expression is not the distribution's terms", want, expr
            )
        )
    return out
