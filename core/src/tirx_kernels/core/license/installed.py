# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The audit of an installed distribution: what pip put on disk, no checkout needed.

Read from the ``.dist-info``: METADATA (PEP 639, License-Expression equal to the policy's),
the license files under ``licenses/`` (every text the policy requires, byte-identical to the
copy the distribution shipped, i.e. its RECORD hash, and holding the text of each license
named) and the header of every installed Python file RECORD lists. Findings name the
installed file by its absolute path.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
from email.parser import HeaderParser
from pathlib import Path
from typing import cast

from .discover import Distribution
from .findings import Finding
from .headers import check_python
from .metadata import check_metadata
from .policy import check_policy, check_texts, expected_expression, required_files, rule_for
from .spdx import terms

# Same bound as a wheel member: no license or source file comes near it.
MAX_FILE_BYTES = 16 << 20


def locate(inst: importlib.metadata.Distribution, rel: str) -> Path:
    """``inst.locate_file(rel)`` as a Path (typeshed types it as a bare ``SimplePath``; an
    installed distribution's is a filesystem path)."""
    return Path(cast("os.PathLike[str]", inst.locate_file(rel)))


def _read(path: Path, out: list[Finding]) -> bytes | None:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            out.append(
                Finding(
                    "installed-file",
                    str(path),
                    "file is larger than the audit reads; not checked",
                    f"<= {MAX_FILE_BYTES} bytes",
                    f"{size} bytes",
                )
            )
            return None
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
    except OSError as e:
        out.append(
            Finding(
                "installed-file",
                str(path),
                f"cannot read the installed file ({e.strerror or e}); reinstall the distribution",
            )
        )
        return None


def _record_hash(data: bytes, mode: str) -> str | None:
    try:
        digest = hashlib.new(mode, data).digest()
    except ValueError:
        return None
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def python_files(dist: Distribution) -> list[str]:
    """RECORD's Python files inside site-packages (not scripts, not the .dist-info)."""
    files = dist.installed.files if dist.installed is not None else None
    return sorted(
        f.as_posix()
        for f in files or ()
        if f.as_posix().endswith(".py")
        and not f.as_posix().startswith("../")
        and ".dist-info/" not in f.as_posix()
    )


def audit_installed(dist: Distribution, every: list[Distribution]) -> list[Finding]:
    inst = dist.installed
    assert inst is not None  # audited from what pip installed
    out: list[Finding] = []
    where = str(dist.plugin_file or inst.locate_file(""))
    out += check_policy(dist, where)
    record = {f.as_posix(): f for f in inst.files or ()}
    info = next(
        (
            p.rsplit("/", 1)[0]
            for p in record
            if p.endswith(".dist-info/METADATA") and p.count("/") == 1
        ),
        None,
    )
    if not record or info is None:
        return out + [
            Finding(
                "installed-record",
                str(inst.locate_file("")),
                f"{dist.name} "
                "has no RECORD listing its METADATA: its files cannot be "
                "audited; reinstall it with pip",
            )
        ]
    meta_path = locate(inst, f"{info}/METADATA")
    raw = _read(meta_path, out)
    if raw is None:
        return out
    meta = HeaderParser().parsestr(raw.decode("utf-8", "replace"))
    want = (
        dist.loaded_policy.expression if dist.kind != "other" else expected_expression(dist, every)
    )
    out += check_metadata(meta, want, str(meta_path), ("metadata", "metadata-license-expression"))
    listed = meta.get_all("License-File") or []
    texts: dict[str, str] = {}
    for rel in sorted(set(listed) | set(required_files(dist))):
        member = f"{info}/licenses/{rel}"
        path = locate(inst, member)
        if rel not in listed:
            out.append(
                Finding(
                    "license-file-missing",
                    str(meta_path),
                    "a required license/notice file is not a License-File",
                    rel,
                    ", ".join(listed) or "(none)",
                )
            )
        if not path.is_file():
            out.append(
                Finding(
                    "license-file-missing",
                    str(path),
                    "the distribution must carry this license/notice file",
                    rel,
                    "(missing)",
                )
            )
            continue
        data = _read(path, out)
        if data is None:
            continue
        texts[rel] = data.decode("utf-8", "replace")
        entry = record.get(member)
        shipped = entry.hash if entry is not None else None
        if shipped is None:
            out.append(
                Finding(
                    "installed-record",
                    str(path),
                    "RECORD has no hash for this "
                    "license file, so it cannot be proven to be the shipped copy",
                    "a sha256 entry",
                    "(none)",
                )
            )
        elif _record_hash(data, shipped.mode) != shipped.value:
            out.append(
                Finding(
                    "license-file-differs",
                    str(path),
                    "installed copy differs from the copy the distribution shipped (RECORD hash)",
                    f"{shipped.mode}={shipped.value}",
                    "different bytes",
                )
            )
    out += check_texts(terms(want), texts, str(meta_path.parent / "licenses"))
    prefix = dist.package_path + "/" if dist.package_path else None
    for rel in python_files(dist):
        path = locate(inst, rel)
        data = _read(path, out)
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            out.append(Finding("unreadable", str(path), "not UTF-8", "", str(e)))
            continue
        inside = rel[len(prefix) :] if prefix and rel.startswith(prefix) else None
        out += check_python(text, rule_for(dist, inside), str(path))
    return out
