# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license fix`` writes safely: never through a symlink out of the repository, nothing
when any file cannot be read, line endings kept, each file replaced atomically."""

import os
import stat

import pytest

from tirx_kernels.core.license import cli
from tirx_kernels.core.license import selftest as st
from tirx_kernels.core.license.discover import Repo, walk
from tirx_kernels.core.license.fix import fix

PLAIN = "packages/plain/src/tirx_kernels/plain"


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "repo"
    st.build_tree(root)
    return root


def _fix(root, **kw):
    dists = st.distributions(root)
    return fix(dists, Repo(root, walk(root), False), dists, **kw)


def test_symlink_to_a_file_outside_the_repository_is_left_alone(tree, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    (tree / PLAIN / "linked.py").symlink_to(outside)
    result = _fix(tree)
    assert outside.read_text() == "x = 1\n"
    assert f"{PLAIN}/linked.py" not in result.fixed
    [(rel, why)] = [s for s in result.skipped if s[0] == f"{PLAIN}/linked.py"]
    assert "outside the repository" in why and str(outside) in why


def test_symlink_inside_the_repository_is_fixed_once(tree):
    target = tree / PLAIN / "target.py"
    target.write_text("x = 1\n")
    (tree / PLAIN / "z_alias.py").symlink_to(target)
    result = _fix(tree)
    assert target.read_text() == st.NATIVE + "x = 1\n"
    assert (tree / PLAIN / "z_alias.py").is_symlink()
    assert len(result.fixed) == 1


def test_a_non_utf8_file_stops_the_fix_before_any_write(tree):
    good = tree / PLAIN / "a_good.py"
    good.write_text("x = 1\n")
    bad = tree / PLAIN / "b_bad.py"
    bad.write_bytes(b"s = '\xff'\n")
    result = _fix(tree)
    assert good.read_text() == "x = 1\n"  # all or nothing
    assert bad.read_bytes() == b"s = '\xff'\n"
    assert result.fixed == []
    [(rel, why)] = result.errors
    assert rel == f"{PLAIN}/b_bad.py" and "UTF-8" in why


def test_cli_names_the_unreadable_file_and_writes_nothing(tree, monkeypatch, capsys):
    good = tree / PLAIN / "a_good.py"
    good.write_text("x = 1\n")
    (tree / PLAIN / "b_bad.py").write_bytes(b"\xff\n")
    monkeypatch.setattr(cli, "discover", lambda repo, *a, **k: (st.distributions(tree), []))
    assert cli.main(["fix", "--root", str(tree)]) == 1
    err = capsys.readouterr().err
    assert f"{PLAIN}/b_bad.py" in err and "UTF-8" in err and "Traceback" not in err
    assert good.read_text() == "x = 1\n"


def test_crlf_line_endings_are_kept(tree):
    path = tree / PLAIN / "crlf.py"
    path.write_bytes(b"#!/usr/bin/env python3\r\nx = 1\r\ny = 2\r\n")
    _fix(tree)
    header = st.NATIVE.replace("\n", "\r\n").encode()
    assert path.read_bytes() == b"#!/usr/bin/env python3\r\n" + header + b"x = 1\r\ny = 2\r\n"


def test_files_are_replaced_atomically_keeping_their_mode(tree):
    path = tree / PLAIN / "new.py"
    path.write_text("x = 1\n")
    path.chmod(0o751)
    before = path.stat().st_ino
    _fix(tree)
    # A new inode: the text was written to a temporary file renamed over the old one, so a
    # crash mid-write cannot leave a truncated source file.
    assert path.stat().st_ino != before
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.read_text() == st.NATIVE + "x = 1\n"
    assert [p for p in os.listdir(path.parent) if p.endswith(".tmp")] == []
