# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Load kernel families from the ``tirx_kernels`` entry-point group, each in isolation.

pluggy's own ``load_setuptools_entrypoints`` stops at the first broken plugin; here every
entry point is imported and validated inside its own guard, so a broken family is reported
(name, distribution, error) and skipped while the others keep working. Strict mode
(``--strict`` or ``TIRX_KERNELS_STRICT=1``) turns a broken family into an error.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points  # Python >= 3.10: ep.dist, group=
from types import ModuleType
from typing import Any

import pluggy

from . import defaults, hookspecs
from .family import Family

ENTRY_POINT_GROUP = "tirx_kernels"
ENV_STRICT = "TIRX_KERNELS_STRICT"
ENV_ONLY = "TIRX_KERNELS_FAMILIES"  # comma-separated allowlist of entry-point names
ENV_SKIP = "TIRX_KERNELS_DISABLE"  # comma-separated blocklist of entry-point names


class PluginError(RuntimeError):
    """A family failed to load in strict mode, or a conflict no mode can resolve."""


@dataclass(frozen=True)
class LoadedFamily:
    family: Family
    plugin: ModuleType
    distribution: str
    version: str


@dataclass(frozen=True)
class BrokenFamily:
    name: str  # entry-point name
    distribution: str
    error: str


def strict_from_env() -> bool:
    return os.environ.get(ENV_STRICT, "").strip().lower() in {"1", "true", "yes", "on"}


def _name_set(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def selected(names: Iterable[str]) -> list[str]:
    """Apply the allowlist/blocklist environment variables to entry-point names."""
    only, skip = _name_set(ENV_ONLY), _name_set(ENV_SKIP) or set()
    return [n for n in names if (only is None or n in only) and n not in skip]


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "?", "?"
    return dist.metadata["Name"], dist.version


def new_plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(defaults, name="tirx_kernels.core.defaults")
    return pm


def load_families(
    eps: Iterable[EntryPoint] | None = None, *, strict: bool | None = None
) -> tuple[pluggy.PluginManager, list[LoadedFamily], list[BrokenFamily]]:
    """Import every selected family plugin; return the manager, the good and the broken."""
    strict = strict_from_env() if strict is None else strict
    if eps is None:
        eps = entry_points(group=ENTRY_POINT_GROUP)
    eps = sorted(eps, key=lambda ep: ep.name)
    wanted = set(selected(ep.name for ep in eps))
    pm = new_plugin_manager()
    loaded: list[LoadedFamily] = []
    broken: list[BrokenFamily] = []
    claimed: dict[str, tuple[str, str]] = {}  # family name -> (distribution, plugin module)
    for ep in eps:
        if ep.name not in wanted:
            continue
        dist, version = _distribution(ep)
        # family names are global, like kernel names: a second claim would hide the first
        if ep.name in claimed:
            first, first_module = claimed[ep.name]
            raise PluginError(
                f"family name {ep.name!r} is declared twice: by {first} ({first_module}) and "
                f"by {dist} ({ep.value}); fix: uninstall one of the two distributions"
            )
        claimed[ep.name] = (dist, ep.value)
        try:
            plugin = ep.load()
            family = _declared_family(plugin, ep.name)
            pm.register(plugin, name=f"family:{family.name}")
        except Exception as e:  # isolation: one broken family must not stop the others
            message = f"{type(e).__name__}: {e}"
            if strict:
                raise PluginError(
                    f"family {ep.name!r} from {dist} failed to load: {message}"
                ) from e
            broken.append(BrokenFamily(ep.name, dist, message))
            if os.environ.get("TIRX_KERNELS_DEBUG"):
                traceback.print_exc()
            continue
        loaded.append(LoadedFamily(family, plugin, dist, version))
    return pm, loaded, broken


def _declared_family(plugin: ModuleType, ep_name: str) -> Family:
    declare = getattr(plugin, "tirx_kernels_family", None)
    if declare is None:
        raise PluginError(f"{plugin.__name__} does not implement tirx_kernels_family()")
    family = declare()
    if not isinstance(family, Family):
        raise PluginError(
            f"{plugin.__name__}.tirx_kernels_family() must return a Family, "
            f"got {type(family).__name__}"
        )
    if family.name != ep_name:
        raise PluginError(
            f"entry point {ep_name!r} declares family {family.name!r}; name them the same"
        )
    return family


def call_for(
    *,
    pm: pluggy.PluginManager,
    plugin: ModuleType,
    hook: str,
    default: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Call one plugin's implementation of a contribution hook; ``default(**kwargs)`` (or
    None) when the plugin has none.

    Contributions are attributed to their family: pluggy's ``get_hookimpls()`` finds the
    implementation the plugin registered, whose ``argnames`` (checked against the hookspec
    at registration) select the arguments it accepts.
    """
    for impl in getattr(pm.hook, hook).get_hookimpls():
        if impl.plugin is plugin:
            return impl.function(**{name: kwargs[name] for name in impl.argnames})
    return default(**kwargs) if default is not None else None
