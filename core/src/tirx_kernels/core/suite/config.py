# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Suite YAML -> workloads, validated completely before anything runs.

A family ships one file per kernel::

    kernel: rmsnorm
    defaults: {num_gpus: 1}          # optional: timer, warmup, repeat, num_gpus
                                     # (num_gpus defaults to KERNEL_META's, else 1)
    configs:
      - {config: bf16_t4113_h4096, default: true}
      - {config: bf16_t128_h4096, default: false, timer: event}

``--workloads FILE`` takes instead a flat ``workloads:`` list whose entries each name their
``kernel`` (``default`` optional there). Every problem is collected and reported with the
file, the entry and the fix; the CLI then exits 2 and runs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

TIMERS = ("proton", "event", "cudagraph_proton", "kineto")
OVERRIDE_KEYS = ("timer", "warmup", "repeat", "num_gpus")


class ConfigError(Exception):
    """One or more invalid suite files; ``problems`` holds one message per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Workload:
    kernel: str
    config: str  # a label of the kernel's bench matrix
    family: str
    default: bool = True
    num_gpus: int = 1
    timer: str | None = None
    warmup: float | None = None
    repeat: float | None = None
    source: str = ""  # "<file>: configs[i]", for messages

    @property
    def key(self) -> tuple[str, str]:
        return (self.kernel, self.config)

    def bench_options(self, rounds: int, cooldown_s: float) -> dict:
        """The worker's options: timer/warmup/repeat only when configured (timer defaults)."""
        options = {"rounds": rounds, "cooldown_s": cooldown_s}
        for name in ("timer", "warmup", "repeat"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        return options


class _AliasRefused(yaml.YAMLError):
    def __init__(self, anchor: str, line: int):
        self.anchor, self.line = anchor, line
        super().__init__(f"alias *{anchor} at line {line}")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last) and
    every alias: nested aliases expand exponentially (a 400-byte "billion laughs" file is
    gigabytes once expanded), and a suite file has no need for them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _AliasRefused(event.anchor, event.start_mark.line + 1)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, f"unhashable key {key!r}", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_yaml(path: Path, problems: list[str]):
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_StrictLoader)
    except OSError as e:
        problems.append(f"{path}: cannot read: {e}")
    except UnicodeDecodeError as e:
        problems.append(
            f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); fix: save the file as UTF-8"
        )
    except _AliasRefused as e:
        problems.append(
            f"{path}: line {e.line}: YAML aliases (*{e.anchor}) are not allowed in "
            "suite files; fix: write the value out in full"
        )
    except yaml.YAMLError as e:
        detail = " ".join(str(e).split())
        problems.append(f"{path}: malformed YAML: {detail}; fix: correct the YAML syntax")
    return None


def load_suite(files, kernels: Mapping) -> list[Workload]:
    """Workloads of every family suite file ``[(family, path)]``; ``kernels`` maps name ->
    kernel (``.family``, ``.bench_labels``). Raises ConfigError listing every problem."""
    problems: list[str] = []
    workloads: list[Workload] = []
    owner: dict[str, Path] = {}
    for family, path in files:
        data = read_yaml(path, problems)
        if data is None and not problems:
            problems.append(f"{path}: empty file; fix: write `kernel:` and `configs:`")
        if data is None:
            continue
        found = _kernel_file(Path(path), family, data, kernels, problems)
        if found is None:
            continue
        kernel, entries = found
        if kernel in owner:
            problems.append(
                f"{path}: kernel {kernel!r} already has a suite file ({owner[kernel]}); "
                "fix: keep one file per kernel"
            )
            continue
        owner[kernel] = Path(path)
        workloads.extend(entries)
    if problems:
        raise ConfigError(problems)
    return workloads


def load_workloads_file(path: Path, kernels: Mapping) -> list[Workload]:
    """Workloads of a ``--workloads`` file (flat list, each entry names its kernel)."""
    problems: list[str] = []
    data = read_yaml(path, problems)
    entries: list[Workload] = []
    if data is not None or not problems:
        if not isinstance(data, dict):
            problems.append(
                f"{path}: expected a mapping with a `workloads:` list; "
                "fix: start the file with `workloads:`"
            )
        else:
            _unknown_keys(f"{path}", data, ("workloads", "defaults"), problems)
            shape = "{kernel: ..., config: ...}"
            entries = _entries(path, data, "workloads", shape, kernels, None, problems) or []
    if problems:
        raise ConfigError(problems)
    return entries


def _kernel_file(path, family, data, kernels, problems):
    if not isinstance(data, dict):
        problems.append(
            f"{path}: expected a mapping with `kernel:` and `configs:`, got {type(data).__name__}"
        )
        return None
    _unknown_keys(str(path), data, ("kernel", "defaults", "configs"), problems)
    name = data.get("kernel")
    if not isinstance(name, str) or not name:
        problems.append(
            f"{path}: missing `kernel: <name>`; fix: name the kernel this file configures"
        )
        return None
    kernel = kernels.get(name)
    if kernel is None:
        problems.append(
            f"{path}: unknown kernel {name!r}; fix: use a registered kernel name "
            f"({_listing(kernels)})"
        )
        return None
    if family is not None and kernel.family != family:
        problems.append(
            f"{path}: kernel {name!r} belongs to family {kernel.family!r}, not "
            f"{family!r}; fix: move the file to the kernel's own family"
        )
        return None
    shape = "{config: <label>, default: true|false}"
    entries = _entries(path, data, "configs", shape, kernels, name, problems)
    return None if entries is None else (name, entries)


def _entries(path, data, key, shape, kernels, kernel_name, problems) -> list[Workload] | None:
    """The workloads of the ``key`` list of a file's mapping ``data`` (its ``defaults:``
    applied to each), duplicates reported; None when ``key`` is not a non-empty list.
    ``kernel_name`` is the kernel of a family's file, None for a ``workloads:`` file."""
    defaults = _overrides(
        f"{path}: defaults", data.get("defaults", {}), problems, only_overrides=True
    )
    items = data.get(key)
    if not isinstance(items, list) or not items:
        problems.append(f"{path}: `{key}` must be a non-empty list of {shape} entries")
        return None
    entries = []
    for i, item in enumerate(items):
        w = _entry(
            f"{path}: {key}[{i}]",
            item,
            defaults,
            kernels,
            kernel_name,
            problems,
            workloads_file=kernel_name is None,
        )
        if w is not None:
            entries.append(w)
    _duplicates(entries, problems)
    return entries


def _entry(where, item, defaults, kernels, kernel_name, problems, workloads_file=False):
    if not isinstance(item, dict):
        problems.append(
            f"{where}: expected a mapping like {{config: <label>, default: true}}, got {item!r}"
        )
        return None
    before = len(problems)
    allowed = ("config", "default", *OVERRIDE_KEYS) + (("kernel",) if workloads_file else ())
    label = item.get("config")
    if isinstance(label, str):
        where = f"{where} (config: {label})"
    _unknown_keys(where, item, allowed, problems)
    if workloads_file:
        kernel_name = item.get("kernel")
        if not isinstance(kernel_name, str) or kernel_name not in kernels:
            what = "missing `kernel`" if kernel_name is None else f"unknown kernel {kernel_name!r}"
            problems.append(
                f"{where}: {what}; fix: use a registered kernel name ({_listing(kernels)})"
            )
            return None
    kernel = kernels[kernel_name]
    labels = ", ".join(kernel.bench_labels)
    if not isinstance(label, str) or not label:
        problems.append(
            f"{where}: missing `config: <label>`; fix: name a bench label of "
            f"{kernel_name!r} ({labels})"
        )
    elif label not in kernel.bench_labels:
        problems.append(
            f"{where}: unknown label {label!r} for kernel {kernel_name!r}; fix: use "
            f"one of its bench labels ({labels})"
        )
    default = item.get("default", True if workloads_file else None)
    if not isinstance(default, bool):
        what = (
            "missing `default`"
            if default is None
            else f"`default` must be true or false, got {default!r}"
        )
        problems.append(
            f"{where}: {what}; fix: add `default: true` (part of the default sweep) "
            "or `default: false`"
        )
    # a multi-GPU kernel's KERNEL_META num_gpus is the default; the YAML may override it
    meta = getattr(kernel, "meta", None) or {}
    merged = {"num_gpus": meta.get("num_gpus", 1), **defaults, **_overrides(where, item, problems)}
    _timer_settings(where, merged, problems)
    if len(problems) > before:
        return None
    return Workload(kernel_name, label, kernel.family, default, source=where, **merged)


def _overrides(where, data, problems, *, only_overrides=False) -> dict:
    """Validated overrides (timer, warmup, repeat, num_gpus) found in ``data``."""
    if not isinstance(data, dict):
        problems.append(f"{where}: expected a mapping of {', '.join(OVERRIDE_KEYS)}, got {data!r}")
        return {}
    if only_overrides:
        _unknown_keys(where, data, OVERRIDE_KEYS, problems)
    out = {}
    for key in OVERRIDE_KEYS:
        if key not in data:
            continue
        value = data[key]
        # YAML has .nan and .inf: a NaN budget passes every comparison
        number = (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
        if key == "timer" and value not in TIMERS:
            fix = f"one of {', '.join(TIMERS)}"
        elif key == "num_gpus" and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            fix = "an integer >= 1"
        elif key == "warmup" and (not number or value < 0):
            fix = "a finite number of milliseconds >= 0"
        elif key == "repeat" and (not number or value <= 0):
            fix = "a finite number of milliseconds > 0"
        else:
            out[key] = value
            continue
        problems.append(f"{where}: bad {key}: {value!r}; fix: use {fix}")
    return out


def _timer_settings(where, merged, problems) -> None:
    timer = merged.get("timer")
    budgets = [k for k in ("warmup", "repeat") if k in merged]
    distributed = merged.get("num_gpus", 1) > 1
    if timer is not None and distributed and timer != "kineto":
        problems.append(
            f"{where}: timer {timer} cannot time a {merged['num_gpus']}-GPU "
            "workload; fix: use timer kineto or leave timer out"
        )
    if timer == "kineto" and not distributed:
        problems.append(
            f"{where}: timer kineto times only multi-GPU workloads; fix: use "
            "proton, event or cudagraph_proton, or leave timer out"
        )
    if timer in ("kineto", "cudagraph_proton") and budgets:
        problems.append(
            f"{where}: timer {timer} takes no {'/'.join(budgets)} budget (it uses "
            f"its own fixed schedule); fix: drop {', '.join(budgets)}"
        )


def _unknown_keys(where, data, allowed, problems) -> None:
    for k in data:
        if k not in allowed:
            problems.append(f"{where}: unknown key {k!r}; fix: use only {', '.join(allowed)}")


def _duplicates(entries: list[Workload], problems: list[str]) -> None:
    seen: dict[tuple[str, str], Workload] = {}
    for w in entries:
        if w.key in seen:
            problems.append(
                f"{w.source}: duplicate entry for kernel {w.kernel!r} config "
                f"{w.config!r} (first at {seen[w.key].source}); fix: keep one"
            )
        else:
            seen[w.key] = w


def _listing(kernels: Mapping) -> str:
    names = sorted(kernels)
    return "installed: " + (", ".join(names) if names else "none")
