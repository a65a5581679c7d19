# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The source-tree audit: per-distribution rules plus the repository root's LICENSE and NOTICE.

Every rule reads only a distribution's ``LicensePolicy``; nothing here knows a family.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from ..family import Upstream
from .discover import Distribution, Repo, normalize, read_pyproject, walk
from .findings import Finding
from .headers import FileRule, check_python
from .spdx import FINGERPRINTS, NATIVE_SPDX, invalid, join, terms

ROOT_LICENSE, ROOT_NOTICE = "LICENSE", "NOTICE"
APACHE_END = "END OF TERMS AND CONDITIONS"


def rule_for(dist: Distribution, rel_to_package: str | None) -> FileRule:
    """The header rule of a file (path relative to the package dir; None: outside it)."""
    policy = dist.policy
    label = dist.family or dist.name
    holder = policy.copyright_holder
    if rel_to_package is None:  # tests, tools: native, or a complete port header
        if policy.native:
            return FileRule("native", why=f"{label}: native distribution", holder=holder)
        return FileRule("either", join(NATIVE_SPDX, policy.upstream.spdx), policy.upstream,
                        why=f"{label}: file outside the package", holder=holder)
    override = policy.overrides.get(rel_to_package)
    if override is not None:
        return FileRule("port", override.spdx, override.upstream or policy.upstream,
                        override.required_text, why=f"{label}: override {rel_to_package}",
                        holder=holder)
    if policy.native:
        return FileRule("native", why=f"{label}: native family", holder=holder)
    if any(fnmatch.fnmatchcase(rel_to_package, pat) for pat in policy.native_files):
        return FileRule("native", why=f"{label}: listed in native_files", holder=holder)
    return FileRule("port", join(NATIVE_SPDX, policy.upstream.spdx), policy.upstream,
                    why=f"{label}: port of {policy.upstream.project}", holder=holder)


def upstreams(dist: Distribution) -> list[Upstream]:
    ups = [dist.policy.upstream] if dist.policy.upstream else []
    for o in dist.policy.overrides.values():
        if o.upstream is not None and o.upstream not in ups:
            ups.append(o.upstream)
    return ups


def required_files(dist: Distribution) -> list[str]:
    """Files the distribution ships: policy license files plus its upstreams' texts."""
    out = list(dist.policy.license_files)
    for up in upstreams(dist):
        out += [t for t in up.texts if t not in out]
    return out


def expected_expression(dist: Distribution, dists: list[Distribution] = ()) -> str:
    """The union of the terms of every file the distribution can hold and every upstream."""
    exprs = [NATIVE_SPDX] + [up.spdx for up in upstreams(dist)]
    exprs += [o.spdx for o in dist.policy.overrides.values()]
    if dist.kind == "other":  # a meta-distribution: the union of what it installs
        by_name = {d.name: d for d in dists}
        exprs += [expected_expression(by_name[n], dists) for n in dist.dependencies
                  if n in by_name and by_name[n].kind != "other"]
    return join(*exprs)


def own_python_files(dist: Distribution, repo: Repo, dists: list[Distribution]) -> list[str]:
    """The repo's .py files under the distribution root and under no deeper root."""
    deeper = [d.root for d in dists if d.root and dist.root and d.root != dist.root
              and dist.root in d.root.parents]
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


def audit_distribution(dist: Distribution, repo: Repo,
                       dists: list[Distribution] | None = None) -> list[Finding]:
    dists = dists if dists is not None else [dist]
    out: list[Finding] = []
    if dist.root is None:
        return [Finding("no-source", dist.name, "no source tree found for this distribution "
                        "(installed, not editable); audit its wheel with --wheel")]
    where = _rel(dist.plugin_file, repo) if dist.plugin_file else _rel(dist.root, repo)
    out += _check_policy(dist, where)
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


def _check_policy(dist: Distribution, where: str) -> list[Finding]:
    out = []
    policy = dist.policy
    for label, expr in [("expression", policy.expression)] + \
            [(f"upstream {up.project}", up.spdx) for up in upstreams(dist)] + \
            [(f"override {rel}", o.spdx) for rel, o in policy.overrides.items()]:
        why = invalid(expr)
        if why:
            out.append(Finding("policy-expression", where, f"the policy's {label} is not a "
                               f"valid SPDX expression: {why}", "an SPDX expression", expr))
    holder = policy.copyright_holder
    if not isinstance(holder, str) or not holder.strip() or holder != holder.strip() \
            or "\n" in holder or holder.lower().startswith("copyright"):
        out.append(Finding("policy", where, "copyright_holder names who owns the family's "
                           "code, one line, without the word Copyright", "Acme Corp",
                           repr(holder)))
    for up in upstreams(dist):
        if not up.url.startswith("https://"):
            out.append(Finding("policy", where, f"upstream {up.project}: the canonical URL is "
                               "an https URL", "https://...", up.url))
        for c in (up.commit, *up.other_commits):
            if c and (len(c) != 40 or any(ch not in "0123456789abcdef" for ch in c)):
                out.append(Finding("policy", where, f"upstream {up.project}: pinned commits "
                                   "are full 40-hex", "40 lower-case hex digits", c))
        if not up.copyright.strip():
            out.append(Finding("policy", where, f"upstream {up.project}: no copyright notice"))
    if dist.package_dir is not None:
        for rel, o in policy.overrides.items():
            if not (dist.package_dir / rel).is_file():
                out.append(Finding("policy-path", where, "override names a missing file",
                                   "an existing file", rel))
            if o.upstream is None and policy.upstream is None:
                out.append(Finding("policy", where, f"override {rel} in a native family must "
                                   "name its upstream"))
            if not terms(o.spdx) >= {NATIVE_SPDX}:
                out.append(Finding("policy", where, f"override {rel} drops the TIRx terms",
                                   join(NATIVE_SPDX, o.spdx), o.spdx))
        for pat in policy.native_files:
            if not any(fnmatch.fnmatchcase(p.relative_to(dist.package_dir).as_posix(), pat)
                       for p in dist.package_dir.rglob("*.py")):
                out.append(Finding("policy-path", where, "native_files entry matches no file",
                                   "an existing file", pat))
    if dist.kind != "other" and not invalid(policy.expression):
        want = expected_expression(dist)
        if terms(policy.expression) != terms(want):
            out.append(Finding("policy-expression", where, "the policy's expression is not the "
                               "union of its files' and upstreams' terms", want,
                               policy.expression))
    return out


def _check_pyproject(dist: Distribution, repo: Repo, dists: list[Distribution]):
    out: list[Finding] = []
    where = _rel(dist.root / "pyproject.toml", repo)
    try:
        project = read_pyproject(dist.root).get("project", {})
    except (OSError, ValueError) as e:
        return [Finding("pyproject", where, "cannot read pyproject.toml", "", str(e))]
    want = expected_expression(dist, dists)
    lic = project.get("license")
    if "license" in project.get("dynamic", []) or not isinstance(lic, str):
        out.append(Finding("pyproject-license", where, "'license' must be a static PEP 639 "
                           "SPDX expression string", want, repr(lic)))
    else:
        why = invalid(lic)
        if why:
            out.append(Finding("pyproject-license", where, "invalid SPDX expression", want, why))
        elif terms(lic) != terms(want):
            missing, extra = terms(want) - terms(lic), terms(lic) - terms(want)
            out.append(Finding("pyproject-license", where, "'license' must be the union of the "
                               "distribution's terms" + (f"; misses {', '.join(sorted(missing))}"
                                                         if missing else "")
                               + (f"; extra {', '.join(sorted(extra))}" if extra else ""),
                               want, lic))
    patterns = project.get("license-files")
    required = required_files(dist)
    if not isinstance(patterns, list):
        out.append(Finding("pyproject-license-files", where, "'license-files' must list the "
                           "license and notice files (PEP 639)", repr(required), repr(patterns)))
        patterns = []
    matched: set[str] = set()
    for pat in patterns:
        hits = {p.relative_to(dist.root).as_posix() for p in dist.root.glob(pat) if p.is_file()}
        if not hits:
            out.append(Finding("pyproject-license-files", where, "a license-files pattern "
                               "matches no file", "an existing file", pat))
        matched |= hits
    for rel in required:
        path = dist.root / rel
        shown = _rel(path, repo)
        if not path.is_file():
            out.append(Finding("license-file-missing", shown, "the distribution must carry "
                               "this license/notice file (a copy of the root's)", rel, "(missing)"))
            continue
        if rel not in matched and patterns is not None:
            out.append(Finding("pyproject-license-files", where, "'license-files' does not "
                               "ship a required file", rel, repr(patterns)))
    for rel in sorted(matched | {r for r in required if (dist.root / r).is_file()}):
        root_copy = repo.root / rel
        if dist.root == repo.root:
            continue
        if not root_copy.is_file():
            out.append(Finding("root-file-missing", rel, "the repository root must hold the "
                               "master copy of every shipped license file", rel, "(missing)"))
        elif root_copy.read_bytes() != (dist.root / rel).read_bytes():
            out.append(Finding("license-file-differs", _rel(dist.root / rel, repo),
                               "package copy differs from the root copy (must be byte-identical)",
                               rel, "different bytes"))
    texts = {rel: (dist.root / rel).read_text(errors="replace")
             for rel in matched | set(required) if (dist.root / rel).is_file()}
    out += check_texts(terms(want), texts, where)
    return out


def check_texts(expr_terms, texts: dict[str, str], where: str) -> list[Finding]:
    """Each term with a known fingerprint has its license text among ``texts``."""
    out = []
    for term in sorted(expr_terms):
        marks = FINGERPRINTS.get(term)
        if marks and not any(all(m in t for m in marks) for t in texts.values()):
            out.append(Finding("license-text-missing", where, f"no shipped file holds the "
                               f"{term} license text", " + ".join(marks), ", ".join(sorted(texts))))
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
    if first != "Apache License" or not all(m in head for m in FINGERPRINTS["Apache-2.0"]) \
            or APACHE_END not in text:
        out.append(Finding("root-license", ROOT_LICENSE, "LICENSE starts with the full "
                           "Apache-2.0 text", "Apache License, Version 2.0 ... " + APACHE_END,
                           head.strip().split("\n", 1)[0]))
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
            out.append(Finding("root-license-map", ROOT_LICENSE, f"the component map has no "
                               f"entry for {dist.name}", f"{dist.name}: {want}", "(no entry)"))
        else:
            missing = [t for t in terms(want) if t not in entry]
            missing += [u.url for u in upstreams(dist) if u.url not in entry]
            if missing:
                out.append(Finding("root-license-map", ROOT_LICENSE, f"the map entry of "
                                   f"{dist.name} misses {', '.join(missing)}", want,
                                   normalize_entry(entry)))
        for rel, o in dist.policy.overrides.items():
            path = f"{dist.package_path}/{rel}"
            entry = _entry(paragraphs, path)
            if entry is None or not all(t in entry for t in terms(o.spdx)):
                out.append(Finding("root-license-map", ROOT_LICENSE, f"the map must list the "
                                   f"override {path} with its terms", f"{path}: {o.spdx}",
                                   normalize_entry(entry) if entry else "(no entry)"))
        for up in upstreams(dist):
            if notice is not None and up.project not in notice:
                out.append(Finding("root-notice", ROOT_NOTICE, f"NOTICE must carry the "
                                   f"{up.project} attribution ({dist.name})", up.project,
                                   "(not mentioned)"))
            texts = {}
            for rel in up.texts:
                path = repo.root / rel
                if path.is_file():
                    texts[rel] = path.read_text(errors="replace")
                else:
                    out.append(Finding("root-file-missing", rel, f"verbatim {up.project} "
                                       "license text missing", rel, "(missing)"))
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


def audit(dists: list[Distribution], repo: Repo,
          every: list[Distribution] | None = None) -> list[Finding]:
    """Audit ``dists``; ``every`` is all known distributions (nesting, meta unions)."""
    every = every if every is not None else dists
    out: list[Finding] = []
    for dist in dists:
        out += audit_distribution(dist, repo, every)
    out += audit_root([d for d in dists if d.root is not None], repo)
    return out


__all__ = ["audit", "audit_distribution", "audit_root", "expected_expression",
           "required_files", "rule_for", "normalize"]
