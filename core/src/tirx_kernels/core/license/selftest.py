# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license audit --self-test``: the audit is not vacuous.

A synthetic repository (a port family "demo" of an MIT upstream with a BSD-3-Clause file
override, and a native family "plain") must pass clean; each broken variant must be caught
by the named rule. Wheels are synthetic zips, so the self-test needs no build backend.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..family import FileOverride, LicensePolicy, Upstream
from .audit import audit
from .discover import Distribution, Repo, walk
from .findings import Finding
from .spdx import COPYRIGHT_LINE, LICENSE_TAG, NATIVE_HEADER, PORT_PREFIX
from .wheel import audit_wheel

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CUB_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
MLA = Upstream(
    "DemoMLA",
    "https://github.com/example/DemoMLA",
    "MIT",
    "Copyright (c) 2025 Example Corp",
    COMMIT,
)
CUB = Upstream(
    "DemoCUB",
    "https://github.com/example/democub",
    "BSD-3-Clause",
    "Copyright (c) 2011, Example Corp",
    CUB_COMMIT,
)
BSD_TEXT = (
    "Redistribution and use in source and binary forms, with or without modification, are "
    "permitted provided that the following conditions are met:",
    "Neither the name of the copyright holder nor the names of its contributors may be used "
    "to endorse or promote products derived from this software without specific prior "
    "written permission.",
    'THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"',
)
DEMO_POLICY = LicensePolicy(
    expression="Apache-2.0 AND BSD-3-Clause AND MIT",
    upstream=MLA,
    overrides={"reduce.py": FileOverride("Apache-2.0 AND BSD-3-Clause", BSD_TEXT, CUB)},
    native_files=("__init__.py", "plugin.py"),
)
PLAIN_POLICY = LicensePolicy(expression="Apache-2.0")

NATIVE = "\n".join(NATIVE_HEADER) + "\n"
APACHE = (
    "                                 Apache License\n"
    "                           Version 2.0, January 2004\n\n"
    "   TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION\n\n"
    "   END OF TERMS AND CONDITIONS\n\n"
    "   limitations under the License.\n"
)
LICENSE_MAP = f"""
-------------------------------------------------------------------------------
tirx-kernels-plain (packages/plain/): Apache-2.0
    Native TIRx code.

tirx-kernels-demo (packages/demo/): Apache-2.0 AND BSD-3-Clause AND MIT
    Ports of DemoMLA, {MLA.url} (MIT), and of DemoCUB, {CUB.url}.

tirx_kernels/demo/reduce.py: Apache-2.0 AND BSD-3-Clause (from DemoCUB)
"""
NOTICE = "demo\nCopyright TIRx authors\n\nPorts of DemoMLA and DemoCUB.\n"
MIT_TEXT = (
    "MIT License\n\nCopyright (c) 2025 Example Corp\n\nPermission is hereby granted, "
    "free of charge, to any person obtaining a copy of this software.\n"
)
BSD_FILE = "Copyright (c) 2011, Example Corp\n\n" + "\n\n".join(BSD_TEXT) + "\n"


def port_header(up: Upstream, spdx: str, commit: str | None = None) -> str:
    return (
        f"{PORT_PREFIX}{up.project}\n# ({up.url} @ {commit or up.commit}), {up.copyright}\n"
        f"# {LICENSE_TAG}: {spdx}\n{COPYRIGHT_LINE}\n"
    )


GEMM = port_header(MLA, "Apache-2.0 AND MIT") + (
    '"""A demo port.\n\nUpstream source: csrc/sm90/gemm.cuh (the mainloop)."""\n\nX = 1\n'
)
REDUCE = (
    port_header(CUB, "Apache-2.0 AND BSD-3-Clause")
    + "".join(f"# {line}\n" for line in BSD_TEXT)
    + ('"""A demo BSD port.\n\nUpstream source: cub/block/block_reduce.cuh."""\n\nY = 2\n')
)


def _pyproject(name: str, expr: str, files: list[str]) -> str:
    return (
        f'[project]\nname = "{name}"\nversion = "0.1.0"\nlicense = "{expr}"\n'
        f"license-files = {json.dumps(files)}\n"
    )


def build_tree(root: Path) -> None:
    files = {
        "LICENSE": APACHE + LICENSE_MAP,
        "NOTICE": NOTICE,
        "licenses/demomla-LICENSE.txt": MIT_TEXT,
        "licenses/democub-LICENSE.txt": BSD_FILE,
        "packages/demo/pyproject.toml": _pyproject(
            "tirx-kernels-demo", DEMO_POLICY.expression, ["LICENSE", "NOTICE", "licenses/*.txt"]
        ),
        "packages/demo/src/tirx_kernels/demo/__init__.py": NATIVE,
        "packages/demo/src/tirx_kernels/demo/plugin.py": NATIVE + '"""Plugin."""\n',
        "packages/demo/src/tirx_kernels/demo/gemm.py": GEMM,
        "packages/demo/src/tirx_kernels/demo/reduce.py": REDUCE,
        "packages/demo/tests/test_gemm.py": NATIVE + "def test():\n    pass\n",
        "packages/plain/pyproject.toml": _pyproject(
            "tirx-kernels-plain", "Apache-2.0", ["LICENSE", "NOTICE"]
        ),
        "packages/plain/src/tirx_kernels/plain/__init__.py": NATIVE,
        "packages/plain/src/tirx_kernels/plain/rms.py": "#!/usr/bin/env python3\n"
        + NATIVE
        + '"""Native."""\n',
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for dist in ("demo", "plain"):
        for rel in ("LICENSE", "NOTICE"):
            shutil.copy(root / rel, root / "packages" / dist / rel)
    shutil.copytree(root / "licenses", root / "packages/demo/licenses")


def distributions(root: Path) -> list[Distribution]:
    return [
        Distribution(
            "tirx-kernels-demo",
            root / "packages/demo",
            DEMO_POLICY,
            "family",
            "demo",
            "tirx_kernels.demo",
            root / "packages/demo/src/tirx_kernels/demo",
        ),
        Distribution(
            "tirx-kernels-plain",
            root / "packages/plain",
            PLAIN_POLICY,
            "family",
            "plain",
            "tirx_kernels.plain",
            root / "packages/plain/src/tirx_kernels/plain",
        ),
    ]


def build_wheel(
    root: Path, out: Path, skip: tuple[str, ...] = (), expression: str | None = None
) -> Path:
    """A PEP 639 wheel of the demo distribution, as hatchling lays it out."""
    dist = root / "packages/demo"
    info = "tirx_kernels_demo-0.1.0.dist-info"
    lic = ["LICENSE", "NOTICE", "licenses/democub-LICENSE.txt", "licenses/demomla-LICENSE.txt"]
    meta = (
        "Metadata-Version: 2.4\nName: tirx-kernels-demo\nVersion: 0.1.0\n"
        f"License-Expression: {expression or DEMO_POLICY.expression}\n"
        + "".join(f"License-File: {f}\n" for f in lic)
    )
    wheel = out / "tirx_kernels_demo-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{info}/METADATA", meta)
        for f in lic:
            if f not in skip:
                zf.write(dist / f, f"{info}/licenses/{f}")
        for p in sorted((dist / "src").rglob("*.py")):
            zf.write(p, p.relative_to(dist / "src").as_posix())
    return wheel


def install_wheel(wheel: Path, site: Path) -> Path:
    """Unpack ``wheel`` into ``site`` with a RECORD of sha256 hashes, as pip lays it out;
    returns the .dist-info directory."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    rows = []
    for name in names:
        digest = hashlib.sha256((site / name).read_bytes()).digest()
        rows.append(
            f"{name},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},"
            f"{(site / name).stat().st_size}"
        )
    rows.append(f"{info}/RECORD,,")
    (site / info / "RECORD").write_text("\n".join(rows) + "\n")
    return site / info


# Changes the tree (or the install) under the given root; its return value is ignored.
Mutation = Callable[[Path], object]


def _edit(rel: str, old: str, new: str) -> Mutation:
    def apply(root: Path) -> None:
        path = root / rel
        text = path.read_text()
        if old not in text:
            raise AssertionError(f"self-test is stale: {old!r} not in {rel}")
        path.write_text(text.replace(old, new, 1))

    return apply


def _delete(rel: str) -> Mutation:
    return lambda root: (root / rel).unlink()


def _append(rel: str, text: str) -> Mutation:
    return lambda root: (root / rel).write_text((root / rel).read_text() + text)


def _write(rel: str, text: str) -> Mutation:
    return lambda root: (root / rel).write_text(text)


G = "packages/demo/src/tirx_kernels/demo/gemm.py"
R = "packages/demo/src/tirx_kernels/demo/reduce.py"
P = "packages/demo/src/tirx_kernels/demo/plugin.py"
T = "packages/demo/tests/test_gemm.py"


@dataclass
class Case:
    name: str
    expect: str | None  # the rule that must fire; None: must pass clean
    mutate: Mutation | None = None
    wheel: dict | None = None  # build_wheel options: audit a wheel instead of the tree
    # audit the wheel installed (unpacked with a RECORD); the function breaks the install
    installed: Mutation | None = None
    policy: LicensePolicy | None = None  # replaces the demo family's policy


CASES = [
    Case("valid repository", None),
    Case("valid wheel", None, wheel={}),
    Case(
        "valid: copyright on its own line, other years",
        None,
        _edit(
            G,
            f"{COMMIT}), Copyright (c) 2025 Example Corp",
            f"{COMMIT}),\n# Copyright (c) 2024-2026 Example Corp",
        ),
    ),
    Case("valid: a harness file may carry a full port header", None, _write(T, GEMM)),
    Case(
        "port labeled plain Apache-2.0",
        "spdx-expression",
        _edit(G, f"{LICENSE_TAG}: Apache-2.0 AND MIT", f"{LICENSE_TAG}: Apache-2.0"),
    ),
    Case("port with the native header only", "port-header", _write(G, NATIVE + "X = 1\n")),
    Case("wrong upstream URL", "port-url", _edit(G, MLA.url, "https://github.com/fork/DemoMLA")),
    Case("missing upstream URL", "port-url", _edit(G, f"{MLA.url} @ ", "")),
    Case("wrong upstream project", "port-project", _edit(G, "code from DemoMLA", "code from X")),
    Case("short commit", "port-commit", _edit(G, COMMIT, COMMIT[:12])),
    Case("commit the policy does not pin", "port-commit", _edit(G, COMMIT, "f" * 40)),
    Case(
        "missing upstream copyright",
        "port-copyright",
        _edit(G, "), Copyright (c) 2025 Example Corp", "), "),
    ),
    Case(
        "wrong upstream copyright",
        "port-copyright",
        _edit(G, "Copyright (c) 2025 Example Corp", "Copyright (c) 2025 Someone Else"),
    ),
    Case(
        "missing source path",
        "port-source-path",
        _edit(G, "Upstream source: csrc/sm90/gemm.cuh (the mainloop).", "From upstream."),
    ),
    Case("BSD override without its text", "required-text", _edit(R, f"# {BSD_TEXT[1]}\n", "")),
    Case(
        "BSD override labeled with the family's terms",
        "spdx-expression",
        _edit(R, "Apache-2.0 AND BSD-3-Clause", "Apache-2.0 AND MIT"),
    ),
    Case("two SPDX lines", "spdx-count", _append(G, f"# {LICENSE_TAG}: MIT\n")),
    Case("SPDX tag in a string", "spdx-count", _append(P, f'S = "{LICENSE_TAG}: MIT"\n')),
    Case(
        "native file with an extra line",
        "native-header",
        _edit(P, COPYRIGHT_LINE, COPYRIGHT_LINE + "\n# Copyright (c) 2025 Example Corp"),
    ),
    Case(
        "native file without the TIRx copyright",
        "tirx-copyright",
        _edit(P, COPYRIGHT_LINE + "\n", ""),
    ),
    Case(
        "native file with a port header",
        "native-header",
        _write("packages/plain/src/tirx_kernels/plain/rms.py", GEMM),
    ),
    Case("file with no header", "spdx-count", _write(P, '"""Plugin."""\n')),
    Case(
        "family declares another copyright holder than its files carry",
        "tirx-copyright",
        policy=replace(DEMO_POLICY, copyright_holder="Example Corp"),
    ),
    Case(
        "valid: the same terms in another order",
        None,
        lambda root: (
            _edit(G, f"{LICENSE_TAG}: Apache-2.0 AND MIT", f"{LICENSE_TAG}: MIT AND Apache-2.0")(
                root
            ),
            _edit(
                "packages/demo/pyproject.toml",
                "Apache-2.0 AND BSD-3-Clause AND MIT",
                "MIT AND (BSD-3-Clause AND Apache-2.0)",
            )(root),
        ),
    ),
    Case(
        "pyproject expression with an unknown identifier (Apache2)",
        "pyproject-license",
        _edit("packages/plain/pyproject.toml", '"Apache-2.0"', '"Apache2"'),
    ),
    Case(
        "header expression with broken syntax (MIT-0 AND)",
        "spdx-expression",
        _edit(G, f"{LICENSE_TAG}: Apache-2.0 AND MIT", f"{LICENSE_TAG}: MIT-0 AND"),
    ),
    Case(
        "policy expression misspelled (Apache2 AND MIT)",
        "policy-expression",
        policy=LicensePolicy(
            "Apache2 AND BSD-3-Clause AND MIT", MLA, DEMO_POLICY.overrides, DEMO_POLICY.native_files
        ),
    ),
    Case(
        "wheel License-Expression with broken syntax",
        "wheel-license-expression",
        wheel={"expression": "Apache-2.0 AND BSD-3-Clause AND MIT-0 AND"},
    ),
    Case(
        "pyproject expression misses a term",
        "pyproject-license",
        _edit(
            "packages/demo/pyproject.toml",
            "Apache-2.0 AND BSD-3-Clause AND MIT",
            "Apache-2.0 AND MIT",
        ),
    ),
    Case(
        "pyproject expression with an extra term",
        "pyproject-license",
        _edit("packages/plain/pyproject.toml", '"Apache-2.0"', '"Apache-2.0 AND MIT"'),
    ),
    Case(
        "policy expression misses a term",
        "policy-expression",
        policy=LicensePolicy(
            "Apache-2.0 AND MIT", MLA, DEMO_POLICY.overrides, DEMO_POLICY.native_files
        ),
    ),
    Case(
        "license-files misses the upstream text",
        "pyproject-license-files",
        _edit("packages/demo/pyproject.toml", ', "licenses/*.txt"', ""),
    ),
    Case(
        "package copy of LICENSE differs",
        "license-file-differs",
        _append("packages/plain/LICENSE", "\n"),
    ),
    Case("package NOTICE missing", "license-file-missing", _delete("packages/plain/NOTICE")),
    Case(
        "upstream text missing at the root",
        "root-file-missing",
        _delete("licenses/democub-LICENSE.txt"),
    ),
    Case(
        "root LICENSE map misses a family",
        "root-license-map",
        _edit("LICENSE", "tirx-kernels-plain (packages/plain/): Apache-2.0\n", ""),
    ),
    Case(
        "root LICENSE map misses an override",
        "root-license-map",
        _edit("LICENSE", "tirx_kernels/demo/reduce.py", "tirx_kernels/demo/other.py"),
    ),
    Case("root NOTICE misses an upstream", "root-notice", _edit("NOTICE", "DemoCUB", "X")),
    Case("override names a missing file", "policy-path", _delete(R)),
    Case(
        "wheel missing a license file",
        "wheel-license-file",
        wheel={"skip": ("licenses/democub-LICENSE.txt",)},
    ),
    Case(
        "wheel with a wrong License-Expression",
        "wheel-license-expression",
        wheel={"expression": "Apache-2.0 AND MIT"},
    ),
    Case("valid installed distribution", None, installed=lambda info: None),
    Case(
        "installed license file edited after install",
        "license-file-differs",
        installed=lambda info: (info / "licenses/NOTICE").write_text("edited\n"),
    ),
    Case(
        "installed METADATA with another License-Expression",
        "metadata-license-expression",
        installed=lambda info: _edit(
            "METADATA",
            "License-Expression: Apache-2.0 AND BSD-3-Clause AND MIT",
            "License-Expression: MIT",
        )(info),
    ),
    Case(
        "installed port file loses its URL",
        "port-url",
        installed=lambda info: _edit("../tirx_kernels/demo/gemm.py", MLA.url + " @ ", "")(info),
    ),
    Case(
        "wheel shipping a broken port",
        "port-url",
        _edit(G, MLA.url, "https://example.com/DemoMLA"),
        wheel={},
    ),
]


def run_case(case: Case, work: Path) -> list[Finding]:
    root = work / "repo"
    build_tree(root)
    if case.mutate:
        case.mutate(root)
    dists = distributions(root)
    if case.policy is not None:
        dists[0].policy = case.policy
    repo = Repo(root, walk(root), False)
    if case.installed is not None:
        out = work / "wheels"
        out.mkdir()
        info = install_wheel(build_wheel(root, out), work / "site")
        case.installed(info)
        demo = replace(
            dists[0],
            root=None,
            home=None,
            package_dir=work / "site/tirx_kernels/demo",
            installed=importlib.metadata.PathDistribution(info),
        )
        return audit([demo], None, [demo])
    if case.wheel is not None:
        out = work / "wheels"
        out.mkdir()
        return audit_wheel(build_wheel(root, out, **case.wheel), dists, repo)
    return audit(dists, repo)


def run_self_test(as_json: bool = False) -> int:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tirx-license-selftest-") as tmp:
        for i, case in enumerate(CASES):
            work = Path(tmp) / str(i)
            work.mkdir()
            findings = run_case(case, work)
            rules = sorted({f.rule for f in findings})
            ok = (not findings) if case.expect is None else case.expect in rules
            results.append(
                {
                    "case": case.name,
                    "expect": case.expect or "clean",
                    "ok": ok,
                    "found": rules,
                    "findings": [str(f) for f in findings],
                }
            )
    failed = [r for r in results if not r["ok"]]
    if as_json:
        print(json.dumps({"ok": not failed, "cases": results}, indent=2))
    else:
        for r in results:
            mark = "ok  " if r["ok"] else "FAIL"
            print(f"{mark} {r['case']}: expect {r['expect']}; found {', '.join(r['found']) or '-'}")
            if not r["ok"]:
                for f in r["findings"]:
                    print("      " + f.replace("\n", "\n      "))
        print(f"tirx-license self-test: {len(results) - len(failed)}/{len(results)} cases ok")
    return 1 if failed else 0
