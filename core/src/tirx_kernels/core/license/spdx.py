# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""SPDX expressions as sets of terms, the tags and header lines, and license-text fingerprints.

The tag strings are assembled from pieces so that scanners (``reuse``) reading this file
see only its own header.
"""

from __future__ import annotations

import re

LICENSE_TAG = "SPDX-License-" "Identifier"
COPYRIGHT_TAG = "SPDX-File" "CopyrightText"
NATIVE_SPDX = "Apache-2.0"
TIRX_COPYRIGHT = "Copyright TIRx authors"
NATIVE_LICENSE_LINE = f"# {LICENSE_TAG}: {NATIVE_SPDX}"
COPYRIGHT_LINE = f"# {COPYRIGHT_TAG}: {TIRX_COPYRIGHT}"
NATIVE_HEADER = (NATIVE_LICENSE_LINE, COPYRIGHT_LINE)


def native_header() -> tuple[str, ...]:
    """The two lines a native file starts with."""
    return NATIVE_HEADER


PORT_PREFIX = "# This file is a TIRx port of code from "

# Phrases every copy of a license text contains (checked on shipped license files).
FINGERPRINTS: dict[str, tuple[str, ...]] = {
    "Apache-2.0": ("Apache License", "Version 2.0, January 2004"),
    "MIT": ("Permission is hereby granted, free of charge",),
    "BSD-2-Clause": ("Redistribution and use in source and binary forms",),
    "BSD-3-Clause": ("Redistribution and use in source and binary forms", "Neither the name"),
}

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def terms(expression: str) -> frozenset[str]:
    """The conjuncts of an expression: ``"Apache-2.0 AND (MIT)"`` -> {Apache-2.0, MIT}.

    A disjunction or ``WITH`` clause stays one term (``"MIT OR Zlib"``): it is never split,
    so a choice of licenses cannot silently satisfy a conjunction.
    """
    tokens = _TOKEN.findall(expression or "")
    out: list[str] = []
    depth, current = 0, []
    for tok in tokens:
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        if depth == 0 and tok.upper() == "AND":
            out.append(" ".join(current))
            current = []
        else:
            current.append(tok)
    out.append(" ".join(current))
    cleaned = set()
    for term in out:
        term = term.strip()
        while term.startswith("(") and term.endswith(")") and _balanced(term[1:-1]):
            term = term[1:-1].strip()
        if term:
            cleaned.add(term)
    return frozenset(cleaned)


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def join(*expressions: str) -> str:
    """The conjunction of expressions, canonical order: Apache-2.0 first, then sorted."""
    found: set[str] = set()
    for e in expressions:
        found |= terms(e)
    ordered = sorted(found, key=lambda t: (t != NATIVE_SPDX, t.lower()))
    return " AND ".join(f"({t})" if " " in t else t for t in ordered)


def invalid(expression: str) -> str | None:
    """Why ``expression`` is not a valid SPDX expression (None when valid or unknowable)."""
    try:
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
    except ImportError:  # packaging < 24.2: no validator available
        return None
    try:
        canonicalize_license_expression(expression)
    except InvalidLicenseExpression as e:
        return str(e)
    return None


def normalize_text(text: str) -> str:
    return " ".join(text.split())
