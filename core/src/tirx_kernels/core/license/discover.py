# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Which distributions to audit: core, every family plugin, and other pyproject distributions.

Families come from the installed ``tirx_kernels`` entry points. A distribution has one of
two sources: a source tree (the directory holding its ``pyproject.toml``, found upwards from
the family's package directory: a checkout or an editable install) inside a home repository
whose root files it is checked against; or, without one, what pip installed (its
``.dist-info``: METADATA, RECORD, licenses/). A broken family is a distribution too: its
load error is what the audit reports.

The checkout (a git top level, or ``--root``) adds its own pyproject distributions that are
not installed, loaded from their ``pyproject.toml`` entry points with ``src`` on
``sys.path``, so the audit also works in a bare environment (the pre-commit hook). Outside a
checkout nothing is walked: only what is installed is audited.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
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

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

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
    def find(cls, root: Path | None = None) -> Repo | None:
        """The checkout: ``root`` (its git top level, else the folder itself), or the git top
        level of the current folder; None outside a checkout (never a walk of the cwd)."""
        start = Path(root or os.getcwd()).resolve()
        top = git_top(start)
        if top is None:
            return cls(start, walk(start), False) if root is not None else None
        if root is not None and top != start:
            return cls(start, walk(start), False)
        return cls.of_git(top)

    @classmethod
    def of_git(cls, top: Path) -> Repo:
        listed = (
            subprocess.run(["git", "ls-files", "-z"], cwd=top, capture_output=True, check=True)
            .stdout.decode("utf-8", "replace")
            .split("\0")
        )
        return cls(top, [f for f in listed if f and (top / f).is_file()], True)

    @classmethod
    def containing(cls, directory: Path) -> Repo:
        """The repository holding a source tree: its git top level, else the tree itself."""
        top = git_top(directory)
        return cls.of_git(top) if top is not None else cls(directory, walk(directory), False)

    def under(self, directory: Path) -> list[str]:
        """Files of the repo below ``directory`` (relative to the repo root)."""
        try:
            prefix = directory.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return []
        if prefix == ".":
            return list(self.files)
        return [f for f in self.files if f.startswith(prefix + "/")]


def git_top(start: Path) -> Path | None:
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=start,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return Path(top).resolve() if top else None


_SKIP_DIRS = {
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    "build",
    "dist",
    ".pytest_cache",
    ".ruff_cache",
    ".device",
    ".scratch",
    ".bench-suite",
    "node_modules",
}


def walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
        )
        for name in sorted(filenames):
            out.append((Path(dirpath) / name).relative_to(root).as_posix())
    return out


@dataclass
class Distribution:
    """One distribution to audit. ``kind``: "core", "family", "other" (meta etc.) or
    "broken" (a family that failed to load: no policy, ``error`` says why)."""

    name: str
    root: Path | None  # directory holding pyproject.toml; None: not a source tree
    policy: LicensePolicy | None
    kind: str = "family"
    family: str | None = None
    package: str | None = None  # import package, e.g. tirx_kernels.basic
    package_dir: Path | None = None
    plugin_file: Path | None = None  # where the policy is declared
    dependencies: list[str] = field(default_factory=list)  # normalized names ("other" only)
    # What pip installed, when the audit reads that (no source tree): METADATA, RECORD.
    installed: importlib.metadata.Distribution | None = None
    home: Repo | None = None  # the repository holding the source tree (root-file rules)
    error: str | None = None  # kind "broken": why the family failed to load
    version: str | None = None

    @property
    def loaded_policy(self) -> LicensePolicy:
        """``policy`` of a distribution that has one (every kind but "broken")."""
        assert self.policy is not None, f"{self.name}: no license policy ({self.kind})"
        return self.policy

    def source(self, repo: Repo | None = None) -> str:
        """Where the audit reads this distribution from, in words."""
        if self.kind == "broken":
            return "broken"
        if self.root is not None:
            in_checkout = repo is not None and (
                self.root == repo.root or repo.root in self.root.parents
            )
            return "checkout" if in_checkout else f"source {self.root}"
        if self.installed is not None:
            return f"installed {self.installed.locate_file('')}"
        return "no source"

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


def installed_distribution(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


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
    installed = installed_distribution(name) if root is None else None
    return Distribution(
        normalize(name),
        root,
        fam.license,
        "family",
        fam.name,
        fam.package,
        pdir,
        Path(plugin).resolve() if plugin else None,
        installed=installed,
        version=loaded.version if loaded.version != "?" else None,
    )


def _broken(name: str, family: str, error: str, root: Path | None = None) -> Distribution:
    return Distribution(normalize(name), root, None, "broken", family, error=error)


def _requirement_names(requirements) -> list[str]:
    return [normalize(re.split(r"[\s;<>=!~\[(@]", r, maxsplit=1)[0]) for r in requirements or []]


def is_tirx_name(name: str) -> bool:
    return name == "tirx-kernels" or name.startswith("tirx-kernels-")


def _installed_rest(dists: list[Distribution]) -> tuple[list[Distribution], list[str]]:
    """Installed tirx-kernels distributions no plugin covered: the meta-distribution, and
    others named as skipped (no entry point, so no license policy to audit them by)."""
    known = {d.name for d in dists}
    found, skipped = [], []
    for inst in importlib.metadata.distributions():
        name = normalize(inst.metadata["Name"] or "")
        if not is_tirx_name(name) or name in known:
            continue
        known.add(name)
        deps = _requirement_names(inst.requires)
        if any(is_tirx_name(d) for d in deps):
            found.append(
                Distribution(
                    name,
                    None,
                    CORE_POLICY,
                    "other",
                    dependencies=deps,
                    installed=inst,
                    version=inst.version,
                )
            )
        else:
            skipped.append(
                f"{name}: installed, but declares no tirx_kernels family "
                "(no license policy to audit it by)"
            )
    return found, skipped


def discover(
    repo: Repo | None, eps=None, skipped: list[str] | None = None
) -> tuple[list[Distribution], list[Finding]]:
    """Every distribution of the checkout (``repo``; None: no checkout) plus every installed
    family and tirx-kernels distribution; and findings about the checkout's pyproject files.

    ``skipped`` (when given) receives a line per installed distribution left out, and why.
    """
    findings: list[Finding] = []
    dists: list[Distribution] = []
    with _all_families():
        _, loaded, broken = load_families(eps, strict=False)
    dists += [_broken(b.distribution, b.name, b.error) for b in broken]
    for lf in loaded:
        pdir = package_dir(lf.family.package)
        root = find_root(pdir, lf.distribution) if pdir else None
        if root is not None:
            root = root.resolve()
        dists.append(_family_dist(lf, root, lf.distribution))
    core_dir = Path(__file__).resolve().parent.parent
    core_root = find_root(core_dir, CORE_DISTRIBUTION)
    core_installed = installed_distribution(CORE_DISTRIBUTION) if core_root is None else None
    dists.append(
        Distribution(
            CORE_DISTRIBUTION,
            core_root.resolve() if core_root else None,
            CORE_POLICY,
            "core",
            None,
            CORE_PACKAGE,
            core_dir,
            installed=core_installed,
            version=core_installed.version if core_installed else None,
        )
    )
    if eps is None:  # the real environment: its other tirx-kernels distributions too
        rest, left_out = _installed_rest(dists)
        dists += rest
        if skipped is not None:
            skipped += left_out
    if repo is not None:
        dists, found = _checkout_distributions(repo, dists)
        findings += found
    homes: dict[Path, Repo] = {repo.root: repo} if repo is not None else {}
    for d in dists:
        if d.root is None:
            continue
        if d.version is None:
            d.version = _pyproject_version(d.root)
        if repo is not None and (d.root == repo.root or repo.root in d.root.parents):
            d.home = repo
        else:  # a source tree elsewhere (an editable install of another repository)
            top = git_top(d.root) or d.root
            if top not in homes:
                homes[top] = Repo.containing(d.root)
            d.home = homes[top]
    dists.sort(key=lambda d: (d.kind != "core", d.kind == "other", d.name))
    return dists, findings


def _pyproject_version(root: Path) -> str | None:
    try:
        version = read_pyproject(root).get("project", {}).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def _checkout_distributions(repo: Repo, dists: list[Distribution]):
    """The checkout's own pyproject distributions not covered by an installed one.

    Only tirx-kernels distributions count: core, a pyproject declaring family entry points,
    or a tirx-kernels meta-distribution; any other project in the checkout is not ours.
    """
    findings: list[Finding] = []
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
        if not isinstance(project, dict) or not project.get("name"):
            continue
        name = normalize(str(project["name"]))
        eps_table = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
        deps = _requirement_names(project.get("dependencies", []))
        if (
            name != CORE_DISTRIBUTION
            and not eps_table
            and not (is_tirx_name(name) and any(is_tirx_name(d) for d in deps))
        ):
            continue
        dists = [d for d in dists if not (d.name == name and d.root is None)]
        if name == CORE_DISTRIBUTION:
            dists = [d for d in dists if d.name != name]
            dists.append(
                Distribution(
                    name,
                    root,
                    CORE_POLICY,
                    "core",
                    None,
                    CORE_PACKAGE,
                    root / "src" / "tirx_kernels" / "core",
                )
            )
        elif eps_table:
            dists = [d for d in dists if d.name != name]
            src = root / "src" if (root / "src").is_dir() else root
            if str(src) not in sys.path:
                sys.path.insert(0, str(src))
            importlib.invalidate_caches()
            local = [EntryPoint(n, v, ENTRY_POINT_GROUP) for n, v in eps_table.items()]
            with _all_families():
                _, got, bad = load_families(local, strict=False)
            dists += [_broken(name, b.name, b.error, root) for b in bad]
            dists.extend(_family_dist(lf, root, name) for lf in got)
        else:
            dists.append(Distribution(name, root, CORE_POLICY, "other", dependencies=deps))
    return dists, findings
