# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Unit tests of each license rule: SPDX terms, header checks, policy mapping, pyproject
fields, wheels, fix. Synthetic texts come from the self-test so the tag stays out of here."""

import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tirx_kernels.core.family import FileOverride, LicensePolicy, Upstream
from tirx_kernels.core.license import selftest as st
from tirx_kernels.core.license.audit import audit, audit_distribution, expected_expression, rule_for
from tirx_kernels.core.license.discover import Distribution, Repo, walk
from tirx_kernels.core.license.fix import add_native_header, fix
from tirx_kernels.core.license.headers import FileRule, check_python
from tirx_kernels.core.license.spdx import (
    COPYRIGHT_LINE,
    LICENSE_TAG,
    NATIVE_HEADER,
    PORT_PREFIX,
    invalid,
    join,
    native_header,
    same,
    terms,
)
from tirx_kernels.core.license.wheel import audit_wheel

NATIVE = st.NATIVE
PORT_RULE = FileRule("port", "Apache-2.0 AND MIT", st.MLA)
OVERRIDE_RULE = FileRule("port", "Apache-2.0 AND BSD-3-Clause", st.CUB, st.BSD_TEXT)
NATIVE_RULE = FileRule("native")


def rules(text, rule=NATIVE_RULE):
    return sorted({f.rule for f in check_python(text, rule, "x.py")})


# --- SPDX expressions -------------------------------------------------------------------


def test_terms_split_conjunctions_only():
    assert terms("Apache-2.0 AND (MIT)") == {"Apache-2.0", "MIT"}
    assert terms("Apache-2.0 and BSD-3-Clause") == {"Apache-2.0", "BSD-3-Clause"}
    assert terms("Apache-2.0 AND (MIT OR Zlib)") == {"Apache-2.0", "MIT OR Zlib"}
    assert terms("Apache-2.0 AND Apache-2.0") == {"Apache-2.0"}


def test_terms_ignore_order_and_spelling():
    assert terms("MIT AND Apache-2.0") == terms("Apache-2.0 AND MIT")
    assert terms("Apache-2.0 AND (Zlib OR MIT)") == terms("(MIT OR Zlib) AND Apache-2.0")
    assert terms("apache-2.0 AND mit") == {"Apache-2.0", "MIT"}
    assert same("A-B AND MIT", "MIT AND A-B") is False  # an unknown id is never equal


@pytest.mark.parametrize(
    "expression",
    [
        "Apache2",
        "MIT-0 AND",
        "Apache-2.0 AND",
        "(MIT",
        "MIT WITH Apache-2.0",
        "",
        "Apache-2.0 AND MIT-Zero",
    ],
)
def test_invalid_expressions(expression):
    assert invalid(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "MIT-0",
        "Apache-2.0 AND MIT",
        "LicenseRef-Acme-1.0",
        "Apache-2.0 WITH LLVM-exception",
        "MIT OR Zlib",
    ],
)
def test_valid_expressions(expression):
    assert invalid(expression) is None


def test_invalid_header_expression_is_a_finding():
    text = st.GEMM.replace("Apache-2.0 AND MIT", "Apache2 AND MIT", 1)
    [f] = [f for f in check_python(text, PORT_RULE, "x.py") if f.rule == "spdx-expression"]
    assert "Apache2" in f.message


def test_join_is_canonical():
    assert (
        join("MIT", "Apache-2.0 AND BSD-3-Clause", "Apache-2.0")
        == "Apache-2.0 AND BSD-3-Clause AND MIT"
    )
    assert join("Apache-2.0", "Apache-2.0") == "Apache-2.0"


# --- native headers ---------------------------------------------------------------------


def test_native_header_passes_with_shebang_and_coding_line():
    assert rules(NATIVE + "x = 1\n") == []
    assert rules("#!/usr/bin/env python3\n" + NATIVE) == []
    assert rules("# -*- coding: utf-8 -*-\n" + NATIVE) == []


def test_native_header_must_be_exactly_two_lines():
    assert rules(NATIVE.replace(COPYRIGHT_LINE, COPYRIGHT_LINE + "\n# more")) == ["native-header"]
    swapped = "\n".join(reversed(NATIVE_HEADER)) + "\n"
    assert rules(swapped) == ["native-header"]
    assert rules('"""doc"""\n' + NATIVE) == ["native-header", "spdx-placement", "tirx-copyright"]


def test_missing_header_and_missing_copyright():
    assert rules("x = 1\n") == ["native-header", "spdx-count", "tirx-copyright"]
    assert rules(NATIVE_HEADER[0] + "\n") == ["native-header", "tirx-copyright"]


def test_exactly_one_spdx_tag_anywhere_in_the_file():
    assert rules(NATIVE + f"x = 1\n# {LICENSE_TAG}: MIT\n") == ["spdx-count"]
    assert rules(NATIVE + f'S = "{LICENSE_TAG}: MIT"\n') == ["spdx-count"]


def test_native_file_with_other_terms():
    text = NATIVE.replace(": Apache-2.0", ": MIT")
    assert rules(text) == ["native-header", "spdx-expression"]


# --- port headers -----------------------------------------------------------------------


def test_valid_port_and_override():
    assert rules(st.GEMM, PORT_RULE) == []
    assert rules(st.REDUCE, OVERRIDE_RULE) == []


@pytest.mark.parametrize(
    "old,new,rule",
    [
        ("Apache-2.0 AND MIT", "Apache-2.0", "spdx-expression"),
        ("code from DemoMLA", "code from DemoMLB", "port-project"),
        ("https://github.com/example/DemoMLA", "https://gitlab.com/example/DemoMLA", "port-url"),
        ("https://github.com/example/DemoMLA @ ", "", "port-url"),
        (st.COMMIT, st.COMMIT[:7], "port-commit"),
        (st.COMMIT, st.COMMIT.upper(), "port-commit"),
        (st.COMMIT, "e" * 40, "port-commit"),
        ("Copyright (c) 2025 Example Corp", "", "port-copyright"),
        ("Copyright (c) 2025 Example Corp", "Copyright (c) 2025 Other", "port-copyright"),
        (
            "Upstream source: csrc/sm90/gemm.cuh (the mainloop).",
            "Upstream: gemm.",
            "port-source-path",
        ),
        ("# (https", "#\n# (https", "port-citation"),
    ],
)
def test_each_port_rule(old, new, rule):
    assert old in st.GEMM
    assert rule in rules(st.GEMM.replace(old, new, 1), PORT_RULE)


def test_port_header_must_come_first():
    text = NATIVE + st.GEMM.replace(COPYRIGHT_LINE + "\n", "").replace(
        st.GEMM.splitlines()[2] + "\n", ""
    )
    assert "port-header" in rules(text, PORT_RULE)


def test_port_copyright_may_wrap_and_change_years():
    text = st.GEMM.replace(
        "), Copyright (c) 2025 Example Corp", "),\n# Copyright (c) 2023-2026\n#   Example Corp"
    )
    assert rules(text, PORT_RULE) == []


def test_other_commits_are_accepted():
    up = replace(st.MLA, other_commits=("a" * 40,))
    assert (
        rules(st.GEMM.replace(st.COMMIT, "a" * 40), FileRule("port", "Apache-2.0 AND MIT", up))
        == []
    )


def test_required_text_present_in_order():
    assert rules(st.REDUCE.replace(f"# {st.BSD_TEXT[0]}\n", ""), OVERRIDE_RULE) == ["required-text"]
    rewrapped = st.REDUCE.replace(st.BSD_TEXT[1], st.BSD_TEXT[1].replace(" may ", "\n# may "))
    assert rules(rewrapped, OVERRIDE_RULE) == []


def test_either_rule_accepts_native_or_complete_port():
    either = replace(PORT_RULE, kind="either")
    assert rules(NATIVE, either) == []
    assert rules(st.GEMM, either) == []
    assert rules(st.GEMM.replace(st.COMMIT, "abc"), either) == ["port-commit"]


def test_syntax_error_in_a_port_is_reported():
    assert "syntax" in rules(st.GEMM + "def (:\n", PORT_RULE)


# --- policy -> rule -----------------------------------------------------------------------


def _dist(policy, tmp_path=Path("/nonexistent")):
    return Distribution(
        "tirx-kernels-demo",
        tmp_path,
        policy,
        "family",
        "demo",
        "tirx_kernels.demo",
        tmp_path / "src/tirx_kernels/demo",
    )


def test_rule_for_follows_the_policy():
    d = _dist(st.DEMO_POLICY)
    assert rule_for(d, "gemm.py").kind == "port"
    assert rule_for(d, "gemm.py").spdx == "Apache-2.0 AND MIT"
    assert rule_for(d, "plugin.py").kind == "native"
    assert rule_for(d, "reduce.py").upstream is st.CUB
    assert rule_for(d, "reduce.py").required_text == st.BSD_TEXT
    assert rule_for(d, None).kind == "either"
    globbed = _dist(replace(st.DEMO_POLICY, native_files=("sub/*.py",)))
    assert rule_for(globbed, "sub/x.py").kind == "native"
    assert rule_for(globbed, "__init__.py").kind == "port"
    assert rule_for(_dist(LicensePolicy("Apache-2.0")), "x.py").kind == "native"


def test_override_upstream_defaults_to_the_family():
    policy = replace(
        st.DEMO_POLICY, overrides={"r.py": FileOverride("Apache-2.0 AND BSD-3-Clause", ("text",))}
    )
    assert rule_for(_dist(policy), "r.py").upstream is st.MLA


def test_expected_expression_is_the_union():
    assert expected_expression(_dist(st.DEMO_POLICY)) == "Apache-2.0 AND BSD-3-Clause AND MIT"
    flashinfer_like = LicensePolicy("Apache-2.0", Upstream("F", "https://x/f", "Apache-2.0", "c"))
    assert expected_expression(_dist(flashinfer_like)) == "Apache-2.0"
    meta = Distribution(
        "tirx-kernels",
        Path("/"),
        LicensePolicy("Apache-2.0"),
        "other",
        dependencies=["tirx-kernels-demo"],
    )
    assert (
        expected_expression(meta, [meta, _dist(st.DEMO_POLICY)])
        == "Apache-2.0 AND BSD-3-Clause AND MIT"
    )


def test_upstream_texts_default_from_the_url():
    up = Upstream("FlashMLA", "https://github.com/deepseek-ai/FlashMLA", "MIT", "c")
    assert up.texts == ("licenses/flashmla-LICENSE.txt",)
    fa = Upstream(
        "FA",
        "https://github.com/Dao-AILab/flash-attention",
        "BSD-3-Clause",
        "c",
        license_texts=(
            "licenses/flash-attention-LICENSE.txt",
            "licenses/flash-attention-AUTHORS.txt",
        ),
    )
    assert len(fa.texts) == 2


# --- pyproject / tree -----------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    st.build_tree(tmp_path)
    return tmp_path


def _audit(root):
    return audit(st.distributions(root), Repo(root, walk(root), False))


def test_synthetic_tree_is_clean(tree):
    assert _audit(tree) == []


@pytest.mark.parametrize(
    "old,new",
    [
        ('license = "Apache-2.0"', 'license = {text = "Apache-2.0"}'),
        ('license = "Apache-2.0"', 'dynamic = ["license"]'),
        ('license = "Apache-2.0"', 'license = "Apache-2.0 AND NotALicense"'),
    ],
)
def test_pyproject_license_must_be_a_valid_static_expression(tree, old, new):
    pytest.importorskip("packaging.licenses")
    path = tree / "packages/plain/pyproject.toml"
    path.write_text(path.read_text().replace(old, new))
    assert "pyproject-license" in {f.rule for f in _audit(tree)}


def test_license_files_pattern_matching_nothing(tree):
    path = tree / "packages/plain/pyproject.toml"
    path.write_text(path.read_text().replace('"NOTICE"]', '"NOTICE", "AUTHORS"]'))
    [f] = _audit(tree)
    assert (f.rule, f.found) == ("pyproject-license-files", "AUTHORS")


def test_root_license_must_start_with_apache(tree):
    text = (tree / "LICENSE").read_text()
    for rel in ("LICENSE", "packages/demo/LICENSE", "packages/plain/LICENSE"):
        (tree / rel).write_text("MIT License\n" + text)
    assert {f.rule for f in _audit(tree)} == {"root-license"}


def test_missing_upstream_license_text_content(tree):
    for rel in ("licenses/demomla-LICENSE.txt", "packages/demo/licenses/demomla-LICENSE.txt"):
        (tree / rel).write_text("not a license\n")
    assert "license-text-missing" in {f.rule for f in _audit(tree)}


# --- wheels --------------------------------------------------------------------------------


def _rewrite_metadata(wheel, edit):
    src = zipfile.ZipFile(wheel)
    out = wheel.with_name("edited-" + wheel.name)
    with zipfile.ZipFile(out, "w") as zf:
        for item in src.namelist():
            data = src.read(item)
            zf.writestr(item, edit(data.decode()) if item.endswith("/METADATA") else data)
    return out


@pytest.mark.parametrize(
    "edit,rule",
    [
        (lambda m: m.replace("Metadata-Version: 2.4", "Metadata-Version: 2.1"), "wheel-metadata"),
        (
            lambda m: "\n".join(
                x for x in m.splitlines() if not x.startswith("License-Expression")
            ),
            "wheel-metadata",
        ),
        (lambda m: m.replace("License-File: NOTICE\n", ""), "wheel-license-file"),
        (lambda m: m + "License-File: AUTHORS\n", "wheel-license-file"),
        (lambda m: m.replace("tirx-kernels-demo", "someone-else"), "wheel-unknown"),
    ],
)
def test_wheel_metadata_rules(tree, tmp_path, edit, rule):
    out = tmp_path / "w"
    out.mkdir()
    wheel = _rewrite_metadata(st.build_wheel(tree, out), edit)
    dists = st.distributions(tree)
    assert rule in {f.rule for f in audit_wheel(wheel, dists, Repo(tree, walk(tree)))}


def test_wheel_license_copy_must_match_root(tree, tmp_path):
    wheel = st.build_wheel(tree, tmp_path)
    (tree / "NOTICE").write_text("changed\n")
    found = audit_wheel(wheel, st.distributions(tree), Repo(tree, walk(tree)))
    assert [f.rule for f in found] == ["wheel-file-differs"]


def test_not_a_wheel(tmp_path):
    bad = tmp_path / "x.whl"
    bad.write_text("nope")
    assert [f.rule for f in audit_wheel(bad, [], None)] == ["wheel"]


# --- fix -------------------------------------------------------------------------------------


def test_add_native_header_keeps_shebang():
    assert (
        add_native_header("#!/bin/env python\nx = 1\n")
        == "#!/bin/env python\n" + NATIVE + "x = 1\n"
    )
    assert add_native_header("x = 1\n") == NATIVE + "x = 1\n"


def test_fix_adds_native_headers_only_in_native_packages(tree):
    plain = tree / "packages/plain/src/tirx_kernels/plain/new.py"
    plain.write_text('"""New."""\n')
    partial = tree / "packages/plain/src/tirx_kernels/plain/partial.py"
    partial.write_text(NATIVE_HEADER[0] + "\n")
    port = tree / "packages/demo/src/tirx_kernels/demo/new_port.py"
    port.write_text('"""New port."""\n')
    dists = st.distributions(tree)
    repo = Repo(tree, walk(tree))
    dry = fix(dists, repo, dists, dry_run=True)
    assert plain.read_text() == '"""New."""\n' and dry.fixed
    result = fix(dists, repo, dists)
    assert result.fixed == ["packages/plain/src/tirx_kernels/plain/new.py"]
    assert plain.read_text() == NATIVE + '"""New."""\n'
    assert [r for r, _ in result.skipped] == ["packages/plain/src/tirx_kernels/plain/partial.py"]
    assert [r for r, _ in result.refused] == ["packages/demo/src/tirx_kernels/demo/new_port.py"]
    assert port.read_text() == '"""New port."""\n'
    assert check_python(plain.read_text(), FileRule("native"), "new.py") == []


def test_fix_refuses_a_named_file_of_a_port_family(tree):
    port = tree / "packages/demo/src/tirx_kernels/demo/plugin.py"
    port.write_text("x = 1\n")  # even a native_files entry: the package is a port family
    dists = st.distributions(tree)
    result = fix(dists, Repo(tree, walk(tree)), dists, only=[port])
    assert result.fixed == [] and len(result.refused) == 1
    assert port.read_text() == "x = 1\n"


def test_port_prefix_constant_matches_the_contract():
    assert PORT_PREFIX == "# This file is a TIRx port of code from "


def test_distribution_outside_the_repository_is_walked(tree, tmp_path_factory):
    elsewhere = Repo(tmp_path_factory.mktemp("elsewhere"), [], False)
    plain = st.distributions(tree)[1]
    bad = plain.package_dir / "rms.py"
    bad.write_text("x = 1\n")
    found = audit_distribution(plain, elsewhere, [plain])
    assert any(f.rule == "spdx-count" and f.path == str(bad) for f in found)


# --- a family's own copyright holder ---------------------------------------------------------

ACME = replace(st.PLAIN_POLICY, copyright_holder="Acme Corp")


def test_a_family_names_its_own_copyright_holder(tree):
    acme_header = "\n".join(native_header("Acme Corp")) + "\n"
    assert acme_header.splitlines()[1].endswith(": Copyright Acme Corp")
    for path in (tree / "packages/plain/src/tirx_kernels/plain").glob("*.py"):
        path.write_text(path.read_text().replace("Copyright TIRx authors", "Copyright Acme Corp"))
    dists = st.distributions(tree)
    dists[1].policy = ACME
    plain_files = [
        f for f in audit(dists, Repo(tree, walk(tree))) if "packages/plain/src" in f.path
    ]
    assert plain_files == []
    dists[1].policy = st.PLAIN_POLICY  # the files no longer carry the TIRx line
    assert "tirx-copyright" in {f.rule for f in audit(dists, Repo(tree, walk(tree)))}


def test_fix_writes_the_family_holder(tree):
    new = tree / "packages/plain/src/tirx_kernels/plain/new.py"
    new.write_text("x = 1\n")
    dists = st.distributions(tree)
    dists[1].policy = ACME
    fix(dists, Repo(tree, walk(tree)), dists)
    assert new.read_text() == "\n".join(native_header("Acme Corp")) + "\nx = 1\n"


@pytest.mark.parametrize("holder", ["", "Copyright Acme", "Acme\nCorp", " Acme"])
def test_a_malformed_holder_is_a_policy_finding(tree, holder):
    dists = st.distributions(tree)
    dists[1].policy = replace(st.PLAIN_POLICY, copyright_holder=holder)
    assert "policy" in {f.rule for f in audit(dists, Repo(tree, walk(tree)))}
