# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Lazy public names of a family package (PEP 562), so that listing kernels, which imports
the package, imports neither torch nor the compiler.

In a family's ``__init__.py``::

    _PUBLIC = {"rmsnorm": "norm"}  # public name -> op module of this package
    __all__ = sorted(_PUBLIC)
    __getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    package: str, public: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``public`` is
    read from its op module ``<package>.<module>`` on first use and cached in
    ``namespace`` (the package's ``globals()``); other names are AttributeError."""

    def __getattr__(name: str) -> Any:
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __getattr__, __dir__
