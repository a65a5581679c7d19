# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""SPDX expressions as sets of terms, the tags and header lines, and license-text fingerprints.

Expressions are parsed by ``license-expression`` against the SPDX license list it ships, so
an unknown or misspelled identifier (``Apache2``) or broken syntax (``MIT-0 AND``) is
invalid, and comparison ignores order (``A AND B`` equals ``B AND A``).

The tag strings are assembled from pieces so that scanners (``reuse``) reading this file
see only its own header.
"""

from __future__ import annotations

import functools
import re

LICENSE_TAG = "SPDX-" + "License-Identifier"  # split: this file has one tag, its own
COPYRIGHT_TAG = "SPDX-FileCopyrightText"
NATIVE_SPDX = "Apache-2.0"
TIRX_HOLDER = "TIRx authors"  # LicensePolicy.copyright_holder's default
TIRX_COPYRIGHT = f"Copyright {TIRX_HOLDER}"
NATIVE_LICENSE_LINE = f"# {LICENSE_TAG}: {NATIVE_SPDX}"
COPYRIGHT_LINE = f"# {COPYRIGHT_TAG}: {TIRX_COPYRIGHT}"
NATIVE_HEADER = (NATIVE_LICENSE_LINE, COPYRIGHT_LINE)


def copyright_line(holder: str = TIRX_HOLDER) -> str:
    """The header line naming the family's own copyright holder."""
    return f"# {COPYRIGHT_TAG}: Copyright {holder}"


def native_header(holder: str = TIRX_HOLDER) -> tuple[str, ...]:
    """The two lines a native file of a family whose code ``holder`` owns starts with."""
    return (NATIVE_LICENSE_LINE, copyright_line(holder))


PORT_PREFIX = "# This file is a TIRx port of code from "

# Phrases every copy of a license text contains (checked on shipped license files).
FINGERPRINTS: dict[str, tuple[str, ...]] = {
    "Apache-2.0": ("Apache License", "Version 2.0, January 2004"),
    "MIT": ("Permission is hereby granted, free of charge",),
    "BSD-2-Clause": ("Redistribution and use in source and binary forms",),
    "BSD-3-Clause": ("Redistribution and use in source and binary forms", "Neither the name"),
}

# A user-defined license reference (SPDX 2.3 annex D): valid although on no list.
_LICENSE_REF = re.compile(r"^(DocumentRef-[A-Za-z0-9.-]+:)?LicenseRef-[A-Za-z0-9.-]+$")


class InvalidExpression(ValueError):
    """Not a valid SPDX expression (syntax, or an identifier not on the SPDX list)."""


@functools.lru_cache(maxsize=1)
def _licensing():
    # license-expression ships the SPDX license list; building its index takes a moment.
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


@functools.lru_cache(maxsize=1024)
def parse(expression: str):
    """The simplified expression (``license_expression``), or :class:`InvalidExpression`.

    Simplified means canonical: conjuncts flattened, deduplicated and sorted, identifiers in
    their SPDX spelling, so ``"MIT AND Apache-2.0"`` and ``"Apache-2.0 AND MIT"`` parse equal.
    """
    if not expression or not expression.strip():
        raise InvalidExpression("empty expression")
    licensing = _licensing()
    try:
        parsed = licensing.parse(expression, validate=False, strict=True)
    except Exception as e:  # the library raises ExpressionError, ParseError and others
        raise InvalidExpression(str(e)) from None
    unknown = [k for k in licensing.unknown_license_keys(parsed) if not _LICENSE_REF.match(k)]
    if unknown:
        raise InvalidExpression(
            f"unknown license identifier {', '.join(unknown)} (not on the SPDX license list)"
        )
    return parsed.simplify()


def invalid(expression: str) -> str | None:
    """Why ``expression`` is not a valid SPDX expression; None when it is valid."""
    try:
        parse(expression)
    except InvalidExpression as e:
        return str(e)
    return None


def terms(expression: str) -> frozenset[str]:
    """The conjuncts of an expression: ``"Apache-2.0 AND (MIT)"`` -> {Apache-2.0, MIT}.

    A disjunction or ``WITH`` clause stays one term (``"MIT OR Zlib"``): it is never split,
    so a choice of licenses cannot silently satisfy a conjunction. An invalid expression is
    one opaque term, equal to no valid one (callers report it through :func:`invalid`).
    """
    try:
        parsed = parse(expression)
    except InvalidExpression:
        return (
            frozenset({(expression or "").strip()}) if (expression or "").strip() else frozenset()
        )
    parts = parsed.args if isinstance(parsed, _licensing().AND) else (parsed,)
    return frozenset(str(p) for p in parts)


def same(a: str, b: str) -> bool:
    """Whether two valid expressions mean the same terms (``A AND B`` equals ``B AND A``)."""
    return invalid(a) is None and invalid(b) is None and terms(a) == terms(b)


def join(*expressions: str) -> str:
    """The conjunction of expressions, canonical order: Apache-2.0 first, then sorted."""
    found: set[str] = set()
    for e in expressions:
        found |= terms(e)
    ordered = sorted(found, key=lambda t: (t != NATIVE_SPDX, t.lower()))
    return " AND ".join(f"({t})" if " OR " in t else t for t in ordered)


def normalize_text(text: str) -> str:
    return " ".join(text.split())
