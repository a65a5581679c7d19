# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license fix``: add the native header to header-less files of native packages.

It never touches a port family: the upstream project, commit, copyright and terms of a port
cannot be synthesized, so such files are refused and must be headed by hand.

Writes are safe: a symlink that leads out of the repository is left alone, every file is
read and decoded before any is written (one unreadable file means nothing is written), line
endings are kept, and each file is replaced atomically (temporary file, then rename).
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .audit import own_python_files
from .discover import Distribution, Repo
from .headers import has_any_header, header_block
from .spdx import native_header

BOM = "\ufeff"


@dataclass
class FixResult:
    fixed: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) left alone
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, why): nothing written


def newline_of(text: str) -> str:
    """The file's line ending, from its first line (LF when it has none)."""
    first = text.splitlines(keepends=True)[:1]
    if first and first[0].endswith("\r\n"):
        return "\r\n"
    if first and first[0].endswith("\r"):
        return "\r"
    return "\n"


def add_native_header(text: str, header: tuple[str, ...] | None = None) -> str:
    """``text`` with the native header after any shebang/coding line, same line endings."""
    header = header or native_header()
    bom = BOM if text.startswith(BOM) else ""
    text = text[len(bom) :]
    newline = newline_of(text)
    lines = text.splitlines(keepends=True)
    start, _ = header_block([line.rstrip("\r\n") for line in lines])
    if start and not lines[start - 1].endswith(("\n", "\r")):
        lines[start - 1] += newline  # a shebang-only file without a final newline
    return (
        bom + "".join(lines[:start]) + "".join(h + newline for h in header) + "".join(lines[start:])
    )


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass
class _Planned:
    rel: str
    path: Path  # resolved, inside the repository
    text: str


def _plan(dists, repo, every, wanted, result: FixResult) -> list[_Planned]:
    """Read and decide every candidate; writes nothing."""
    plan: list[_Planned] = []
    seen: set[Path] = set()
    matched: set[Path] = set()  # named files this run accounts for (fixed, skipped, ...)
    root = repo.root.resolve()
    for dist in dists:
        if dist.root is None:
            continue
        header = native_header(dist.policy.copyright_holder)
        for rel in own_python_files(dist, repo, every):
            link = repo.root / rel
            path = link.resolve()
            if wanted is not None and path not in wanted:
                continue
            matched.add(path)
            if not _inside(path, root):
                # Following it would rewrite a file of another project (or of the system).
                result.skipped.append((rel, f"a symlink to {path}, outside the repository"))
                continue
            if path in seen:  # a symlink to a file of the repository: fix the file once
                continue
            seen.add(path)
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                result.errors.append(
                    (
                        rel,
                        f"not UTF-8 ({e.reason} at byte {e.start}): "
                        "re-encode it as UTF-8, or name only other files, "
                        "then rerun",
                    )
                )
                continue
            except OSError as e:
                result.errors.append(
                    (
                        rel,
                        f"cannot read it ({e.strerror or e}): fix its "
                        "permissions or name only other files, then rerun",
                    )
                )
                continue
            if not dist.policy.native:
                if not has_any_header(text):
                    result.refused.append(
                        (
                            rel,
                            f"{dist.name} is a port family "
                            f"({dist.policy.upstream.project}): write its header "
                            "by hand",
                        )
                    )
                continue
            if has_any_header(text):
                if list(map(str.rstrip, header_block(text.splitlines())[1])) != list(header):
                    result.skipped.append(
                        (rel, "has a header that is not the native one (see tirx-license audit)")
                    )
                continue
            plan.append(_Planned(rel, path, add_native_header(text, header)))
    if wanted is not None:
        for path in sorted(wanted - matched):
            result.refused.append((str(path), "not a Python file of an audited distribution"))
    return plan


def _write_all(plan: list[_Planned]) -> None:
    """Stage every file as a temporary sibling, then rename each over its original.

    A failure while staging removes the temporaries and leaves every original untouched.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for item in plan:
            fd, tmp = tempfile.mkstemp(
                dir=item.path.parent, prefix=f".{item.path.name}.", suffix=".tmp"
            )
            staged.append((tmp, item.path))
            with os.fdopen(fd, "wb") as f:
                f.write(item.text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, stat.S_IMODE(item.path.stat().st_mode))
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def fix(
    dists: list[Distribution],
    repo: Repo,
    every: list[Distribution],
    only: list[Path] | None = None,
    dry_run: bool = False,
) -> FixResult:
    result = FixResult()
    wanted = {p.resolve() for p in only} if only else None
    plan = _plan(dists, repo, every, wanted, result)
    if result.errors:
        return result  # all or nothing: one unreadable file, no file written
    if not dry_run:
        try:
            _write_all(plan)
        except OSError as e:
            result.errors.append(
                (
                    str(getattr(e, "filename", "") or "?"),
                    f"cannot write ({e.strerror or e}); no file was changed",
                )
            )
            return result
    result.fixed = [item.rel for item in plan]
    return result
