# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Plugin loading: isolation of broken families, strict mode, allow/block lists, duplicates."""

import pytest
from conftest import HEADER, PLUGIN, kernel_source

from tirx_kernels.core import Family, Upstream
from tirx_kernels.core.family import PORT_NATIVE_FILES
from tirx_kernels.core.plugins import PluginError, load_families
from tirx_kernels.core.registry import Registry, RegistryError


def test_good_family_loads_with_distribution_and_version(fake_site):
    fake_site.family("alpha")
    reg = Registry.load()
    assert [f.family.name for f in reg.families] == ["alpha"]
    fam = reg.families[0]
    assert (fam.distribution, fam.version) == ("fake-alpha", "1.0")
    assert list(reg.kernels) == ["alpha_kern"]
    assert reg.broken == []


def test_broken_import_is_reported_and_others_keep_working(fake_site):
    fake_site.family("alpha")
    fake_site.family("broken", plugin=HEADER + "raise ImportError('missing dependency xyz')\n")
    reg = Registry.load()
    assert list(reg.kernels) == ["alpha_kern"]
    [b] = reg.broken
    assert (b.name, b.distribution) == ("broken", "fake-broken")
    assert "missing dependency xyz" in b.error


def test_strict_mode_turns_a_broken_family_into_an_error(fake_site, monkeypatch):
    fake_site.family("broken", plugin=HEADER + "raise ImportError('nope')\n")
    with pytest.raises(PluginError, match="broken.*fake-broken.*nope"):
        Registry.load(strict=True)
    monkeypatch.setenv("TIRX_KERNELS_STRICT", "1")
    with pytest.raises(PluginError):
        Registry.load()


def test_family_failing_validation_is_skipped(fake_site):
    fake_site.family("alpha")
    bad = kernel_source("beta_kern", "beta", cc=90)
    fake_site.family("beta", {"kern": bad})
    reg = Registry.load()
    assert list(reg.kernels) == ["alpha_kern"]
    [b] = reg.broken
    assert b.name == "beta" and "write the major version (9 for SM90)" in b.error


def test_plugin_returning_wrong_type_is_broken(fake_site):
    fake_site.family(
        "weird",
        plugin=HEADER
        + (
            "from tirx_kernels.core import hookimpl\n"
            "@hookimpl\ndef tirx_kernels_family():\n    return {'name': 'weird'}\n"
        ),
    )
    _, loaded, broken = load_families()
    assert loaded == [] and "must return a Family" in broken[0].error


def test_entry_point_name_must_match_family_name(fake_site):
    pkg = fake_site.family("gamma")
    (pkg / "plugin.py").write_text(
        (pkg / "plugin.py").read_text().replace("name='gamma'", "name='other'")
    )
    _, loaded, broken = load_families()
    assert loaded == [] and "name them the same" in broken[0].error


def test_duplicate_kernel_name_names_both_packages(fake_site):
    fake_site.family("alpha", {"kern": kernel_source("shared_name", "alpha")})
    fake_site.family("beta", {"kern": kernel_source("shared_name", "beta")})
    with pytest.raises(RegistryError) as e:
        Registry.load()
    assert "fake-alpha" in str(e.value) and "fake-beta" in str(e.value)
    assert "shared_name" in str(e.value)


def test_allowlist_and_blocklist(fake_site, monkeypatch):
    fake_site.family("alpha")
    fake_site.family("beta")
    monkeypatch.setenv("TIRX_KERNELS_FAMILIES", "beta")
    assert [f.family.name for f in Registry.load().families] == ["beta"]
    monkeypatch.setenv("TIRX_KERNELS_FAMILIES", "alpha,beta")
    monkeypatch.setenv("TIRX_KERNELS_DISABLE", "alpha")
    assert [f.family.name for f in Registry.load().families] == ["beta"]


def test_kernel_module_is_not_imported_by_listing(fake_site):
    body = "raise RuntimeError('imported at listing time')\n"
    fake_site.family("alpha", {"kern": kernel_source("alpha_kern", "alpha", body=body)})
    reg = Registry.load()
    assert reg.get("alpha_kern").labels == ["a"]
    with pytest.raises(RuntimeError, match="imported at listing time"):
        reg.get("alpha_kern").load()


def test_runtime_meta_must_match_literal(fake_site):
    body = "KERNEL_META['archs'] = ['sm_100a']\n"
    fake_site.family("alpha", {"kern": kernel_source("alpha_kern", "alpha", body=body)})
    with pytest.raises(ValueError, match="changed at import time"):
        Registry.load().get("alpha_kern").load()


def test_suite_configs_are_attributed_to_their_family(fake_site):
    fake_site.family("alpha", files={"alpha_kern.yaml": "kernel: alpha_kern\n"})
    fake_site.family("beta")
    files = Registry.load().suite_files()
    assert [(fam, p.name) for fam, p in files] == [("alpha", "alpha_kern.yaml")]


def test_kernel_file_with_a_syntax_error_breaks_only_its_family(fake_site):
    fake_site.family("alpha")
    fake_site.family("beta", {"kern": kernel_source("beta_kern", "beta") + "def f(:\n"})
    reg = Registry.load()
    assert list(reg.kernels) == ["alpha_kern"]
    [b] = reg.broken
    assert b.name == "beta" and "SyntaxError" in b.error


def install_impostor(fake_site):
    """The real family ``alpha`` and an out-of-tree one whose entry point and Family are also
    named ``alpha`` (another distribution, another package)."""
    fake_site.family("alpha")
    fake_site.family(
        "alpha",
        {"kern": kernel_source("evil_kern", "alpha")},
        package="impostor",
        dist="evil-alpha",
    )


def test_a_family_name_taken_twice_is_refused_naming_both(fake_site, monkeypatch):
    """Row 15 of issue #27: the impostor hid the real family, which showed as BROKEN with
    pluggy's "Plugin name already registered" dict dump."""
    install_impostor(fake_site)
    for strict in (False, True):
        with pytest.raises(PluginError) as e:
            Registry.load(strict=strict)
        message = str(e.value)
        assert "family name 'alpha' is declared twice" in message
        assert "fake-alpha" in message and "evil-alpha" in message
        assert "already registered" not in message and "\n" not in message
        assert "fix: uninstall one" in message


def test_family_name_conflict_at_the_command_line(fake_site):
    import subprocess
    import sys

    install_impostor(fake_site)
    for args in (["list"], ["test", "--kernel", "alpha_kern"], ["--strict", "plugins"]):
        p = subprocess.run(
            [sys.executable, "-m", "tirx_kernels.core.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        [line] = p.stderr.strip().splitlines()
        assert "fake-alpha" in line and "evil-alpha" in line


def raising_register_plugin(name):
    plugin = HEADER + PLUGIN.format(kernels=("kern",), name=name, category=name)
    return plugin.replace(
        "    for k in KERNELS:\n", "    raise KeyError('no such table')\n    for k in KERNELS:\n"
    )


def test_failing_register_hook_debug_traceback_and_strict_type(fake_site, monkeypatch, capsys):
    """Row 16 of issue #27: no traceback under TIRX_KERNELS_DEBUG=1, and --strict dropped
    the exception type."""
    fake_site.family("alpha")
    fake_site.family("beta", plugin=raising_register_plugin("beta"))
    monkeypatch.setenv("TIRX_KERNELS_DEBUG", "1")
    reg = Registry.load()
    assert list(reg.kernels) == ["alpha_kern"] and "KeyError" in reg.broken[0].error
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "no such table" in err
    monkeypatch.delenv("TIRX_KERNELS_DEBUG")
    Registry.load()
    assert "Traceback" not in capsys.readouterr().err  # only when asked
    with pytest.raises(PluginError, match=r"beta.*fake-beta.*KeyError: 'no such table'"):
        Registry.load(strict=True)


def test_failing_module_validation_debug_traceback(fake_site, monkeypatch, capsys):
    fake_site.family("beta", {"kern": kernel_source("beta_kern", "beta", cc=90)})
    monkeypatch.setenv("TIRX_KERNELS_DEBUG", "1")
    Registry.load()
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    monkeypatch.delenv("TIRX_KERNELS_DEBUG")
    with pytest.raises(PluginError, match=r"failed to validate: MetaError: "):
        Registry.load(strict=True)


@pytest.mark.parametrize(
    "upstream_terms, expression", [("MIT", "Apache-2.0 AND MIT"), ("Apache-2.0", "Apache-2.0")]
)
def test_port_family_adds_the_upstream_terms_to_apache(upstream_terms, expression):
    upstream = Upstream("Demo", "https://github.com/example/demo", upstream_terms, "(c) Demo")
    family = Family.port("demo", "tirx_kernels.demo", "Demo ports", upstream)
    assert (family.name, family.category, family.description) == ("demo", "demo", "Demo ports")
    assert family.license.expression == expression and family.license.upstream is upstream
    assert family.license.native_files == PORT_NATIVE_FILES
