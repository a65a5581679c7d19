# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What a family's plugin registers, found by convention so no family writes its own loop.

Kernel modules are the public modules of the family's package (``rmsnorm.py``; helpers are
private, ``_norm.py``; ``plugin.py`` is the plugin); suite files are ``suite/*.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

NOT_KERNELS = frozenset({"plugin", "ops"})  # public modules of a family that are not kernels


def register_kernel_modules(register: Callable[[str], None], package: str, directory: Path,
                            exclude: frozenset[str] = NOT_KERNELS) -> None:
    """``register("<package>.<module>")`` for every public module in ``directory``."""
    for path in sorted(Path(directory).glob("[!_]*.py")):
        if path.stem not in exclude:
            register(f"{package}.{path.stem}")


def register_suite_files(register: Callable[[Path], None], directory: Path) -> None:
    """``register(path)`` for every ``*.yaml`` in ``directory``."""
    for path in sorted(Path(directory).glob("*.yaml")):
        register(path)
