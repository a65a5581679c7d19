# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Which distributions to audit: core, every family plugin, and other pyproject distributions.

Families come from the installed ``tirx_kernels`` entry points; a distribution of the
checkout that is not installed (or installed from elsewhere) is loaded from its own
``pyproject.toml`` entry points with its ``src`` on ``sys.path``, so the audit also works in a
bare environment (the pre-commit hook). A distribution's root is the directory holding its
``pyproject.toml``, found upwards from the family's package directory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path

from ..family import LicensePolicy
from ..plugins import ENTRY_POINT_GROUP, ENV_ONLY, ENV_SKIP, load_families
from .findings import Finding

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CORE_DISTRIBUTION = "tirx-kernels-core"
CORE_PACKAGE = "tirx_kernels.core"
CORE_POLICY = LicensePolicy(expression="Apache-2.0")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Repo:
    """The tree the audit reads: its root and its files (tracked files in a git checkout)."""

    root: Path
    files: list[str]  # POSIX paths relative to root
    git: bool = False

    @classmethod
    def find(cls, root: Path | None = None) -> Repo:
        start = Path(root or os.getcwd()).resolve()
        try:
            top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start,
                                 capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return cls(start, walk(start), False)
        if root is not None and Path(top).resolve() != start:
            return cls(start, walk(start), False)
        top_path = Path(top).resolve()
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=top_path, capture_output=True,
                                check=True).stdout.decode().split("\0")
        return cls(top_path, [f for f in listed if f and (top_path / f).is_file()], True)

    def under(self, directory: Path) -> list[str]:
        """Files of the repo below ``directory`` (relative to the repo root)."""
        try:
            prefix = directory.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return []
        if prefix == ".":
            return list(self.files)
        return [f for f in self.files if f.startswith(prefix + "/")]


_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "build", "dist", ".pytest_cache",
              ".ruff_cache", ".device", ".scratch", ".bench-suite", "node_modules"}


def walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            out.append((Path(dirpath) / name).relative_to(root).as_posix())
    return out


@dataclass
class Distribution:
    """One distribution to audit. ``kind``: "core", "family" or "other" (meta etc.)."""

    name: str
    root: Path | None  # directory holding pyproject.toml; None: not a source tree
    policy: LicensePolicy
    kind: str = "family"
    family: str | None = None
    package: str | None = None  # import package, e.g. tirx_kernels.basic
    package_dir: Path | None = None
    plugin_file: Path | None = None  # where the policy is declared
    dependencies: list[str] = field(default_factory=list)  # normalized names ("other" only)

    @property
    def package_path(self) -> str | None:
        """The package as a path inside a wheel: tirx_kernels/basic."""
        return self.package.replace(".", "/") if self.package else None


def read_pyproject(root: Path) -> dict:
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def find_root(start: Path, name: str) -> Path | None:
    """The nearest directory above ``start`` whose pyproject names distribution ``name``."""
    for d in [start, *start.parents]:
        if (d / "pyproject.toml").is_file():
            try:
                project = read_pyproject(d).get("project", {})
            except (OSError, ValueError):
                return None
            return d if normalize(project.get("name", "")) == normalize(name) else None
    return None


def package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).resolve()


@contextlib.contextmanager
def _all_families():
    """Load every family regardless of the allow/block variables: the audit covers all."""
    saved = {k: os.environ.pop(k) for k in (ENV_ONLY, ENV_SKIP) if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _family_dist(loaded, root: Path | None, name: str) -> Distribution:
    fam = loaded.family
    pdir = None
    if root is not None:
        rel = Path(*fam.package.split("."))
        for cand in (root / "src" / rel, root / rel):
            if cand.is_dir():
                pdir = cand.resolve()
                break
    if pdir is None:
        pdir = package_dir(fam.package)
    plugin = getattr(loaded.plugin, "__file__", None)
    return Distribution(normalize(name), root, fam.license, "family", fam.name, fam.package,
                        pdir, Path(plugin).resolve() if plugin else None)


def discover(repo: Repo, eps=None) -> tuple[list[Distribution], list[Finding]]:
    """Every distribution of the checkout plus every installed family; and load failures."""
    findings: list[Finding] = []
    dists: list[Distribution] = []
    with _all_families():
        _, loaded, broken = load_families(eps, strict=False)
    for b in broken:
        findings.append(Finding("family-broken", b.distribution, f"family {b.name!r} failed to "
                                "load; its license policy cannot be read", "", b.error))
    for lf in loaded:
        pdir = package_dir(lf.family.package)
        root = find_root(pdir, lf.distribution) if pdir else None
        if root is not None:
            root = root.resolve()
        dists.append(_family_dist(lf, root, lf.distribution))
    core_dir = Path(__file__).resolve().parent.parent
    core_root = find_root(core_dir, CORE_DISTRIBUTION)
    dists.append(Distribution(CORE_DISTRIBUTION, core_root.resolve() if core_root else None,
                              CORE_POLICY, "core", None, CORE_PACKAGE, core_dir))
    # The checkout's own pyproject distributions not covered by an installed one.
    covered = {d.root for d in dists if d.root is not None}
    for rel in sorted(f for f in repo.files if f.rsplit("/", 1)[-1] == "pyproject.toml"):
        root = (repo.root / rel).parent.resolve()
        if root in covered:
            continue
        try:
            data = read_pyproject(root)
        except (OSError, ValueError) as e:
            findings.append(Finding("pyproject", rel, "cannot read pyproject.toml", "", str(e)))
            continue
        project = data.get("project")
        if not project or not project.get("name"):
            continue
        name = normalize(project["name"])
        eps_table = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
        dists = [d for d in dists if not (d.name == name and d.root is None)]
        if name == CORE_DISTRIBUTION:
            dists = [d for d in dists if d.name != name]
            dists.append(Distribution(name, root, CORE_POLICY, "core", None, CORE_PACKAGE,
                                      root / "src" / "tirx_kernels" / "core"))
        elif eps_table:
            dists = [d for d in dists if d.name != name]
            src = root / "src" if (root / "src").is_dir() else root
            if str(src) not in sys.path:
                sys.path.insert(0, str(src))
            importlib.invalidate_caches()
            local = [EntryPoint(n, v, ENTRY_POINT_GROUP) for n, v in eps_table.items()]
            with _all_families():
                _, got, bad = load_families(local, strict=False)
            for b in bad:
                findings.append(Finding("family-broken", rel, f"family {b.name!r} failed to "
                                        "load from the checkout", "", b.error))
            dists.extend(_family_dist(lf, root, name) for lf in got)
        else:
            deps = [normalize(re.split(r"[\s;<>=!~\[(@]", d, maxsplit=1)[0])
                    for d in project.get("dependencies", [])]
            dists.append(Distribution(name, root, CORE_POLICY, "other", dependencies=deps))
    dists.sort(key=lambda d: (d.kind != "core", d.kind == "other", d.name))
    return dists, findings
