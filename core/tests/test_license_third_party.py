# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A third-party family in its own repository (issue #28, deliverables 2 and 5): audited
from its own folder it passes on its own terms (its holder, no component map of this
repository), a broken plugin is the finding, and a folder that is not a checkout is never
walked for other projects."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from license_helpers import write_acme

from tirx_kernels.core.license import selftest as st


def _audit(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.license", "audit", "--json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc


@pytest.fixture
def acme(tmp_path):
    return write_acme(tmp_path / "acme")


def test_a_correct_third_party_repository_passes_from_its_own_folder(acme):
    code, report, _ = _audit(acme)
    assert code == 0, [(f["rule"], f["path"], f["message"]) for f in report["findings"]]
    assert report["checkout"] == str(acme)
    by_name = {d["name"]: d for d in report["distributions"]}
    assert by_name["tirx-kernels-acme"]["source"] == "checkout"
    assert by_name["tirx-kernels-acme"]["copyright_holder"] == "Acme Corp"
    code, report, _ = _audit(acme, "--package", "acme")
    assert code == 0 and [d["name"] for d in report["distributions"]] == ["tirx-kernels-acme"]


def test_a_third_party_file_with_the_tirx_holder_is_caught(acme):
    rms = acme / "src/tirx_kernels/acme/rms.py"
    rms.write_text(rms.read_text().replace("Acme Corp", "TIRx authors"))
    code, report, _ = _audit(acme, "--package", "acme")
    assert code == 1
    assert {(f["rule"], f["path"]) for f in report["findings"]} >= {
        ("tirx-copyright", "src/tirx_kernels/acme/rms.py")
    }


def test_a_broken_third_party_plugin_is_the_finding(tmp_path):
    acme = write_acme(tmp_path / "acme", plugin_body='raise ImportError("needs libacme")\n')
    code, report, _ = _audit(acme)
    assert code == 1
    [f] = [f for f in report["findings"] if f["rule"] == "family-broken"]
    assert f["path"] == "tirx-kernels-acme" and "libacme" in f["found"]
    code, report, _ = _audit(acme, "--package", "acme")
    assert code == 1 and [f["rule"] for f in report["findings"]] == ["family-broken"]


def test_a_folder_that_is_not_a_checkout_is_never_walked(tmp_path):
    # Other projects below the current folder, one with broken headers: none is audited.
    st.build_tree(tmp_path / "projects/repo")
    (tmp_path / "projects/repo/packages/plain/src/tirx_kernels/plain/rms.py").write_text("x\n")
    write_acme(tmp_path / "projects/acme", plugin_body="raise ImportError('unrelated')\n")
    code, report, proc = _audit(tmp_path)
    assert code == 0, report["findings"]
    assert report["checkout"] is None
    names = {d["name"] for d in report["distributions"]}
    assert not names & {"tirx-kernels-demo", "tirx-kernels-plain", "tirx-kernels-acme"}
    assert str(tmp_path) not in proc.stdout


def _editable_acme(tmp_path):
    """acme as `pip install -e` leaves it: a .dist-info with its entry point on the path and
    the package imported from acme's own source tree."""
    acme = write_acme(tmp_path / "acme")
    site = tmp_path / "site"
    info = site / "tirx_kernels_acme-1.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.4\nName: tirx-kernels-acme\n"
        "Version: 1.2.0\nLicense-Expression: Apache-2.0\n"
    )
    (info / "entry_points.txt").write_text("[tirx_kernels]\nacme = tirx_kernels.acme.plugin\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(acme / "src")])
    return acme, env


def test_an_editable_out_of_tree_family_is_audited_against_its_own_repository(tmp_path):
    acme, env = _editable_acme(tmp_path)
    root = Path(__file__).resolve().parents[2]

    def audit_here():
        proc = subprocess.run(
            [sys.executable, "-m", "tirx_kernels.core.license", "audit", "--json"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, json.loads(proc.stdout)

    code, report = audit_here()
    assert code == 0, [(f["rule"], f["path"]) for f in report["findings"]]
    sources = {d["name"]: d["source"] for d in report["distributions"]}
    assert sources["tirx-kernels-acme"] == f"source {acme}"
    assert sources["tirx-kernels-basic"] == "checkout"
    rms = acme / "src/tirx_kernels/acme/rms.py"
    rms.write_text('"""No header."""\n')
    code, report = audit_here()
    assert code == 1
    assert ("spdx-count", str(rms)) in {(f["rule"], f["path"]) for f in report["findings"]}
