# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Helpers of the installed-distribution license tests: a third-party family repository
written from the README, wheel builds, and a fresh virtual environment holding only the
built wheels plus the few libraries the ``tirx-license`` CLI imports (copied from this
environment, so no index or network is needed)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tirx_kernels.core.license.spdx import native_header

ROOT = Path(__file__).resolve().parents[2]
# What `import tirx_kernels.core.license.cli` needs besides the standard library, and what
# `tirx-license sbom` adds (core's [sbom] extra; its own dependencies are followed).
CLI_DEPENDENCIES = ("pluggy", "license-expression", "boolean.py", "spdx-tools")
ACME_HOLDER = "Acme Corp"


def acme_header() -> str:
    return "\n".join(native_header(ACME_HOLDER)) + "\n"


def apache_text() -> str:
    """The Apache-2.0 text alone: this repository's LICENSE without its component map."""
    text = (ROOT / "LICENSE").read_text()
    end = text.index("limitations under the License.") + len("limitations under the License.")
    return text[:end] + "\n"


def write_acme(root: Path, plugin_body: str | None = None) -> Path:
    """``tirx-kernels-acme`` in its own git repository, as a third party writes it."""
    pkg = root / "src/tirx_kernels/acme"
    pkg.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["hatchling>=1.27"]
        build-backend = "hatchling.build"

        [project]
        name = "tirx-kernels-acme"
        version = "1.2.0"
        license = "Apache-2.0"
        license-files = ["LICENSE", "NOTICE"]
        dependencies = ["tirx-kernels-core"]

        [project.entry-points.tirx_kernels]
        acme = "tirx_kernels.acme.plugin"

        [tool.hatch.build.targets.wheel]
        only-include = ["src/tirx_kernels/acme"]
        sources = ["src"]
        """)
    )
    (root / "LICENSE").write_text(apache_text())
    (root / "NOTICE").write_text(f"tirx-kernels-acme\nCopyright {ACME_HOLDER}\n")
    (pkg / "__init__.py").write_text(acme_header() + '"""Acme kernels."""\n')
    (pkg / "rms.py").write_text(acme_header() + '"""An Acme kernel."""\n\nSCALE = 2\n')
    (pkg / "plugin.py").write_text(
        acme_header()
        + (
            plugin_body
            or textwrap.dedent('''\
        """The acme family."""

        from tirx_kernels.core import Family, LicensePolicy, hookimpl


        @hookimpl
        def tirx_kernels_family():
            return Family(name="acme", category="acme", package=__package__,
                          license=LicensePolicy(expression="Apache-2.0",
                                                copyright_holder="Acme Corp"))
        ''')
        )
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], cwd=root, check=True)
    subprocess.run(git + ["add", "-A"], cwd=root, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "acme"], cwd=root, check=True)
    return root


def build_wheel(project: Path, out: Path) -> Path:
    target = (out / project.name).resolve()
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(target)],
        cwd=project,
        check=True,
        capture_output=True,
    )
    [wheel] = target.glob("*.whl")
    return wheel


def make_venv(where: Path, wheels: list[Path]) -> Path:
    """A fresh venv with ``wheels`` pip-installed (no index, no dependencies resolved)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            *map(str, wheels),
        ],
        check=True,
        capture_output=True,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for name in dependency_closure(CLI_DEPENDENCIES):
        dist = importlib.metadata.distribution(name)
        for f in dist.files or ():
            if f.as_posix().startswith("..") or "__pycache__" in f.parts:
                continue
            target = site / f
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dist.locate_file(f), target)
    return where


def dependency_closure(names) -> list[str]:
    """``names`` and everything they require in this environment (extras left out)."""
    from packaging.requirements import Requirement

    seen: dict[str, None] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = None
        for raw in importlib.metadata.distribution(name).requires or ():
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen)


def run_cli(venv: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TIRX_KERNELS_FAMILIES", "TIRX_KERNELS_DISABLE")
    }
    return subprocess.run(
        [str(venv / "bin" / "tirx-license"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
