# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license sbom`` (issue #28, deliverable 4): an SPDX 2.3 JSON document that
spdx-tools parses and validates, with one package per distribution, the upstream project and
pinned commit each port family descends from, and file-level licensing of ported files."""

import json
from pathlib import Path

import pytest

from tirx_kernels.core.license import cli
from tirx_kernels.core.license.discover import Repo, discover

pytest.importorskip("spdx_tools")
from spdx_tools.spdx.parser.parse_anything import parse_file  # noqa: E402
from spdx_tools.spdx.validation.document_validator import (  # noqa: E402
    validate_full_spdx_document,
)

ROOT = Path(__file__).resolve().parents[2]


def check_sbom(path: Path, dists) -> dict:
    """Validate ``path`` with spdx-tools and check it describes ``dists``; return the JSON."""
    document = parse_file(str(path))
    assert [m.validation_message for m in validate_full_spdx_document(document)] == []
    data = json.loads(path.read_text())
    assert data["spdxVersion"] == "SPDX-2.3"
    by_name = {p["name"]: p for p in data["packages"]}
    rels = {
        (r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"])
        for r in data["relationships"]
    }
    for d in dists:
        pkg = by_name[d.name]
        assert pkg["versionInfo"] == d.version
        assert pkg["licenseDeclared"] == d.policy.expression
        assert ("SPDXRef-DOCUMENT", "DESCRIBES", pkg["SPDXID"]) in rels
        assert {
            "referenceCategory": "PACKAGE_MANAGER",
            "referenceType": "purl",
            "referenceLocator": f"pkg:pypi/{d.name}@{d.version}",
        } in pkg["externalRefs"]
        up = d.policy.upstream
        if up is None:
            continue
        upstream = by_name[up.project]
        assert upstream["versionInfo"] == up.commit
        assert upstream["downloadLocation"] == f"git+{up.url}@{up.commit}"
        assert upstream["licenseDeclared"] == up.spdx
        assert (pkg["SPDXID"], "DESCENDANT_OF", upstream["SPDXID"]) in rels
        ported = [f for f in data["files"] if (pkg["SPDXID"], "CONTAINS", f["SPDXID"]) in rels]
        assert ported, d.name
        for f in ported:
            assert f["licenseConcluded"] and f["licenseInfoInFiles"]
            assert up.copyright.split(" by ")[-1] in f["copyrightText"]
            assert (f["SPDXID"], "DESCENDANT_OF", upstream["SPDXID"]) in rels
    return data


def test_sbom_of_the_checkout_is_valid_spdx(tmp_path, capsys):
    out = tmp_path / "sbom.spdx.json"
    assert cli.main(["sbom", "--root", str(ROOT), "-o", str(out)]) == 0
    repo = Repo.find(ROOT)
    dists, _ = discover(repo)
    families = [d for d in dists if d.kind in ("core", "family")]
    data = check_sbom(out, families)
    ported = {f["fileName"] for f in data["files"]}
    assert "./tirx_kernels/flashinfer/activation.py" in ported
    assert not any(name.startswith("./tirx_kernels/basic/") for name in ported)  # native


def test_sbom_needs_something_to_describe(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "discover", lambda repo, **kw: ([], []))
    assert cli.main(["sbom", "--root", str(tmp_path)]) == 2
    assert "no distribution" in capsys.readouterr().err
