# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The repository itself: the audit and its self-test pass, every distribution's wheel
(built with hatchling) passes the wheel audit, reuse lint passes, and the pre-commit hooks
install from PyPI only."""

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tirx_kernels.core.license import cli
from tirx_kernels.core.license.audit import required_files
from tirx_kernels.core.license.discover import Repo, discover
from tirx_kernels.core.license.wheel import audit_wheel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repo():
    return Repo.find(ROOT)


@pytest.fixture(scope="module")
def dists(repo):
    found, problems = discover(repo)
    assert [str(p) for p in problems] == []
    return found


def test_discovers_core_every_family_and_the_meta_distribution(repo, dists):
    by_name = {d.name: d for d in dists}
    assert by_name["tirx-kernels-core"].root == ROOT / "core"
    assert by_name["tirx-kernels-core"].policy.native
    assert by_name["tirx-kernels-basic"].root == ROOT / "packages/tirx-kernels-basic"
    for d in dists:
        if d.kind == "family":
            assert d.root is not None and d.package_dir.is_dir(), d
            assert d.package_dir == d.root / "src" / Path(*d.package.split("."))


def test_checkout_families_load_without_installed_entry_points(repo, dists):
    # What the pre-commit hook sees in its bare environment: no installed family plugins.
    bare, problems = discover(repo, eps=[])
    assert problems == []
    got = {(d.name, d.root): d.policy for d in bare}
    for d in dists:
        if d.root and ROOT in d.root.parents:
            assert got.get((d.name, d.root)) == d.policy, d.name


def test_audit_passes_on_the_repository(capsys):
    code = cli.main(["audit", "--root", str(ROOT), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, "\n".join(
        f"[{f['rule']}] {f['path']}:{f['line']} {f['message']} "
        f"(expected {f['expected']}; found {f['found']})"
        for f in report["findings"]
    )
    names = {d["name"] for d in report["distributions"]}
    assert {"tirx-kernels-core", "tirx-kernels-basic"} <= names


def test_self_test_passes(capsys):
    assert cli.main(["audit", "--self-test"]) == 0, capsys.readouterr().out
    assert "cases ok" in capsys.readouterr().out


def test_unknown_package_is_a_usage_error(capsys):
    assert cli.main(["audit", "--package", "no-such-family", "--root", str(ROOT)]) == 2


def test_package_selection_by_family_or_distribution(capsys):
    assert cli.main(["audit", "--package", "basic", "--root", str(ROOT), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in report["distributions"]] == ["tirx-kernels-basic"]


@pytest.fixture(scope="module")
def wheels(dists, tmp_path_factory):
    pytest.importorskip("hatchling")
    out = tmp_path_factory.mktemp("wheels")
    built = {}
    for d in dists:
        if d.root is None or ROOT not in (d.root, *d.root.parents):
            continue
        target = out / d.name
        subprocess.run(
            [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(target)],
            cwd=d.root,
            check=True,
            capture_output=True,
        )
        [wheel] = target.glob("*.whl")
        built[d.name] = wheel
    return built


def test_every_wheel_passes_the_wheel_audit(repo, dists, wheels):
    assert "tirx-kernels-core" in wheels and "tirx-kernels-basic" in wheels
    for name, wheel in wheels.items():
        found = audit_wheel(wheel, dists, repo)
        assert [str(f) for f in found] == [], name


def test_wheels_ship_license_files_under_dist_info(dists, wheels):
    by_name = {d.name: d for d in dists}
    for name, wheel in wheels.items():
        members = zipfile.ZipFile(wheel).namelist()
        info = next(m.split("/")[0] for m in members if m.endswith(".dist-info/METADATA"))
        for rel in required_files(by_name[name]):
            assert f"{info}/licenses/{rel}" in members, (name, rel)


def test_cli_wheel_audit(wheels, capsys):
    assert (
        cli.main(["audit", "--root", str(ROOT), "--wheel", str(wheels["tirx-kernels-basic"])]) == 0
    )
    assert "1 wheels: 0 findings" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("reuse") is None, reason="reuse not installed")
def test_reuse_lint_passes():
    proc = subprocess.run(
        [sys.executable, "-m", "reuse", "--root", str(ROOT), "lint"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_pre_commit_hooks_are_local_and_install_from_pypi():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = []
    for repo in config["repos"]:
        assert repo["repo"] == "local", "hooks must not clone a hook repository"
        hooks += repo["hooks"]
    assert {h["language"] for h in hooks} <= {"python", "system"}
    ids = {h["id"] for h in hooks}
    assert {
        "tirx-license-audit",
        "ruff",
        "trailing-whitespace",
        "end-of-file-fixer",
        "check-yaml",
        "check-toml",
    } <= ids
    audit_hook = next(h for h in hooks if h["id"] == "tirx-license-audit")
    assert "license.cli" in audit_hook["entry"] and audit_hook["pass_filenames"] is False


def test_audit_refuses_a_missing_root(tmp_path):
    from tirx_kernels.core.license.cli import main

    assert main(["audit", "--root", str(tmp_path / "nope")]) == 2


def test_an_empty_root_audits_what_is_installed_and_says_so(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["audit", "--root", str(empty), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sources = {d["name"]: d["source"] for d in report["distributions"]}
    # the editable installs of this checkout, read from their source trees
    assert sources["tirx-kernels-basic"] == f"source {ROOT / 'packages/tirx-kernels-basic'}"


def test_nothing_to_audit_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "discover", lambda repo, **kw: ([], []))
    assert cli.main(["audit", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no tirx-kernels distribution found" in err
