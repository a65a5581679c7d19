# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The kernel-module protocol: what a registered kernel module exposes, checked on load.

A kernel module is the contract only: metadata, config matrices and the functions the
runner calls. Its public PyTorch ops (``torch.ops.tirx_kernels.<name>``, declared with
:func:`tirx_kernels.core.ops.public_op`) are named in ``PUBLIC_OPS``; the schedule, the
TIRx kernels and the op itself live in their own modules. Documented in core/README.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from .meta import strip_label

# keyword options every run_bench receives from tirx-run/tirx-suite (timer ones only if given)
BENCH_OPTIONS = ("warmup", "repeat", "timer", "rounds", "cooldown_s")


@runtime_checkable
class KernelModule(Protocol):
    """Required members. Optional: ``BENCH_CONFIGS: list[dict]`` (the bench matrix; default
    ``CONFIGS``), ``run_bench(**config, warmup, repeat, timer, rounds, cooldown_s) -> dict``
    and ``public_calls(batch) -> {name: call}`` (zero-argument calls of the public op, as
    "tirx", and of each reference's user-facing op at ``batch`` rows, for
    :mod:`tirx_kernels.core.overhead`).
    """

    KERNEL_META: dict[str, Any]
    CONFIGS: list[dict[str, Any]]
    # names of the module's public ops in the ``tirx_kernels`` torch namespace; () for none
    PUBLIC_OPS: tuple[str, ...]

    def get_kernel(self, **config: Any) -> Any:
        """The TIRx PrimFunc (or a list of them) one config compiles."""

    def prepare_data(self, **config: Any) -> Any:
        """Deterministic inputs for one config (allocated before any timed closure)."""

    def run_test(self, **config: Any) -> None:
        """Compile, launch, validate; AssertionError on mismatch, SkipTest when unable."""


class ProtocolError(TypeError):
    """A kernel module breaks the protocol; the message names the module and the member."""


def validate_module(
    module: ModuleType,
    configs: Sequence[dict[str, Any]],
    bench_configs: Sequence[dict[str, Any]] | None = None,
) -> None:
    """Raise ProtocolError unless ``module`` implements :class:`KernelModule` for its configs.

    Checks presence and kind of every member, that each function accepts every key of every
    config it is called with, and that each name in ``PUBLIC_OPS`` is a registered op.
    """
    where = module.__name__
    for name in ("KERNEL_META", "CONFIGS", "PUBLIC_OPS"):
        if not hasattr(module, name):
            raise ProtocolError(f"{where}: missing required member {name}")
    _check_type(where, "KERNEL_META", module.KERNEL_META, dict)
    _check_type(where, "CONFIGS", module.CONFIGS, list)
    if hasattr(module, "BENCH_CONFIGS"):
        _check_type(where, "BENCH_CONFIGS", module.BENCH_CONFIGS, list)
    _check_public_ops(where, module.PUBLIC_OPS)
    for name in ("get_kernel", "prepare_data", "run_test"):
        _check_accepts(where, name, getattr(module, name, None), configs)
    if hasattr(module, "public_calls"):
        _check_accepts(where, "public_calls", module.public_calls, [{"batch": 1}])
    if hasattr(module, "run_bench"):
        bench = list(bench_configs if bench_configs is not None else configs)
        _check_accepts(where, "run_bench", module.run_bench, bench, extra=BENCH_OPTIONS)


def _check_type(where: str, name: str, value: object, kind: type) -> None:
    if not isinstance(value, kind):
        got = type(value).__name__
        raise ProtocolError(f"{where}: {name} must be a {kind.__name__}, got {got}")


def _check_accepts(
    where: str,
    name: str,
    func: Callable[..., Any] | None,
    configs: Sequence[dict[str, Any]],
    extra: Sequence[str] = (),
) -> None:
    if func is None:
        raise ProtocolError(f"{where}: missing required function {name}(**config)")
    if not callable(func):
        raise ProtocolError(f"{where}: {name} must be a function, got {type(func).__name__}")
    params = inspect.signature(func).parameters.values()
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required = {
        p.name
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    for config in configs:
        keys = set(strip_label(config)) | set(extra)
        unknown = sorted(keys - named) if not takes_any else []
        missing = sorted(required - keys)
        label = config.get("label", "?")
        if unknown:
            raise ProtocolError(
                f"{where}: {name}() does not accept {', '.join(unknown)} of config {label!r}; "
                "add the parameters or a **kwargs catch-all"
            )
        if missing:
            raise ProtocolError(
                f"{where}: {name}() requires {', '.join(missing)}, which config {label!r} "
                "does not give; add them to the config or give them defaults"
            )


def _check_public_ops(where: str, names: object) -> None:
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        raise ProtocolError(f"{where}: PUBLIC_OPS must be a tuple of op names, got {names!r}")
    if not names:
        return
    from .ops import NAMESPACE, is_registered  # imports torch: only for modules with ops

    for name in names:
        if not is_registered(name):
            raise ProtocolError(
                f"{where}: PUBLIC_OPS names {name!r} but torch.ops.{NAMESPACE}.{name} is not "
                "registered; declare it with tirx_kernels.core.ops.public_op in a module the "
                "kernel module imports"
            )
