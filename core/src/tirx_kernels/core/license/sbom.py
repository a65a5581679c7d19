# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license sbom``: an SPDX 2.3 JSON document of the audited distributions.

One package per distribution (version, declared license = its policy's expression,
concluded license = the union of the terms of its files and upstreams, purl), one package
per upstream project and pinned commit its ports come from (``DESCENDANT_OF``, purl and
a VCS download location), and one file per ported file with its header's license and both
copyright notices. The document model, validation and JSON writer are ``spdx-tools``
(an optional dependency: ``pip install 'tirx-kernels-core[sbom]'``).
"""

from __future__ import annotations

import hashlib
import io
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from .audit import own_python_files
from .discover import Distribution, Repo
from .headers import header_block
from .installed import locate
from .installed import python_files as installed_python_files
from .policy import expected_expression, rule_for
from .spdx import LICENSE_TAG, parse

_CITED_COMMIT = re.compile(r"^# \(.*? @ ([0-9a-f]{40})\)")
_GITHUB = re.compile(r"^https://github\.com/([^/]+)/([^/]+?)/?$")


class SbomUnavailable(RuntimeError):
    """spdx-tools is not installed."""


@dataclass(frozen=True)
class PortedFile:
    name: str  # path inside the distribution's install tree: tirx_kernels/flashinfer/x.py
    data: bytes
    rel_to_package: str | None


def _files(dist: Distribution, repo: Repo | None, every) -> list[PortedFile]:
    """The distribution's Python files with their path as installed and their bytes."""
    out = []
    if dist.root is not None:
        home = dist.home or repo
        assert home is not None  # a source tree is read inside a repository
        for rel in own_python_files(dist, home, every):
            path = (home.root / rel).resolve()
            inside = None
            if dist.package_dir is not None and dist.package_dir in path.parents:
                inside = path.relative_to(dist.package_dir).as_posix()
            name = f"{dist.package_path}/{inside}" if inside else rel
            out.append(PortedFile(name, path.read_bytes(), inside))
    elif dist.installed is not None:
        prefix = f"{dist.package_path}/" if dist.package_path else None
        for rel in installed_python_files(dist):
            inside = rel[len(prefix) :] if prefix and rel.startswith(prefix) else None
            out.append(PortedFile(rel, locate(dist.installed, rel).read_bytes(), inside))
    return out


def _spdx_id(*parts: str) -> str:
    return "SPDXRef-" + "-".join(re.sub(r"[^A-Za-z0-9.]+", "-", p).strip("-") for p in parts)


def _header_facts(text: str) -> tuple[str | None, str | None, list[str]]:
    """(the SPDX expression, the cited upstream commit, the copyright lines) of a header."""
    _, block = header_block(text.splitlines())
    expr = commit = None
    copyrights = []
    for line in block:
        if f"{LICENSE_TAG}:" in line and expr is None:
            expr = line.split(f"{LICENSE_TAG}:", 1)[1].strip()
        elif (m := _CITED_COMMIT.match(line)) and commit is None:
            commit = m.group(1)
            copyrights.append(line.split("),", 1)[1].strip())
        elif "Copyright" in line:
            copyrights.append(line.lstrip("# ").split("CopyrightText:", 1)[-1].strip())
    return expr, commit, [c for c in copyrights if c]


def build_document(
    dists: list[Distribution],
    repo: Repo | None,
    every,
    tool_version: str,
    created: datetime | None = None,
):
    try:
        from spdx_tools.spdx.model import (
            Actor,
            ActorType,
            Checksum,
            ChecksumAlgorithm,
            CreationInfo,
            Document,
            ExternalPackageRef,
            ExternalPackageRefCategory,
            File,
            FileType,
            Package,
            Relationship,
            RelationshipType,
            SpdxNoAssertion,
        )
    except ImportError as e:
        raise SbomUnavailable(
            f"the sbom command needs spdx-tools ({e}): pip install 'tirx-kernels-core[sbom]'"
        ) from None
    doc_id = "SPDXRef-DOCUMENT"
    info = CreationInfo(
        "SPDX-2.3",
        doc_id,
        "tirx-kernels distributions",
        f"https://spdx.org/spdxdocs/tirx-kernels-{uuid.uuid4()}",
        [Actor(ActorType.TOOL, f"tirx-license-{tool_version}")],
        (created or datetime.now(timezone.utc)).replace(microsecond=0, tzinfo=None),
    )
    packages, files, relationships = [], [], []
    upstream_ids: dict[tuple[str, str], str] = {}

    def upstream_package(up, commit: str) -> str:
        key = (up.url, commit)
        if key not in upstream_ids:
            pid = _spdx_id("Upstream", up.slug, commit[:12])
            refs = []
            if m := _GITHUB.match(up.url):
                refs.append(
                    ExternalPackageRef(
                        ExternalPackageRefCategory.PACKAGE_MANAGER,
                        "purl",
                        f"pkg:github/{m.group(1)}/{m.group(2)}@{commit}",
                    )
                )
            packages.append(
                Package(
                    pid,
                    up.project,
                    f"git+{up.url}@{commit}",
                    version=commit,
                    files_analyzed=False,
                    homepage=up.url,
                    license_declared=parse(up.spdx),
                    license_concluded=SpdxNoAssertion(),
                    copyright_text=up.copyright,
                    external_references=refs,
                    comment=f"upstream project ported from, pinned commit {commit}",
                )
            )
            upstream_ids[key] = pid
        return upstream_ids[key]

    for dist in dists:
        pid = _spdx_id("Package", dist.name)
        version = dist.version or "NOASSERTION"
        ported = []
        for f in _files(dist, repo, every):
            rule = rule_for(dist, f.rel_to_package)
            expr, commit, copyrights = _header_facts(f.data.decode("utf-8", "replace"))
            if rule.kind == "native" or rule.upstream is None or commit is None:
                continue  # file-level entries are for ported files
            # the digest keeps ids unique where sanitizing merges names (_norm.py, norm.py)
            fid = _spdx_id("File", dist.name, f.name, hashlib.sha1(f.name.encode()).hexdigest()[:8])
            try:
                in_file = [parse(expr)] if expr else [SpdxNoAssertion()]
            except ValueError:
                in_file = [SpdxNoAssertion()]
            ported.append(
                File(
                    f"./{f.name}",
                    fid,
                    [
                        Checksum(ChecksumAlgorithm.SHA1, hashlib.sha1(f.data).hexdigest()),
                        Checksum(ChecksumAlgorithm.SHA256, hashlib.sha256(f.data).hexdigest()),
                    ],
                    file_types=[FileType.SOURCE],
                    license_concluded=parse(rule.spdx),
                    license_info_in_file=in_file,
                    copyright_text="\n".join(copyrights) or SpdxNoAssertion(),
                    comment=f"TIRx port of code from {rule.upstream.project} ({rule.upstream.url} "
                    f"@ {commit})",
                )
            )
            relationships.append(Relationship(pid, RelationshipType.CONTAINS, fid))
            relationships.append(
                Relationship(
                    fid, RelationshipType.DESCENDANT_OF, upstream_package(rule.upstream, commit)
                )
            )
        files += ported
        # files_analyzed: SPDX allows file entries only then; only ported files are listed.
        packages.append(
            Package(
                pid,
                dist.name,
                SpdxNoAssertion(),
                version=dist.version,
                files_analyzed=bool(ported),
                license_declared=parse(
                    dist.loaded_policy.expression
                    if dist.kind != "other"
                    else expected_expression(dist, every)
                ),
                license_concluded=parse(expected_expression(dist, every)),
                copyright_text=f"Copyright {dist.loaded_policy.copyright_holder}",
                external_references=[
                    ExternalPackageRef(
                        ExternalPackageRefCategory.PACKAGE_MANAGER,
                        "purl",
                        f"pkg:pypi/{dist.name}@{version}",
                    )
                ],
                comment=f"read from: {dist.source(repo)}"
                + ("; files lists only the ported files" if ported else ""),
            )
        )
        relationships.append(Relationship(doc_id, RelationshipType.DESCRIBES, pid))
        up = dist.loaded_policy.upstream
        if up is not None and up.commit:
            relationships.append(
                Relationship(
                    pid,
                    RelationshipType.DESCENDANT_OF,
                    upstream_package(up, up.commit),
                    f"{dist.name} holds TIRx ports of {up.project} at {up.commit}",
                )
            )
    return Document(info, packages=packages, files=files, relationships=relationships)


def validation_errors(document) -> list[str]:
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    return [m.validation_message for m in validate_full_spdx_document(document)]


def to_json(document) -> str:
    """The document as SPDX 2.3 JSON (spdx-tools validates it on the way)."""
    from spdx_tools.spdx.writer.json.json_writer import write_document_to_stream

    stream = io.StringIO()
    write_document_to_stream(document, stream, validate=True)
    return stream.getvalue()
