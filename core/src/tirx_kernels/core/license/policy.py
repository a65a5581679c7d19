# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What a distribution's ``LicensePolicy`` requires, whatever the audit reads it from (source
tree, installed distribution or wheel): each file's header rule, the expression, the license
files and texts, and the policy's own consistency."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from ..family import Upstream
from .discover import Distribution
from .findings import Finding
from .headers import FileRule
from .spdx import FINGERPRINTS, NATIVE_SPDX, invalid, join, terms


def rule_for(dist: Distribution, rel_to_package: str | None) -> FileRule:
    """The header rule of a file (path relative to the package dir; None: outside it)."""
    policy = dist.loaded_policy
    label = dist.family or dist.name
    holder = policy.copyright_holder
    if rel_to_package is None:  # tests, tools: native, or a complete port header
        if policy.native:
            return FileRule("native", why=f"{label}: native distribution", holder=holder)
        return _ported("either", dist, why=f"{label}: file outside the package")
    override = policy.overrides.get(rel_to_package)
    if override is not None:
        return FileRule(
            "port",
            override.spdx,
            override.upstream or policy.upstream,
            override.required_text,
            why=f"{label}: override {rel_to_package}",
            holder=holder,
        )
    if policy.native:
        return FileRule("native", why=f"{label}: native family", holder=holder)
    if any(fnmatch.fnmatchcase(rel_to_package, pat) for pat in policy.native_files):
        return FileRule("native", why=f"{label}: listed in native_files", holder=holder)
    assert policy.upstream is not None  # not native
    return _ported("port", dist, why=f"{label}: port of {policy.upstream.project}")


def _ported(kind: str, dist: Distribution, why: str) -> FileRule:
    """A ``kind`` rule of a ported distribution: native code joined with its upstream's."""
    policy = dist.loaded_policy
    assert policy.upstream is not None  # not native
    return FileRule(
        kind,
        join(NATIVE_SPDX, policy.upstream.spdx),
        policy.upstream,
        why=why,
        holder=policy.copyright_holder,
    )


def upstreams(dist: Distribution) -> list[Upstream]:
    policy = dist.loaded_policy
    ups = [policy.upstream] if policy.upstream else []
    for o in policy.overrides.values():
        if o.upstream is not None and o.upstream not in ups:
            ups.append(o.upstream)
    return ups


def required_files(dist: Distribution) -> list[str]:
    """Files the distribution ships: policy license files plus its upstreams' texts."""
    out = list(dist.loaded_policy.license_files)
    for up in upstreams(dist):
        out += [t for t in up.texts if t not in out]
    return out


def expected_expression(dist: Distribution, dists: Sequence[Distribution] = ()) -> str:
    """The union of the terms of every file the distribution can hold and every upstream."""
    exprs = [NATIVE_SPDX] + [up.spdx for up in upstreams(dist)]
    exprs += [o.spdx for o in dist.loaded_policy.overrides.values()]
    if dist.kind == "other":  # a meta-distribution: the union of what it installs
        by_name = {d.name: d for d in dists}
        exprs += [
            expected_expression(by_name[n], dists)
            for n in dist.dependencies
            if n in by_name and by_name[n].kind not in ("other", "broken")
        ]
    return join(*exprs)


def check_policy(dist: Distribution, where: str) -> list[Finding]:
    out = []
    policy = dist.loaded_policy
    for label, expr in (
        [("expression", policy.expression)]
        + [(f"upstream {up.project}", up.spdx) for up in upstreams(dist)]
        + [(f"override {rel}", o.spdx) for rel, o in policy.overrides.items()]
    ):
        why = invalid(expr)
        if why:
            out.append(
                Finding(
                    "policy-expression",
                    where,
                    f"the policy's {label} is not a valid SPDX expression: {why}",
                    "an SPDX expression",
                    expr,
                )
            )
    holder = policy.copyright_holder
    if (
        not isinstance(holder, str)
        or not holder.strip()
        or holder != holder.strip()
        or "\n" in holder
        or holder.lower().startswith("copyright")
    ):
        out.append(
            Finding(
                "policy",
                where,
                "copyright_holder names who owns the family's "
                "code, one line, without the word Copyright",
                "Acme Corp",
                repr(holder),
            )
        )
    for up in upstreams(dist):
        if not up.url.startswith("https://"):
            out.append(
                Finding(
                    "policy",
                    where,
                    f"upstream {up.project}: the canonical URL is an https URL",
                    "https://...",
                    up.url,
                )
            )
        for c in (up.commit, *up.other_commits):
            if c and (len(c) != 40 or any(ch not in "0123456789abcdef" for ch in c)):
                out.append(
                    Finding(
                        "policy",
                        where,
                        f"upstream {up.project}: pinned commits are full 40-hex",
                        "40 lower-case hex digits",
                        c,
                    )
                )
        if not up.copyright.strip():
            out.append(Finding("policy", where, f"upstream {up.project}: no copyright notice"))
    if dist.package_dir is not None:
        for rel, o in policy.overrides.items():
            if not (dist.package_dir / rel).is_file():
                out.append(
                    Finding(
                        "policy-path",
                        where,
                        "override names a missing file",
                        "an existing file",
                        rel,
                    )
                )
            if o.upstream is None and policy.upstream is None:
                out.append(
                    Finding(
                        "policy", where, f"override {rel} in a native family must name its upstream"
                    )
                )
            if not terms(o.spdx) >= {NATIVE_SPDX}:
                out.append(
                    Finding(
                        "policy",
                        where,
                        f"override {rel} drops the TIRx terms",
                        join(NATIVE_SPDX, o.spdx),
                        o.spdx,
                    )
                )
        for pat in policy.native_files:
            if not any(
                fnmatch.fnmatchcase(p.relative_to(dist.package_dir).as_posix(), pat)
                for p in dist.package_dir.rglob("*.py")
            ):
                out.append(
                    Finding(
                        "policy-path",
                        where,
                        "native_files entry matches no file",
                        "an existing file",
                        pat,
                    )
                )
    if dist.kind != "other" and not invalid(policy.expression):
        want = expected_expression(dist)
        if terms(policy.expression) != terms(want):
            out.append(
                Finding(
                    "policy-expression",
                    where,
                    "the policy's expression is not the union of its files' and upstreams' terms",
                    want,
                    policy.expression,
                )
            )
    return out


def check_texts(expr_terms, texts: dict[str, str], where: str) -> list[Finding]:
    """Each term with a known fingerprint has its license text among ``texts``."""
    out = []
    for term in sorted(expr_terms):
        marks = FINGERPRINTS.get(term)
        if marks and not any(all(m in t for m in marks) for t in texts.values()):
            out.append(
                Finding(
                    "license-text-missing",
                    where,
                    f"no shipped file holds the {term} license text",
                    " + ".join(marks),
                    ", ".join(sorted(texts)),
                )
            )
    return out
