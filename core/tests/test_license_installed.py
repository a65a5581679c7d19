# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license`` on what pip installed (issue #28): the wheels of core, basic, flashinfer
and a third-party family (acme, ``Copyright Acme Corp``) installed into a fresh venv,
audited from an empty folder and from this checkout; faults planted in installed files are
caught, and no path prints a traceback."""

import json
import shutil
from pathlib import Path

import pytest
from license_helpers import ROOT, build_wheel, make_venv, run_cli, write_acme

pytest.importorskip("hatchling")

FAMILIES = ("core", "packages/tirx-kernels-basic", "packages/tirx-kernels-flashinfer")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("installed")
    acme = write_acme(work / "acme")
    wheels = [build_wheel(ROOT / rel, work / "wheels") for rel in FAMILIES]
    wheels.append(build_wheel(acme, work / "wheels"))
    venv = make_venv(work / "venv", wheels)
    [site] = (venv / "lib").glob("python*/site-packages")
    empty = work / "empty"
    empty.mkdir()
    return venv, site, empty


def _report(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_audit_from_an_empty_folder_audits_every_installed_family(installed):
    venv, site, empty = installed
    proc = run_cli(venv, ["audit", "--json"], empty)
    report = _report(proc)
    assert proc.returncode == 0, [f["message"] for f in report["findings"]]
    assert report["checkout"] is None
    got = {d["name"]: d["source"] for d in report["distributions"]}
    assert got == {
        name: f"installed {site}"
        for name in (
            "tirx-kernels-core",
            "tirx-kernels-basic",
            "tirx-kernels-flashinfer",
            "tirx-kernels-acme",
        )
    }
    assert all(d["python_files"] > 0 for d in report["distributions"])
    assert "installed " + str(site) in run_cli(venv, ["audit"], empty).stdout  # says which


def test_package_and_list_work_without_a_checkout(installed):
    venv, site, empty = installed
    proc = run_cli(venv, ["audit", "--package", "basic", "--json"], empty)
    assert proc.returncode == 0
    assert [d["name"] for d in _report(proc)["distributions"]] == ["tirx-kernels-basic"]
    listing = run_cli(venv, ["list"], empty)
    assert listing.returncode == 0 and "(no source)" not in listing.stdout
    assert listing.stdout.count(f"installed {site}") == 4


def test_fix_outside_a_checkout_is_one_line_exit_2(installed):
    venv, _, empty = installed
    proc = run_cli(venv, ["fix"], empty)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "checkout" in proc.stderr and "Traceback" not in proc.stderr


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


FAULTS = {
    # name: (installed file relative to site-packages, edit, rule that must fire there)
    "basic kernel loses its copyright line": (
        "tirx_kernels/basic/plugin.py",
        lambda p: _edit(p, "# SPDX-FileCopyrightText: Copyright TIRx authors\n", ""),
        "tirx-copyright",
    ),
    "flashinfer port cites an unpinned commit": (
        "tirx_kernels/flashinfer/activation.py",
        lambda p: _edit(p, "fb28d7242b3506a2348265962041acc1fb56cca4", "f" * 40),
        "port-commit",
    ),
    "acme file says TIRx instead of Acme Corp": (
        "tirx_kernels/acme/rms.py",
        lambda p: _edit(p, "Copyright Acme Corp", "Copyright TIRx authors"),
        "tirx-copyright",
    ),
    "core NOTICE edited after install": (
        "tirx_kernels_core-0.1.0.dist-info/licenses/NOTICE",
        lambda p: p.write_text(p.read_text() + "edited\n"),
        "license-file-differs",
    ),
    "basic LICENSE deleted": (
        "tirx_kernels_basic-0.1.0.dist-info/licenses/LICENSE",
        lambda p: p.unlink(),
        "license-file-missing",
    ),
    "acme METADATA declares MIT": (
        "tirx_kernels_acme-1.2.0.dist-info/METADATA",
        lambda p: _edit(p, "License-Expression: Apache-2.0", "License-Expression: MIT"),
        "metadata-license-expression",
    ),
    "core METADATA with a misspelled identifier": (
        "tirx_kernels_core-0.1.0.dist-info/METADATA",
        lambda p: _edit(p, "License-Expression: Apache-2.0", "License-Expression: Apache2"),
        "metadata-license-expression",
    ),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_fault_planted_in_an_installed_file_is_caught(installed, name):
    venv, site, empty = installed
    rel, plant, rule = FAULTS[name]
    path = site / rel
    saved = path.read_bytes()
    try:
        plant(path)
        proc = run_cli(venv, ["audit", "--json"], empty)
    finally:
        path.write_bytes(saved)
    report = _report(proc)
    assert proc.returncode == 1
    assert any(f["rule"] == rule and f["path"] == str(path) for f in report["findings"]), report[
        "findings"
    ]


def test_the_checkout_audit_covers_an_installed_out_of_tree_family(installed):
    # Run from this checkout with the fresh venv: the checkout's distributions plus acme,
    # which only pip installed (issue #28, 5a).
    venv, site, _ = installed
    proc = run_cli(venv, ["audit", "--json"], ROOT)
    report = _report(proc)
    assert proc.returncode == 0, [f["message"] for f in report["findings"]]
    got = {d["name"]: d["source"] for d in report["distributions"]}
    assert got["tirx-kernels-acme"] == f"installed {site}"
    assert got["tirx-kernels-basic"] == "checkout"
    # --package acme: audited from what pip installed, not against this repository's files
    assert run_cli(venv, ["audit", "--package", "acme"], ROOT).returncode == 0
    rms = site / "tirx_kernels/acme/rms.py"
    saved = rms.read_bytes()
    try:
        rms.write_text('"""No header."""\n')
        proc = run_cli(venv, ["audit", "--json"], ROOT)
    finally:
        rms.write_bytes(saved)
    assert proc.returncode == 1
    assert any(
        f["path"] == str(rms) and f["rule"] == "spdx-count" for f in _report(proc)["findings"]
    )


def test_a_broken_installed_family_is_a_finding(installed):
    venv, site, empty = installed
    plugin = site / "tirx_kernels/acme/plugin.py"
    saved = plugin.read_bytes()
    shutil.rmtree(plugin.parent / "__pycache__", ignore_errors=True)
    try:
        plugin.write_text(saved.decode() + "\nraise ImportError('acme needs libacme')\n")
        proc = run_cli(venv, ["audit", "--json"], empty)
        listing = run_cli(venv, ["list"], empty)
    finally:
        plugin.write_bytes(saved)
        shutil.rmtree(plugin.parent / "__pycache__", ignore_errors=True)
    report = _report(proc)
    assert proc.returncode == 1
    [f] = [f for f in report["findings"] if f["rule"] == "family-broken"]
    assert f["path"] == "tirx-kernels-acme" and "libacme" in f["found"]
    assert listing.returncode == 1 and "libacme" in listing.stdout


def test_sbom_of_the_installed_families_is_valid_spdx(installed, tmp_path):
    from test_license_sbom import check_sbom

    venv, site, empty = installed
    out = tmp_path / "installed.spdx.json"
    proc = run_cli(venv, ["sbom", "-o", str(out)], empty)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    names = {p["name"] for p in data["packages"]}
    assert {
        "tirx-kernels-core",
        "tirx-kernels-basic",
        "tirx-kernels-flashinfer",
        "tirx-kernels-acme",
        "FlashInfer",
    } <= names
    acme = next(p for p in data["packages"] if p["name"] == "tirx-kernels-acme")
    assert acme["copyrightText"] == "Copyright Acme Corp"
    assert f"installed {site}" in acme["comment"]
    ported = {f["fileName"] for f in data["files"]}
    assert "./tirx_kernels/flashinfer/activation.py" in ported
    check_sbom(out, [])  # parses and validates with spdx-tools
