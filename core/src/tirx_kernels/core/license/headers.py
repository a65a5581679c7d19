# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Header rules for one Python file: native, port (with overrides' required text), or either.

The header is the leading block of ``#`` lines (after an optional shebang / coding line).
A native header is exactly the two native lines. A port header is::

    # This file is a TIRx port of code from <Project>
    # (<canonical URL> @ <40-hex commit>), <upstream copyright, may continue on more lines>
    # <tag>: Apache-2.0 AND <upstream SPDX>
    # <copyright tag>: Copyright <LicensePolicy.copyright_holder, default TIRx authors>
    # <required file-local text, e.g. BSD conditions and disclaimer, verbatim>

and the module docstring names the upstream source path(s) (``dir/file.ext``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..family import Upstream
from .findings import Finding
from .spdx import (
    COPYRIGHT_TAG,
    LICENSE_TAG,
    NATIVE_SPDX,
    PORT_PREFIX,
    TIRX_HOLDER,
    copyright_line,
    invalid,
    native_header,
    normalize_text,
    terms,
)

_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]")
_SPDX_LINE = re.compile(r"^#\s*" + LICENSE_TAG + r":\s*(?P<expr>.*?)\s*$")
_CITATION = re.compile(r"^# \((?P<inner>.*?)\),\s*(?P<copy>.*)$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# A relative source path with a directory and an extension: include/flashinfer/norm.cuh
_SOURCE_PATH = re.compile(r"(?<![\w/.-])(?:[\w.+-]+/)+[\w+-][\w.+-]*\.[A-Za-z0-9]+\b")


# Upstream files carry their own years ("2023", "2024-2026"): the notice matches any years.
_YEARS = re.compile(r"\b(?:19|20)\d\d(?:\s*[-,]\s*(?:19|20)\d\d)*\b")


def _any_year(text: str) -> str:
    return _YEARS.sub("<year>", normalize_text(text))


@dataclass(frozen=True)
class FileRule:
    """What one file must carry. ``kind``: "native", "port" or "either" (harness files)."""

    kind: str
    spdx: str = NATIVE_SPDX  # expected expression of a port header
    upstream: Upstream | None = None
    required_text: tuple[str, ...] = ()
    why: str = ""  # which policy entry decided this, for messages
    holder: str = TIRX_HOLDER  # the family's copyright holder (LicensePolicy)


def header_block(lines: list[str]) -> tuple[int, list[str]]:
    """(index of the first header line, the leading ``#`` lines)."""
    start = 0
    if lines and lines[0].startswith("#!"):
        start = 1
    if len(lines) > start and _CODING.match(lines[start]) and LICENSE_TAG not in lines[start]:
        start += 1
    end = start
    while end < len(lines) and lines[end].startswith("#"):
        end += 1
    return start, lines[start:end]


def is_port(lines: list[str]) -> bool:
    return any(line.startswith(PORT_PREFIX) for line in header_block(lines)[1])


def has_any_header(text: str) -> bool:
    return LICENSE_TAG in text or COPYRIGHT_TAG in text or PORT_PREFIX.strip() in text


def check_python(text: str, rule: FileRule, path: str) -> list[Finding]:
    lines = text.splitlines()
    out: list[Finding] = []

    def add(name, message, expected="", found="", line=None):
        out.append(Finding(name, path, message, expected, found, line))

    # Exactly one SPDX expression in the whole file, as scanners see it (strings included).
    tagged = [i + 1 for i, line in enumerate(lines) if LICENSE_TAG in line]
    if len(tagged) != 1:
        add(
            "spdx-count",
            f"the file must hold exactly one {LICENSE_TAG} line",
            "1",
            f"{len(tagged)} (lines {', '.join(map(str, tagged)) or 'none'})",
            tagged[1] if len(tagged) > 1 else None,
        )
    start, block = header_block(lines)
    spdx = [
        (start + i + 1, m.group("expr"))
        for i, line in enumerate(block)
        if (m := _SPDX_LINE.match(line))
    ]
    if tagged and not spdx:
        add(
            "spdx-placement",
            "the SPDX line must be in the leading comment block",
            f"line {start + 1}-{start + len(block) + 1}",
            f"line {tagged[0]}",
            tagged[0],
        )
    own_line = copyright_line(rule.holder)
    own = [start + i + 1 for i, line in enumerate(block) if line.rstrip() == own_line]
    everywhere = sum(1 for line in lines if line.rstrip() == own_line)
    if len(own) != 1 or everywhere != 1:
        add(
            "tirx-copyright",
            "the header must hold the family's copyright line exactly once",
            own_line,
            f"{everywhere} in file, {len(own)} in the header",
            start + 1,
        )

    port = any(line.startswith(PORT_PREFIX) for line in block)
    kind = rule.kind if rule.kind != "either" else ("port" if port else "native")
    expected = NATIVE_SPDX if kind == "native" else rule.spdx
    for lineno, expr in spdx[:1]:
        why = invalid(expr)
        if why:
            add("spdx-expression", f"invalid SPDX expression: {why}", expected, expr, lineno)
        elif terms(expr) != terms(expected):
            add(
                "spdx-expression",
                f"wrong SPDX expression ({rule.why or kind})",
                expected,
                expr,
                lineno,
            )
    if kind == "native":
        header = native_header(rule.holder)
        if list(map(str.rstrip, block)) != list(header):
            add(
                "native-header",
                f"a native file starts with exactly the two native lines ({rule.why or 'native'})",
                " | ".join(header),
                " | ".join(block[:4]) + (" | ..." if len(block) > 4 else ""),
                start + 1,
            )
        return out
    out += _check_port(text, lines, start, block, rule, path)
    return out


def _check_port(text, lines, start, block, rule: FileRule, path) -> list[Finding]:
    out: list[Finding] = []
    up = rule.upstream

    def add(name, message, expected="", found="", line=None):
        out.append(Finding(name, path, message, expected, found, line))

    project = up.project if up else "<Project>"
    if not block or not block[0].startswith(PORT_PREFIX):
        at = next((i for i, line in enumerate(block) if line.startswith(PORT_PREFIX)), None)
        if at is not None:
            found = f"the port line at line {start + at + 1}, not first"
        else:
            found = block[0] if block else "(no header)"
        add(
            "port-header",
            f"a port starts with its port header ({rule.why or 'port'})",
            PORT_PREFIX + project,
            found,
            start + 1,
        )
        if at is None:
            return out
        block = block[at:]
        start += at
    found_project = block[0][len(PORT_PREFIX) :].strip()
    if up and found_project != up.project:
        add(
            "port-project",
            "the port header names the wrong upstream project",
            up.project,
            found_project,
            start + 1,
        )
    m = _CITATION.match(block[1]) if len(block) > 1 else None
    if m is None:
        add(
            "port-citation",
            "the second header line cites the upstream as "
            "'# (<canonical URL> @ <commit>), <copyright>'",
            f"# ({up.url if up else '<URL>'} @ <40-hex commit>), {up.copyright if up else ''}",
            block[1] if len(block) > 1 else "(missing)",
            start + 2,
        )
        return out
    url, sep, commit = m.group("inner").partition(" @ ")
    if not sep:  # no " @ ": the URL is missing
        url, commit = "", url
    url, commit = url.strip(), commit.strip()
    if up and url != up.url:
        add(
            "port-url",
            "the port header must cite the canonical upstream URL",
            up.url,
            url or "(missing)",
            start + 2,
        )
    if not _COMMIT.match(commit):
        add(
            "port-commit",
            "the port header must cite a full 40-hex upstream commit",
            "40 lower-case hex digits",
            commit or "(missing)",
            start + 2,
        )
    elif up and up.commit and commit not in (up.commit, *up.other_commits):
        add(
            "port-commit",
            "the port cites a commit the family's policy does not pin",
            " or ".join((up.commit, *up.other_commits)),
            commit,
            start + 2,
        )
    # The upstream copyright: rest of the citation line plus continuation lines.
    copy_lines = [m.group("copy")]
    for line in block[2:]:
        if LICENSE_TAG in line or COPYRIGHT_TAG in line:
            break
        copy_lines.append(line.lstrip("#"))
    found_copy = normalize_text(" ".join(copy_lines))
    if not found_copy or (
        up and up.copyright and _any_year(up.copyright) not in _any_year(found_copy)
    ):
        add(
            "port-copyright",
            "the port header must keep the upstream copyright notice",
            up.copyright if up else "an upstream copyright notice",
            found_copy or "(missing)",
            start + 2,
        )
    body = normalize_text(" ".join(line.lstrip("#") for line in block))
    pos = 0
    for required in rule.required_text:
        want = normalize_text(required)
        at = body.find(want, pos)
        if at < 0:
            add(
                "required-text",
                "file-local upstream text must be kept verbatim in the header "
                f"({rule.why or 'override'})",
                want[:120] + ("..." if len(want) > 120 else ""),
                "(missing)",
                start + 1,
            )
        else:
            pos = at + len(want)
    try:
        doc = ast.get_docstring(ast.parse(text)) or ""
    except SyntaxError as e:
        add("syntax", "cannot parse the file", "valid Python", str(e), e.lineno)
        return out
    if not _SOURCE_PATH.search(doc):
        add(
            "port-source-path",
            "the module docstring must name the upstream source path(s)",
            "a path such as include/flashinfer/norm.cuh",
            doc.split("\n", 1)[0][:80] or "(no docstring)",
            1,
        )
    return out
