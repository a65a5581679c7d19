# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The wheel audit: METADATA License-Expression / License-File and the files a wheel ships.

A wheel is untrusted input: members are read only up to ``MAX_MEMBER_BYTES`` (a larger one
is a finding, never loaded), and a member that cannot be decompressed is a finding naming
the wheel and the member, never a traceback.
"""

from __future__ import annotations

import zipfile
import zlib
from email.parser import HeaderParser
from pathlib import Path

from .discover import Distribution, Repo, normalize
from .findings import Finding
from .headers import check_python
from .metadata import check_metadata
from .policy import check_texts, expected_expression, required_files, rule_for
from .spdx import terms

# License texts, METADATA and Python sources are far below this; a member above it is not a
# file the audit needs to read, and reading it could exhaust memory.
MAX_MEMBER_BYTES = 16 << 20
# Errors zipfile raises on a damaged archive or member (zlib.error: a corrupt deflate
# stream; BadZipFile: a bad CRC or header; EOFError: truncated; NotImplementedError: an
# unsupported compression method; RuntimeError: an encrypted member).
ZIP_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zipfile.BadZipFile,
    zlib.error,
)


class _Members:
    """Bounded reads of a wheel's members; each problem becomes a finding."""

    def __init__(self, zf: zipfile.ZipFile, name: str, out: list[Finding]):
        self.zf, self.name, self.out = zf, name, out

    def read(self, member: str) -> bytes | None:
        where = f"{self.name}!{member}"
        try:
            info = self.zf.getinfo(member)
            if info.file_size > MAX_MEMBER_BYTES:
                self._too_large(where, info.file_size)
                return None
            with self.zf.open(info) as f:
                data = f.read(MAX_MEMBER_BYTES + 1)  # bounded even if the header lies
        except ZIP_ERRORS as e:
            self.out.append(
                Finding(
                    "wheel-corrupt",
                    where,
                    f"cannot read this member: {type(e).__name__}: {e}; rebuild the wheel",
                )
            )
            return None
        if len(data) > MAX_MEMBER_BYTES:
            self._too_large(where, len(data))
            return None
        return data

    def text(self, member: str) -> str | None:
        data = self.read(member)
        return None if data is None else data.decode("utf-8", "replace")

    def _too_large(self, where: str, size: int) -> None:
        self.out.append(
            Finding(
                "wheel-member-too-large",
                where,
                "member is larger than the audit reads; not checked",
                f"<= {MAX_MEMBER_BYTES} bytes",
                f"{size} bytes",
            )
        )


def audit_wheel(path: Path, dists: list[Distribution], repo: Repo | None) -> list[Finding]:
    path = Path(path)
    out: list[Finding] = []
    try:
        zf = zipfile.ZipFile(path)
    except ZIP_ERRORS as e:
        return [
            Finding(
                "wheel",
                path.name,
                f"cannot open the wheel ({type(e).__name__}: {e}); "
                "pass a .whl built by a PEP 517 backend",
            )
        ]
    with zf:
        _audit_open_wheel(zf, path.name, dists, repo, out)
    return out


def _audit_open_wheel(
    zf: zipfile.ZipFile, name: str, dists: list[Distribution], repo: Repo | None, out: list[Finding]
) -> None:
    def add(rule, member, message, expected="", found=""):
        out.append(Finding(rule, f"{name}!{member}" if member else name, message, expected, found))

    members = set(zf.namelist())
    reader = _Members(zf, name, out)
    infos = sorted(
        {m.split("/", 1)[0] for m in members if m.split("/", 1)[0].endswith(".dist-info")}
    )
    if len(infos) != 1 or f"{infos[0]}/METADATA" not in members:
        add(
            "wheel",
            "",
            "a wheel has exactly one .dist-info with METADATA",
            "1",
            ", ".join(infos) or "none",
        )
        return
    info = infos[0]
    raw = reader.text(f"{info}/METADATA")
    if raw is None:
        return
    meta = HeaderParser().parsestr(raw)
    dist_name = normalize(meta.get("Name", ""))
    dist = next((d for d in dists if d.name == dist_name and d.kind != "broken"), None)
    want = expected_expression(dist, dists) if dist else None
    out.extend(
        check_metadata(
            meta, want, f"{name}!{info}/METADATA", ("wheel-metadata", "wheel-license-expression")
        )
    )
    expr = meta.get("License-Expression")
    listed = meta.get_all("License-File") or []
    for rel in listed:
        if f"{info}/licenses/{rel}" not in members:
            add(
                "wheel-license-file",
                f"{info}/licenses/{rel}",
                "METADATA lists a License-File the wheel does not ship",
                rel,
                "(missing)",
            )
    texts: dict[str, str] = {}
    for rel in listed:
        member = f"{info}/licenses/{rel}"
        if member in members:
            data = reader.read(member)
            if data is not None:
                texts[rel] = data.decode("utf-8", "replace")
                root_copy = repo.root / rel if repo is not None else None
                if root_copy is not None and root_copy.is_file() and root_copy.read_bytes() != data:
                    add(
                        "wheel-file-differs",
                        member,
                        "shipped license file differs from the repository root copy",
                        rel,
                        "different bytes",
                    )
    for rel in required_files(dist) if dist else ["LICENSE"]:
        if rel not in listed:
            add(
                "wheel-license-file",
                f"{info}/METADATA",
                "a required license/notice file is not a License-File",
                rel,
                ", ".join(listed) or "(none)",
            )
    for f in check_texts(terms(expr or ""), texts, ""):
        add(f.rule, f"{info}/licenses", f.message, f.expected, f.found)
    if dist is not None and dist.package_path:
        prefix = dist.package_path + "/"
        for member in sorted(m for m in members if m.startswith(prefix) and m.endswith(".py")):
            text = reader.text(member)
            if text is not None:
                out.extend(
                    check_python(text, rule_for(dist, member[len(prefix) :]), f"{name}!{member}")
                )
    elif dist is None:
        add(
            "wheel-unknown",
            "",
            "no known distribution of this name: only METADATA consistency was checked",
            "a discovered distribution",
            dist_name,
        )
