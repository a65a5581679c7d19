# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license fix``: add the native header to header-less files of native packages.

It never touches a port family: the upstream project, commit, copyright and terms of a port
cannot be synthesized, so such files are refused and must be headed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .audit import own_python_files
from .discover import Distribution, Repo
from .headers import has_any_header, header_block
from .spdx import NATIVE_HEADER


@dataclass
class FixResult:
    fixed: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # has a (maybe wrong) header


def add_native_header(text: str) -> str:
    lines = text.splitlines(keepends=True)
    start, _ = header_block([line.rstrip("\n") for line in lines])
    header = "".join(line + "\n" for line in NATIVE_HEADER)
    return "".join(lines[:start]) + header + "".join(lines[start:])


def fix(dists: list[Distribution], repo: Repo, every: list[Distribution],
        only: list[Path] | None = None, dry_run: bool = False) -> FixResult:
    result = FixResult()
    wanted = {p.resolve() for p in only} if only else None
    seen: set[Path] = set()
    for dist in dists:
        if dist.root is None:
            continue
        for rel in own_python_files(dist, repo, every):
            path = (repo.root / rel).resolve()
            if wanted is not None and path not in wanted:
                continue
            seen.add(path)
            text = path.read_text(encoding="utf-8")
            if not dist.policy.native:
                if not has_any_header(text):
                    result.refused.append((rel, f"{dist.name} is a port family "
                                           f"({dist.policy.upstream.project}): write its header "
                                           "by hand"))
                continue
            if has_any_header(text):
                if list(map(str.rstrip, header_block(text.splitlines())[1])) != \
                        list(NATIVE_HEADER):
                    result.skipped.append((rel, "has a header that is not the native one"))
                continue
            if not dry_run:
                path.write_text(add_native_header(text), encoding="utf-8")
            result.fixed.append(rel)
    for path in sorted((wanted or set()) - seen):
        result.refused.append((str(path), "not a Python file of an audited distribution"))
    return result
