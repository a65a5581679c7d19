# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Mutation test: copy the real families (tracked files) and the root license files to a temp
dir, break one rule at a time, and assert the audit names the break (rule and file).

The native family and the port family are picked from the installed plugins by policy, so the
test follows whatever families exist; the port family gets one synthetic, valid port file
built from its own policy (a family may have no tracked port yet).
"""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tirx_kernels.core.license.audit import audit
from tirx_kernels.core.license.discover import Repo, discover, walk
from tirx_kernels.core.license.spdx import COPYRIGHT_LINE, LICENSE_TAG, PORT_PREFIX, join

PROBE = "_license_probe.py"


def _probe(up) -> str:
    return (
        f"{PORT_PREFIX}{up.project}\n# ({up.url} @ {up.commit or 'a' * 40}), "
        f"{up.copyright}\n# {LICENSE_TAG}: {join('Apache-2.0', up.spdx)}\n{COPYRIGHT_LINE}\n"
        '"""Probe port.\n\nUpstream source: include/example/probe.cuh."""\n'
    )


@pytest.fixture(scope="module")
def real():
    repo = Repo.find(Path(__file__).resolve().parents[2])
    dists, problems = discover(repo)
    assert problems == []
    fams = [d for d in dists if d.kind == "family" and d.root and repo.root in d.root.parents]
    native = next((d for d in fams if d.policy.native), None)
    port = next((d for d in fams if not d.policy.native), None)
    if native is None or port is None:
        pytest.skip("needs one native and one port family installed from this checkout")
    return repo, native, port


@pytest.fixture
def copy(real, tmp_path):
    repo, native, port = real
    files = ["LICENSE", "NOTICE"] + [f for f in repo.files if f.startswith("licenses/")]
    files += repo.under(native.root) + repo.under(port.root)
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo.root / rel, tmp_path / rel)

    def moved(d):
        return replace(
            d,
            root=tmp_path / d.root.relative_to(repo.root),
            package_dir=tmp_path / d.package_dir.relative_to(repo.root),
            plugin_file=None,
        )

    n, p = moved(native), moved(port)
    (p.package_dir / PROBE).write_text(_probe(p.policy.upstream))

    def run():
        return audit([n, p], Repo(tmp_path, walk(tmp_path), False))

    return tmp_path, n, p, run


def _rel(root, path):
    return Path(path).relative_to(root).as_posix()


def test_copy_is_clean(copy):
    _, _, _, run = copy
    assert [str(f) for f in run()] == []


def _edit(path, old, new, count=1):
    text = path.read_text()
    assert old in text, (old, path)
    path.write_text(text.replace(old, new, count))
    return path


def _write(path, text):
    path.write_text(text)
    return path


def _short_commit(p):
    path = p.package_dir / PROBE
    commit = path.read_text().split(" @ ", 1)[1].split(")", 1)[0]
    return _edit(path, commit, commit[:7])


MUTATIONS = {
    # name: (function(root, native, port) -> the file it broke, the rule that must fire)
    "native file loses the TIRx copyright": (
        lambda r, n, p: _edit(n.package_dir / "plugin.py", COPYRIGHT_LINE + "\n", ""),
        "tirx-copyright",
    ),
    "native file declares MIT": (
        lambda r, n, p: _edit(n.package_dir / "__init__.py", ": Apache-2.0", ": MIT"),
        "spdx-expression",
    ),
    "native file gets a second tag": (
        lambda r, n, p: _edit(n.package_dir / "plugin.py", "\n\n", f'\n\nS = "{LICENSE_TAG}"\n\n'),
        "spdx-count",
    ),
    "pyproject license gains a term": (
        lambda r, n, p: _edit(
            n.root / "pyproject.toml", 'license = "Apache-2.0"', 'license = "Apache-2.0 AND MIT"'
        ),
        "pyproject-license",
    ),
    "pyproject license-files drops NOTICE": (
        lambda r, n, p: _edit(n.root / "pyproject.toml", ', "NOTICE"', ""),
        "pyproject-license-files",
    ),
    "package LICENSE copy edited": (
        lambda r, n, p: _edit(n.root / "LICENSE", "Version 2.0", "Version 2.1"),
        "license-file-differs",
    ),
    "package NOTICE deleted": (
        lambda r, n, p: (n.root / "NOTICE").unlink() or n.root / "NOTICE",
        "license-file-missing",
    ),
    "port loses its URL": (
        lambda r, n, p: _edit(p.package_dir / PROBE, p.policy.upstream.url + " @ ", ""),
        "port-url",
    ),
    "port cites a short commit": (lambda r, n, p: _short_commit(p), "port-commit"),
    "port loses the upstream copyright": (
        lambda r, n, p: _edit(p.package_dir / PROBE, p.policy.upstream.copyright, ""),
        "port-copyright",
    ),
    "port loses its source path": (
        lambda r, n, p: _edit(p.package_dir / PROBE, "include/example/probe.cuh", "upstream"),
        "port-source-path",
    ),
    "port relabeled native": (
        lambda r, n, p: _write(p.package_dir / PROBE, (n.package_dir / "__init__.py").read_text()),
        "port-header",
    ),
    "port family's native plugin gets a port header": (
        lambda r, n, p: _write(p.package_dir / "plugin.py", (p.package_dir / PROBE).read_text()),
        "native-header",
    ),
    "upstream license copy edited": (
        lambda r, n, p: _write(
            p.root / p.policy.upstream.texts[0],
            (p.root / p.policy.upstream.texts[0]).read_text() + "\n",
        ),
        "license-file-differs",
    ),
    "root NOTICE drops the upstream": (
        lambda r, n, p: _edit(r / "NOTICE", p.policy.upstream.project, "Someone", -1),
        "root-notice",
    ),
    "root LICENSE map drops the port family": (
        lambda r, n, p: _edit(r / "LICENSE", p.name + " (", "("),
        "root-license-map",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_audit_names_the_break(copy, name):
    root, n, p, run = copy
    mutate, rule = MUTATIONS[name]
    broken = _rel(root, mutate(root, n, p))
    found = run()
    assert any(f.rule == rule and f.path == broken for f in found), (
        f"{name}: expected [{rule}] at {broken}; got "
        + "; ".join(f"[{f.rule}] {f.path}" for f in found)
    )
