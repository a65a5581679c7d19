# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The audit: source trees (per-distribution rules plus their repository root's LICENSE and
NOTICE), installed distributions (:mod:`.installed`) and broken families.

Every rule reads only a distribution's ``LicensePolicy``; nothing here knows a family. The
root-file rules (component map, NOTICE, master copies) belong to a repository that holds
distributions in sub-folders, such as this one; a repository that is itself one
distribution (a third-party family's) has no root files beyond that distribution's own.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .discover import Distribution, Repo, normalize, read_pyproject, walk
from .findings import Finding
from .headers import check_python
from .installed import audit_installed
from .policy import (
    check_policy,
    check_texts,
    expected_expression,
    required_files,
    rule_for,
    upstreams,
)
from .spdx import FINGERPRINTS, invalid, terms

ROOT_LICENSE, ROOT_NOTICE = "LICENSE", "NOTICE"
APACHE_END = "END OF TERMS AND CONDITIONS"


def own_python_files(dist: Distribution, repo: Repo, dists: list[Distribution]) -> list[str]:
    """The repo's .py files under the distribution root and under no deeper root."""
    assert dist.root is not None  # a source tree
    deeper = [
        d.root
        for d in dists
        if d.root and dist.root and d.root != dist.root and dist.root in d.root.parents
    ]
    out = []
    if repo.root != dist.root and repo.root not in dist.root.parents:  # installed elsewhere
        listed = [str(dist.root / f) for f in walk(dist.root)]
    else:
        listed = repo.under(dist.root)
    for rel in listed:
        path = repo.root / rel
        if rel.endswith(".py") and not any(r in path.parents for r in deeper):
            out.append(rel)
    return out


def audit_distribution(
    dist: Distribution, repo: Repo, dists: list[Distribution] | None = None
) -> list[Finding]:
    dists = dists if dists is not None else [dist]
    out: list[Finding] = []
    if dist.kind == "broken":
        return [
            Finding(
                "family-broken",
                dist.name,
                f"family {dist.family!r} failed to load, "
                "so its license policy cannot be read; fix the plugin "
                "(tirx-license list shows it)",
                "",
                dist.error or "",
            )
        ]
    if dist.root is None and dist.installed is not None:
        return audit_installed(dist, dists)
    if dist.root is None:
        return [
            Finding(
                "no-source",
                dist.name,
                "neither a source tree nor installed "
                "metadata found for this distribution; audit its wheel with --wheel",
            )
        ]
    where = _rel(dist.plugin_file, repo) if dist.plugin_file else _rel(dist.root, repo)
    out += check_policy(dist, where)
    for rel in own_python_files(dist, repo, dists):
        path = repo.root / rel
        inside = None
        if dist.package_dir is not None and dist.package_dir in path.resolve().parents:
            inside = path.resolve().relative_to(dist.package_dir).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            out.append(Finding("unreadable", rel, "cannot read the file", "", str(e)))
            continue
        out += check_python(text, rule_for(dist, inside), rel)
    out += _check_pyproject(dist, repo, dists)
    return out


def _rel(path: Path, repo: Repo) -> str:
    try:
        return Path(path).resolve().relative_to(repo.root).as_posix()
    except ValueError:
        return str(path)


def _check_pyproject(dist: Distribution, repo: Repo, dists: list[Distribution]):
    out: list[Finding] = []
    assert dist.root is not None  # a source tree
    where = _rel(dist.root / "pyproject.toml", repo)
    try:
        project = read_pyproject(dist.root).get("project", {})
    except (OSError, ValueError) as e:
        return [Finding("pyproject", where, "cannot read pyproject.toml", "", str(e))]
    want = expected_expression(dist, dists)
    lic = project.get("license")
    if "license" in project.get("dynamic", []) or not isinstance(lic, str):
        out.append(
            Finding(
                "pyproject-license",
                where,
                "'license' must be a static PEP 639 SPDX expression string",
                want,
                repr(lic),
            )
        )
    else:
        why = invalid(lic)
        if why:
            out.append(Finding("pyproject-license", where, "invalid SPDX expression", want, why))
        elif terms(lic) != terms(want):
            missing, extra = terms(want) - terms(lic), terms(lic) - terms(want)
            out.append(
                Finding(
                    "pyproject-license",
                    where,
                    "'license' must be the union of the "
                    "distribution's terms"
                    + (f"; misses {', '.join(sorted(missing))}" if missing else "")
                    + (f"; extra {', '.join(sorted(extra))}" if extra else ""),
                    want,
                    lic,
                )
            )
    patterns = project.get("license-files")
    required = required_files(dist)
    if not isinstance(patterns, list):
        out.append(
            Finding(
                "pyproject-license-files",
                where,
                "'license-files' must list the license and notice files (PEP 639)",
                repr(required),
                repr(patterns),
            )
        )
        patterns = []
    matched: set[str] = set()
    for pat in patterns:
        hits = {p.relative_to(dist.root).as_posix() for p in dist.root.glob(pat) if p.is_file()}
        if not hits:
            out.append(
                Finding(
                    "pyproject-license-files",
                    where,
                    "a license-files pattern matches no file",
                    "an existing file",
                    pat,
                )
            )
        matched |= hits
    for rel in required:
        path = dist.root / rel
        shown = _rel(path, repo)
        if not path.is_file():
            out.append(
                Finding(
                    "license-file-missing",
                    shown,
                    "the distribution must carry this license/notice file (a copy of the root's)",
                    rel,
                    "(missing)",
                )
            )
            continue
        if rel not in matched and patterns is not None:
            out.append(
                Finding(
                    "pyproject-license-files",
                    where,
                    "'license-files' does not ship a required file",
                    rel,
                    repr(patterns),
                )
            )
    for rel in sorted(matched | {r for r in required if (dist.root / r).is_file()}):
        root_copy = repo.root / rel
        if dist.root == repo.root:
            continue
        if not root_copy.is_file():
            out.append(
                Finding(
                    "root-file-missing",
                    rel,
                    "the repository root must hold the master copy of every shipped license file",
                    rel,
                    "(missing)",
                )
            )
        elif root_copy.read_bytes() != (dist.root / rel).read_bytes():
            out.append(
                Finding(
                    "license-file-differs",
                    _rel(dist.root / rel, repo),
                    "package copy differs from the root copy (must be byte-identical)",
                    rel,
                    "different bytes",
                )
            )
    texts = {
        rel: (dist.root / rel).read_text(errors="replace")
        for rel in matched | set(required)
        if (dist.root / rel).is_file()
    }
    out += check_texts(terms(want), texts, where)
    return out


def audit_root(dists: list[Distribution], repo: Repo) -> list[Finding]:
    """The root LICENSE (Apache-2.0 text + component map), NOTICE and upstream texts."""
    out: list[Finding] = []
    lic_path, notice_path = repo.root / ROOT_LICENSE, repo.root / ROOT_NOTICE
    if not lic_path.is_file():
        return [Finding("root-license", ROOT_LICENSE, "the repository root has no LICENSE")]
    text = lic_path.read_text(errors="replace")
    head = text[:400]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if (
        first != "Apache License"
        or not all(m in head for m in FINGERPRINTS["Apache-2.0"])
        or APACHE_END not in text
    ):
        out.append(
            Finding(
                "root-license",
                ROOT_LICENSE,
                "LICENSE starts with the full Apache-2.0 text",
                "Apache License, Version 2.0 ... " + APACHE_END,
                head.strip().split("\n", 1)[0],
            )
        )
    cut = text.rfind("limitations under the License.")
    cut = cut if cut >= 0 else text.find(APACHE_END)
    paragraphs = [p for p in _paragraphs(text[cut:] if cut >= 0 else "")]
    notice = notice_path.read_text(errors="replace") if notice_path.is_file() else None
    if notice is None:
        out.append(Finding("root-notice", ROOT_NOTICE, "the repository root has no NOTICE"))
    for dist in dists:
        if dist.kind == "other":
            continue
        want = expected_expression(dist)
        entry = _entry(paragraphs, dist.name)
        if entry is None:
            out.append(
                Finding(
                    "root-license-map",
                    ROOT_LICENSE,
                    f"the component map has no entry for {dist.name}",
                    f"{dist.name}: {want}",
                    "(no entry)",
                )
            )
        else:
            missing = [t for t in terms(want) if t not in entry]
            missing += [u.url for u in upstreams(dist) if u.url not in entry]
            if missing:
                out.append(
                    Finding(
                        "root-license-map",
                        ROOT_LICENSE,
                        f"the map entry of {dist.name} misses {', '.join(missing)}",
                        want,
                        normalize_entry(entry),
                    )
                )
        for rel, o in dist.loaded_policy.overrides.items():
            path = f"{dist.package_path}/{rel}"
            entry = _entry(paragraphs, path)
            if entry is None or not all(t in entry for t in terms(o.spdx)):
                out.append(
                    Finding(
                        "root-license-map",
                        ROOT_LICENSE,
                        f"the map must list the override {path} with its terms",
                        f"{path}: {o.spdx}",
                        normalize_entry(entry) if entry else "(no entry)",
                    )
                )
        for up in upstreams(dist):
            if notice is not None and up.project not in notice:
                out.append(
                    Finding(
                        "root-notice",
                        ROOT_NOTICE,
                        f"NOTICE must carry the {up.project} attribution ({dist.name})",
                        up.project,
                        "(not mentioned)",
                    )
                )
            texts = {}
            for rel in up.texts:
                text_path = repo.root / rel
                if text_path.is_file():
                    texts[rel] = text_path.read_text(errors="replace")
                else:
                    out.append(
                        Finding(
                            "root-file-missing",
                            rel,
                            f"verbatim {up.project} license text missing",
                            rel,
                            "(missing)",
                        )
                    )
            if texts:
                out += check_texts(terms(up.spdx), texts, ", ".join(texts))
    return out


def _paragraphs(text: str) -> list[str]:
    out, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line)
        elif cur:
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


def _entry(paragraphs: list[str], key: str) -> str | None:
    pattern = re.compile(r"(?<![\w/.-])" + re.escape(key) + r"(?![\w-])")
    for p in paragraphs:
        if pattern.search(p):
            return p
    return None


def normalize_entry(entry: str) -> str:
    return " ".join(entry.split())[:160]


def audit(
    dists: list[Distribution], repo: Repo | None, every: list[Distribution] | None = None
) -> list[Finding]:
    """Audit ``dists``; ``every`` is all known distributions (nesting, meta unions).

    Each source tree is checked against its home repository (``Distribution.home``, else
    ``repo``); findings outside ``repo`` carry absolute paths.
    """
    every = every if every is not None else dists
    out: list[Finding] = []
    homes: dict[Path, tuple[Repo, list[Distribution]]] = {}
    for dist in dists:
        home = repo if _inside(dist, repo) else (dist.home or repo)
        if dist.root is None or home is None or dist.kind == "broken":
            out += audit_distribution(dist, repo or Repo(Path("/"), [], False), every)
            continue
        found = audit_distribution(dist, home, every)
        out += found if home is repo else [_absolute(f, home) for f in found]
        homes.setdefault(home.root, (home, []))[1].append(dist)
    for home, group in homes.values():
        nested = [d for d in group if d.root != home.root and d.kind != "broken"]
        if nested:  # a repository of several distributions: its root files are the masters
            found = audit_root(nested, home)
            out += found if home is repo else [_absolute(f, home) for f in found]
    return out


def _inside(dist: Distribution, repo: Repo | None) -> bool:
    return (
        repo is not None
        and dist.root is not None
        and (dist.root == repo.root or repo.root in dist.root.parents)
    )


def _absolute(finding: Finding, home: Repo) -> Finding:
    if Path(finding.path).is_absolute():
        return finding
    return dataclasses.replace(finding, path=str(home.root / finding.path))


__all__ = [
    "audit",
    "audit_distribution",
    "audit_root",
    "check_texts",
    "expected_expression",
    "required_files",
    "rule_for",
    "normalize",
]
