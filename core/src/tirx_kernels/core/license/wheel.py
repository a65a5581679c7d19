# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The wheel audit: METADATA License-Expression / License-File and the files a wheel ships."""

from __future__ import annotations

import zipfile
from email.parser import HeaderParser
from pathlib import Path

from .audit import expected_expression, required_files, rule_for
from .discover import Distribution, Repo, normalize
from .findings import Finding
from .headers import check_python
from .spdx import terms


def audit_wheel(path: Path, dists: list[Distribution], repo: Repo | None) -> list[Finding]:
    path = Path(path)
    name = path.name
    out: list[Finding] = []

    def add(rule, member, message, expected="", found=""):
        out.append(Finding(rule, f"{name}!{member}" if member else name, message, expected,
                           found))

    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        add("wheel", "", "cannot open the wheel", "a zip file", str(e))
        return out
    with zf:
        members = set(zf.namelist())
        infos = sorted({m.split("/", 1)[0] for m in members
                        if m.split("/", 1)[0].endswith(".dist-info")})
        if len(infos) != 1 or f"{infos[0]}/METADATA" not in members:
            add("wheel", "", "a wheel has exactly one .dist-info with METADATA", "1",
                ", ".join(infos) or "none")
            return out
        info = infos[0]
        meta = HeaderParser().parsestr(zf.read(f"{info}/METADATA").decode("utf-8", "replace"))
        dist_name = normalize(meta.get("Name", ""))
        dist = next((d for d in dists if d.name == dist_name), None)
        version = meta.get("Metadata-Version", "0")
        if tuple(int(x) for x in version.split(".") if x.isdigit()) < (2, 4):
            add("wheel-metadata", f"{info}/METADATA", "PEP 639 metadata needs "
                "Metadata-Version 2.4 or later", ">= 2.4", version)
        expr = meta.get("License-Expression")
        if not expr:
            add("wheel-metadata", f"{info}/METADATA", "METADATA has no License-Expression",
                expected_expression(dist, dists) if dist else "an SPDX expression", "(missing)")
        elif dist is not None and terms(expr) != terms(expected_expression(dist, dists)):
            add("wheel-license-expression", f"{info}/METADATA", "License-Expression is not the "
                "distribution's terms", expected_expression(dist, dists), expr)
        listed = meta.get_all("License-File") or []
        for rel in listed:
            if f"{info}/licenses/{rel}" not in members:
                add("wheel-license-file", f"{info}/licenses/{rel}", "METADATA lists a "
                    "License-File the wheel does not ship", rel, "(missing)")
        required = required_files(dist) if dist else ["LICENSE"]
        for rel in required:
            if rel not in listed:
                add("wheel-license-file", f"{info}/METADATA", "a required license/notice file "
                    "is not a License-File", rel, ", ".join(listed) or "(none)")
            elif f"{info}/licenses/{rel}" in members and repo is not None:
                root_copy = repo.root / rel
                if root_copy.is_file() and root_copy.read_bytes() != zf.read(
                        f"{info}/licenses/{rel}"):
                    add("wheel-file-differs", f"{info}/licenses/{rel}", "shipped license file "
                        "differs from the repository root copy", rel, "different bytes")
        texts = {rel: zf.read(f"{info}/licenses/{rel}").decode("utf-8", "replace")
                 for rel in listed if f"{info}/licenses/{rel}" in members}
        from .audit import check_texts

        for f in check_texts(terms(expr or ""), texts, ""):
            add(f.rule, f"{info}/licenses", f.message, f.expected, f.found)
        if dist is not None and dist.package_path:
            prefix = dist.package_path + "/"
            for member in sorted(m for m in members if m.startswith(prefix) and
                                 m.endswith(".py")):
                text = zf.read(member).decode("utf-8", "replace")
                out += check_python(text, rule_for(dist, member[len(prefix):]),
                                    f"{name}!{member}")
        elif dist is None:
            add("wheel-unknown", "", "no known distribution of this name: only METADATA "
                "consistency was checked", "a discovered distribution", dist_name)
    return out
