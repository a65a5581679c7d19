# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The ``tirx-license`` command line: argument forms, exit codes, one-line errors."""

import json
import shutil

import pytest

from tirx_kernels.core.license import cli
from tirx_kernels.core.license import selftest as st


@pytest.fixture
def two_wheels(tmp_path):
    tree = tmp_path / "tree"
    st.build_tree(tree)
    out = tmp_path / "dist"
    out.mkdir()
    first = st.build_wheel(tree, out)
    second = out / first.name.replace("0.1.0", "0.2.0")
    shutil.copy(first, second)
    return [str(first), str(second)]


def _audited_wheels(capsys, argv):
    code = cli.main(argv + ["--json"])
    report = json.loads(capsys.readouterr().out)
    return code, report["wheels"]


def test_wheel_takes_several_paths_after_one_flag(two_wheels, capsys):
    # What the README shows: `tirx-license audit --wheel dist/*.whl`.
    code, wheels = _audited_wheels(capsys, ["audit", "--wheel", *two_wheels])
    assert code in (0, 1) and wheels == two_wheels


def test_wheel_flag_may_be_repeated(two_wheels, capsys):
    code, wheels = _audited_wheels(
        capsys, ["audit", "--wheel", two_wheels[0], "--wheel", two_wheels[1]]
    )
    assert code in (0, 1) and wheels == two_wheels


def test_wheel_without_a_path_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["audit", "--wheel"])
    assert exc.value.code == 2


def test_an_unexpected_error_is_one_line_not_a_traceback(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(cli, "cmd_list", boom)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: disk on fire" in err
    assert cli.DEBUG_ENV in err  # says how to get the traceback


def test_the_debug_variable_lets_the_traceback_through(monkeypatch):
    monkeypatch.setattr(cli, "cmd_list", lambda args: 1 / 0)
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(ZeroDivisionError):
        cli.main(["list"])


def test_an_unwritable_output_is_one_line_naming_the_path(tmp_path, capsys):
    pytest.importorskip("spdx_tools")
    target = tmp_path / "no-such-dir" / "sbom.json"
    assert cli.main(["sbom", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(target) in err and "Traceback" not in err


def test_a_missing_wheel_is_a_finding_not_a_traceback(tmp_path, capsys):
    missing = tmp_path / "gone.whl"
    assert cli.main(["audit", "--wheel", str(missing)]) == 1
    out = capsys.readouterr().out
    assert "gone.whl: [wheel] cannot open the wheel" in out


def test_sbom_without_spdx_tools_says_how_to_install_it(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "spdx_tools", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "spdx_tools.spdx.model", None)
    assert cli.main(["sbom"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tirx-kernels-core[sbom]" in err


def test_a_reader_closing_the_pipe_gets_no_traceback(tmp_path):
    import subprocess
    import sys

    # --json: output beyond one pipe buffer, so the reader leaves while the CLI writes
    proc = subprocess.Popen(
        [sys.executable, "-m", "tirx_kernels.core.license", "audit", "--self-test", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    proc.stdout.read(1)
    proc.stdout.close()  # like `| head -c 1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1) and err == ""
