# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What a family registers, found by convention so no family writes its own loop.

Kernel modules are the public modules of the package's ``kernels/`` folder (helpers are
private, ``_rms_common.py``); suite files are ``suite/*.yaml``. A plugin that implements
neither registration hook gets both from its ``Family.package`` (:func:`kernels_of`,
:func:`suite_files_of`); one that does may call the helpers below for other folders.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

NOT_KERNELS = frozenset({"plugin", "ops"})  # public modules of a family that are not kernels


def register_kernel_modules(
    register: Callable[[str], None],
    package: str,
    directory: Path,
    exclude: frozenset[str] = NOT_KERNELS,
) -> None:
    """``register("<package>.<module>")`` for every public module in ``directory``."""
    for path in sorted(Path(directory).glob("[!_]*.py")):
        if path.stem not in exclude:
            register(f"{package}.{path.stem}")


def register_suite_files(register: Callable[[Path], None], directory: Path) -> None:
    """``register(path)`` for every ``*.yaml`` in ``directory``."""
    for path in sorted(Path(directory).glob("*.yaml")):
        register(path)


def package_dir(package: str) -> Path:
    """The folder of an importable package (imports its parents, not the package's modules)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"family package {package!r} cannot be found")
    return Path(list(spec.submodule_search_locations)[0])


def kernels_of(family, register: Callable[[str], None], **_) -> None:
    """The default ``tirx_kernels_register_kernels``: ``<package>/kernels/*.py``."""
    directory = package_dir(family.package) / "kernels"
    register_kernel_modules(register, f"{family.package}.kernels", directory)


def suite_files_of(family, register: Callable[[Path], None], **_) -> None:
    """The default ``tirx_kernels_suite_configs``: ``<package>/suite/*.yaml``."""
    register_suite_files(register, package_dir(family.package) / "suite")
