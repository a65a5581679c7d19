# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license fix`` writes safely: never through a symlink out of the repository, nothing
when any file cannot be read, line endings kept, each file replaced atomically."""

import os
import stat

from tirx_kernels.core.license import cli
from tirx_kernels.core.license import selftest as st
from tirx_kernels.core.license.discover import Repo, walk
from tirx_kernels.core.license.fix import fix

PLAIN = "packages/plain/src/tirx_kernels/plain"


def _fix(root, **kw):
    dists = st.distributions(root)
    return fix(dists, Repo(root, walk(root), False), dists, **kw)


def test_symlink_to_a_file_outside_the_repository_is_left_alone(selftest_tree, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    (selftest_tree / PLAIN / "linked.py").symlink_to(outside)
    result = _fix(selftest_tree)
    assert outside.read_text() == "x = 1\n"
    assert f"{PLAIN}/linked.py" not in result.fixed
    [(rel, why)] = [s for s in result.skipped if s[0] == f"{PLAIN}/linked.py"]
    assert "outside the repository" in why and str(outside) in why


def test_symlink_inside_the_repository_is_fixed_once(selftest_tree):
    target = selftest_tree / PLAIN / "target.py"
    target.write_text("x = 1\n")
    (selftest_tree / PLAIN / "z_alias.py").symlink_to(target)
    result = _fix(selftest_tree)
    assert target.read_text() == st.NATIVE + "x = 1\n"
    assert (selftest_tree / PLAIN / "z_alias.py").is_symlink()
    assert len(result.fixed) == 1


def test_a_non_utf8_file_stops_the_fix_before_any_write(selftest_tree):
    good = selftest_tree / PLAIN / "a_good.py"
    good.write_text("x = 1\n")
    bad = selftest_tree / PLAIN / "b_bad.py"
    bad.write_bytes(b"s = '\xff'\n")
    result = _fix(selftest_tree)
    assert good.read_text() == "x = 1\n"  # all or nothing
    assert bad.read_bytes() == b"s = '\xff'\n"
    assert result.fixed == []
    [(rel, why)] = result.errors
    assert rel == f"{PLAIN}/b_bad.py" and "UTF-8" in why


def test_cli_names_the_unreadable_file_and_writes_nothing(selftest_tree, monkeypatch, capsys):
    good = selftest_tree / PLAIN / "a_good.py"
    good.write_text("x = 1\n")
    (selftest_tree / PLAIN / "b_bad.py").write_bytes(b"\xff\n")
    monkeypatch.setattr(
        cli, "discover", lambda repo, *a, **k: (st.distributions(selftest_tree), [])
    )
    assert cli.main(["fix", "--root", str(selftest_tree)]) == 1
    err = capsys.readouterr().err
    assert f"{PLAIN}/b_bad.py" in err and "UTF-8" in err and "Traceback" not in err
    assert good.read_text() == "x = 1\n"


def test_crlf_line_endings_are_kept(selftest_tree):
    path = selftest_tree / PLAIN / "crlf.py"
    path.write_bytes(b"#!/usr/bin/env python3\r\nx = 1\r\ny = 2\r\n")
    _fix(selftest_tree)
    header = st.NATIVE.replace("\n", "\r\n").encode()
    assert path.read_bytes() == b"#!/usr/bin/env python3\r\n" + header + b"x = 1\r\ny = 2\r\n"


def test_files_are_replaced_atomically_keeping_their_mode(selftest_tree):
    path = selftest_tree / PLAIN / "new.py"
    path.write_text("x = 1\n")
    path.chmod(0o751)
    before = path.stat().st_ino
    _fix(selftest_tree)
    # A new inode: the text was written to a temporary file renamed over the old one, so a
    # crash mid-write cannot leave a truncated source file.
    assert path.stat().st_ino != before
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.read_text() == st.NATIVE + "x = 1\n"
    assert [p for p in os.listdir(path.parent) if p.endswith(".tmp")] == []
