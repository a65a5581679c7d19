# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The registry: every kernel of every installed family, read without importing kernels."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pluggy

from . import registration
from .meta import MetaError, read_module_info, validate_configs, validate_meta
from .plugins import (
    BrokenFamily,
    LoadedFamily,
    PluginError,
    call_for,
    load_families,
    strict_from_env,
)
from .protocol import validate_module


class RegistryError(RuntimeError):
    """A conflict between families that no loading mode resolves (e.g. a duplicate name)."""


class UnknownKernel(LookupError):
    pass


class UnknownConfig(LookupError):
    pass


def did_you_mean(name: str, choices: list[str]) -> str:
    """' (did you mean 'x'?)' for the closest of ``choices`` to a mistyped name, else ''."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Kernel:
    name: str
    family: str
    distribution: str
    module: str  # import path
    path: Path
    meta: dict
    configs: list[dict]
    bench_configs: list[dict] | None

    @property
    def archs(self) -> list[str]:
        return list(self.meta["archs"])

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.configs]

    @property
    def bench_matrix(self) -> list[dict]:
        """The bench matrix: ``BENCH_CONFIGS`` when the module has one, else ``CONFIGS``."""
        return self.bench_configs if self.bench_configs is not None else self.configs

    @property
    def bench_labels(self) -> list[str]:
        return [c["label"] for c in self.bench_matrix]

    def config(self, label: str, *, bench: bool = False) -> dict:
        matrix = self.bench_matrix if bench else self.configs
        for cfg in matrix:
            if cfg["label"] == label:
                return cfg
        which = "bench matrix" if bench else "CONFIGS"
        labels = [c["label"] for c in matrix]
        raise UnknownConfig(
            f"kernel {self.name!r} has no config {label!r} in its {which}"
            f"{did_you_mean(label, labels)}; available: {', '.join(labels)}"
        )

    def load(self) -> ModuleType:
        """Import the module and validate it against the kernel-module protocol.

        Raises MetaError when the runtime KERNEL_META differs from the literal one and
        ProtocolError when a member is missing or does not accept its configs.
        """
        module = importlib.import_module(self.module)
        runtime = getattr(module, "KERNEL_META", None)
        if runtime != self.meta:
            raise MetaError(
                f"{self.module}: KERNEL_META changed at import time "
                f"(literal {self.meta!r}, runtime {runtime!r}); keep it a constant"
            )
        validate_module(module, self.configs, self.bench_configs)
        return module

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "family": self.family,
            "distribution": self.distribution,
            "module": self.module,
            "compute_capability": self.meta["compute_capability"],
            "archs": self.archs,
            "configs": self.labels,
            "bench_configs": self.bench_labels,
        }


@dataclass
class Registry:
    pm: pluggy.PluginManager
    families: list[LoadedFamily]
    broken: list[BrokenFamily] = field(default_factory=list)
    kernels: dict[str, Kernel] = field(default_factory=dict)

    @classmethod
    def load(cls, eps=None, *, strict: bool | None = None) -> Registry:
        pm, families, broken = load_families(eps, strict=strict)
        registry = cls(pm, [], broken)
        for fam in families:
            try:
                kernels = _family_kernels(pm, fam)
            except Exception as e:  # isolation: e.g. a SyntaxError in one kernel file
                if strict_from_env() if strict is None else strict:
                    raise PluginError(
                        f"family {fam.family.name!r} from {fam.distribution} failed to "
                        f"validate: {type(e).__name__}: {e}"
                    ) from e
                if os.environ.get("TIRX_KERNELS_DEBUG"):
                    traceback.print_exc()
                registry.broken.append(
                    BrokenFamily(fam.family.name, fam.distribution, f"{type(e).__name__}: {e}")
                )
                pm.unregister(fam.plugin)
                continue
            registry.families.append(fam)
            for kernel in kernels:
                registry._add(kernel)
        return registry

    def _add(self, kernel: Kernel) -> None:
        other = self.kernels.get(kernel.name)
        if other is not None:
            raise RegistryError(
                f"kernel name {kernel.name!r} is defined twice: by {other.distribution} "
                f"({other.module}) and by {kernel.distribution} ({kernel.module}); names "
                "are global: rename one, or disable a family with TIRX_KERNELS_DISABLE"
            )
        self.kernels[kernel.name] = kernel

    def family(self, name: str) -> LoadedFamily:
        for fam in self.families:
            if fam.family.name == name:
                return fam
        names = [f.family.name for f in self.families]
        raise UnknownKernel(
            f"no family {name!r}{did_you_mean(name, names)}; "
            f"installed families: {', '.join(names) or 'none installed'}"
        )

    def get(self, name: str) -> Kernel:
        try:
            return self.kernels[name]
        except KeyError:
            names = sorted(self.kernels)
            raise UnknownKernel(
                f"no kernel {name!r}{did_you_mean(name, names)}; "
                f"installed kernels: {', '.join(names) or 'none installed'}"
            ) from None

    def select(self, kernels: Sequence[str] = (), families: Sequence[str] = ()) -> list[Kernel]:
        """The named kernels (default: all) of the named families (default: all)."""
        for family in families:
            self.family(family)  # an unknown family is an error naming those installed
        chosen = [self.get(n) for n in kernels] if kernels else list(self.kernels.values())
        if not families:
            return chosen
        for k in chosen:
            if kernels and k.family not in families:
                raise UnknownKernel(f"kernel {k.name!r} belongs to family {k.family!r}")
        return [k for k in chosen if k.family in families]

    def suite_files(self) -> list[tuple[str, Path]]:
        """(family, path) of every bench-suite YAML the families contribute."""
        files: list[tuple[str, Path]] = []
        for fam in self.families:
            found: list = []
            call_for(
                pm=self.pm,
                plugin=fam.plugin,
                hook="tirx_kernels_suite_configs",
                default=registration.suite_files_of,
                family=fam.family,
                register=found.append,
            )
            files.extend((fam.family.name, Path(p)) for p in found)
        return files


def _family_kernels(pm: pluggy.PluginManager, fam: LoadedFamily) -> list[Kernel]:
    paths: list[str] = []
    call_for(
        pm=pm,
        plugin=fam.plugin,
        hook="tirx_kernels_register_kernels",
        default=registration.kernels_of,
        family=fam.family,
        register=paths.append,
    )
    kernels = []
    for module in paths:
        spec = importlib.util.find_spec(module)  # imports parent packages only
        if spec is None or spec.origin is None:
            raise PluginError(f"registered kernel module {module!r} cannot be found")
        path = Path(spec.origin)
        where = f"{module} ({path})"
        info = read_module_info(path)
        validate_meta(info.meta, where=where, category=fam.family.category)
        validate_configs(info.configs, where=where, name="CONFIGS")
        if info.bench_configs is not None:
            validate_configs(info.bench_configs, where=where, name="BENCH_CONFIGS")
        kernels.append(
            Kernel(
                info.meta["name"],
                fam.family.name,
                fam.distribution,
                module,
                path,
                info.meta,
                info.configs,
                info.bench_configs,
            )
        )
    return kernels
