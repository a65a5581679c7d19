# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Read and validate a kernel module's ``KERNEL_META`` and config matrices from its source.

Nothing here imports the kernel module (or torch, or the compiler): listing stays fast and
works on any machine. ``KERNEL_META`` must be a pure literal. ``CONFIGS`` and
``BENCH_CONFIGS`` may also be built from earlier module-level literals with comprehensions
(``[{"label": f"h{h}", "hidden": h} for h in HIDDEN]``); they are evaluated with no
builtins beyond a few pure ones, so they cannot import or call module code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REQUIRED_META = {"name": str, "category": str, "compute_capability": int, "archs": list}
OPTIONAL_META = {"description": str, "dtypes": list, "num_gpus": int}  # num_gpus: ranks, default 1
# config dtype values are torch's names, in every family (labels may abbreviate)
DTYPE_NAMES = frozenset(
    {
        "bfloat16",
        "float16",
        "float32",
        "float64",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "int8",
        "uint8",
        "int32",
        "int64",
    }
)
_ARCH = re.compile(r"^sm_(\d+)(\d)a?$")
_SAFE_BUILTINS = {
    "dict": dict,
    "list": list,
    "tuple": tuple,
    "range": range,
    "len": len,
    "zip": zip,
    "enumerate": enumerate,
    "min": min,
    "max": max,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "sorted": sorted,
    "True": True,
    "False": False,
    "None": None,
}


class MetaError(ValueError):
    """A kernel module's metadata or configs are invalid; the message says how to fix it."""


@dataclass(frozen=True)
class ModuleInfo:
    meta: dict
    configs: list[dict]
    bench_configs: list[dict] | None


def read_module_info(path: Path) -> ModuleInfo:
    """Statically evaluate ``KERNEL_META``, ``CONFIGS`` and ``BENCH_CONFIGS`` of ``path``."""
    namespace, failures, meta_node = _literal_namespace(Path(path))
    if meta_node is None:
        raise MetaError(f"{path}: no module-level KERNEL_META = {{...}} literal")
    try:
        meta = ast.literal_eval(meta_node)
    except ValueError as e:
        raise MetaError(
            f"{path}:{meta_node.lineno}: KERNEL_META must be a plain literal dict "
            f"(no names or calls) so it can be read without importing the module: {e}"
        ) from None
    for name in ("CONFIGS", "BENCH_CONFIGS"):
        if name in failures:
            raise MetaError(
                f"{path}: {name} is not statically evaluable ({failures[name]}); build it "
                "from literals and comprehensions over module-level literal constants only"
            )
    if "CONFIGS" not in namespace:
        raise MetaError(f"{path}: no module-level CONFIGS = [...]")
    return ModuleInfo(meta, namespace["CONFIGS"], namespace.get("BENCH_CONFIGS"))


def _literal_namespace(path: Path, depth: int = 0):
    """Module-level names of ``path`` whose values are static, in source order.

    ``from .sibling import NAME`` of a module in the same package is followed by path (the
    sibling is read, never imported), so families can share config tables.
    Returns (namespace, {name: why not static}, the KERNEL_META value node or None).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    namespace: dict = {}
    failures: dict[str, str] = {}
    meta_node = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level and depth < 4:
            _import_literals(path, node, namespace, failures, depth)
            continue
        target, value = _simple_assignment(node)
        if target is None:
            continue
        if target == "KERNEL_META":
            meta_node = value
        try:
            namespace[target] = _static_eval(value, namespace)
            failures.pop(target, None)
        except Exception as e:  # not statically evaluable: only a problem for names we need
            namespace.pop(target, None)
            why = str(e)
            if isinstance(e.__cause__, NameError) and e.__cause__.name in failures:
                why = f"{e.__cause__.name} is not static: {failures[e.__cause__.name]}"
            failures[target] = f"line {node.lineno}: {why}"
    return namespace, failures, meta_node


def _import_literals(path: Path, node: ast.ImportFrom, namespace, failures, depth) -> None:
    base = path.parent
    for _ in range(node.level - 1):
        base = base.parent
    parts = node.module.split(".") if node.module else []
    source = base.joinpath(*parts).with_suffix(".py") if parts else None
    if source is None or not source.is_file():
        return  # a package or a missing module: its names stay unknown
    other, other_failures, _ = _literal_namespace(source, depth + 1)
    for alias in node.names:
        name = alias.asname or alias.name
        if alias.name in other:
            namespace[name] = other[alias.name]
        else:
            why = other_failures.get(alias.name, "not a static module-level value")
            failures[name] = f"line {node.lineno}: {alias.name} of {source.name}: {why}"


def _simple_assignment(node):
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        if isinstance(node.targets[0], ast.Name):
            return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return node.target.id, node.value
    return None, None


def _static_eval(node, namespace):
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    for sub in ast.walk(node):  # no attribute access, no lambdas: pure data only
        if isinstance(sub, (ast.Attribute, ast.Lambda, ast.NamedExpr, ast.Await)):
            raise ValueError(f"uses {ast.unparse(sub)!r}")
        if isinstance(sub, ast.Call) and not (
            isinstance(sub.func, ast.Name) and sub.func.id in _SAFE_BUILTINS
        ):
            raise ValueError(f"calls {ast.unparse(sub.func)!r}")
    code = compile(ast.Expression(node), "<static>", "eval")
    try:
        # one globals dict: nested comprehension scopes look names up there, not in locals
        return eval(code, {**namespace, "__builtins__": _SAFE_BUILTINS})  # noqa: S307
    except NameError as e:
        raise ValueError(f"{e} (only earlier module-level literal constants are visible)") from e


def validate_meta(meta: dict, *, where: str, category: str | None = None) -> None:
    """Check keys, types, compute capability and archs; raise MetaError naming the fix."""
    if not isinstance(meta, dict):
        raise MetaError(f"{where}: KERNEL_META must be a dict")
    for key, typ in REQUIRED_META.items():
        if key not in meta:
            raise MetaError(f"{where}: KERNEL_META is missing required key {key!r}")
        if not isinstance(meta[key], typ) or isinstance(meta[key], bool):
            raise MetaError(
                f"{where}: KERNEL_META[{key!r}] must be {typ.__name__}, got {meta[key]!r}"
            )
    for key, typ in OPTIONAL_META.items():
        if key in meta and not isinstance(meta[key], typ):
            raise MetaError(f"{where}: KERNEL_META[{key!r}] must be {typ.__name__}")
    bad = [d for d in meta.get("dtypes", []) if d not in DTYPE_NAMES]
    if bad:
        raise MetaError(
            f"{where}: KERNEL_META['dtypes'] has {bad}, not torch dtype names; use "
            f"{', '.join(sorted(DTYPE_NAMES))}"
        )
    num_gpus = meta.get("num_gpus", 1)
    if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
        raise MetaError(
            f"{where}: KERNEL_META['num_gpus'] must be an int >= 1 (the ranks one config "
            f"runs on; omit it for a single-GPU kernel), got {num_gpus!r}"
        )
    unknown = set(meta) - set(REQUIRED_META) - set(OPTIONAL_META)
    if unknown:
        raise MetaError(f"{where}: KERNEL_META has unknown keys {sorted(unknown)}")
    if not re.match(r"^[a-z][a-z0-9_]*$", meta["name"]):
        raise MetaError(f"{where}: kernel name {meta['name']!r} must be lower_snake_case")
    if category is not None and meta["category"] != category:
        raise MetaError(
            f"{where}: KERNEL_META['category'] is {meta['category']!r} but the family's "
            f"category is {category!r}"
        )
    cc = meta["compute_capability"]
    if cc >= 20:
        raise MetaError(
            f"{where}: compute_capability {cc} looks like an SM number; write the major "
            f"version ({cc // 10} for SM{cc}), e.g. 9 for SM90 Hopper, 10 for SM100"
        )
    if cc < 7:
        raise MetaError(f"{where}: compute_capability {cc} is not a supported major version")
    archs = meta["archs"]
    if not archs or not all(isinstance(a, str) for a in archs):
        raise MetaError(f"{where}: KERNEL_META['archs'] must list exact archs, e.g. ['sm_90a']")
    for arch in archs:
        m = _ARCH.match(arch)
        if not m:
            raise MetaError(f"{where}: arch {arch!r} is not an exact arch such as 'sm_90a'")
        if int(m.group(1)) != cc:
            raise MetaError(f"{where}: arch {arch!r} does not belong to compute_capability {cc}")


def validate_configs(configs, *, where: str, name: str = "CONFIGS") -> list[str]:
    """Check a config matrix; return its labels."""
    if not isinstance(configs, list) or not configs:
        raise MetaError(f"{where}: {name} must be a non-empty list of dicts")
    labels = []
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, dict):
            raise MetaError(f"{where}: {name}[{i}] must be a dict, got {type(cfg).__name__}")
        label = cfg.get("label")
        if not isinstance(label, str) or not label.strip():
            raise MetaError(f"{where}: {name}[{i}] needs a non-empty string 'label'")
        if label in labels:
            raise MetaError(f"{where}: {name} label {label!r} is used twice; labels are unique")
        labels.append(label)
        _check_dtypes(cfg, where=f"{where}: {name} {label!r}")
    return labels


def _check_dtypes(config: dict, *, where: str) -> None:
    """``dtype`` and ``*_dtype`` values must be torch dtype names (``bfloat16``, not ``bf16``)."""
    for key, value in config.items():
        if (key == "dtype" or key.endswith("_dtype")) and value not in DTYPE_NAMES:
            raise MetaError(
                f"{where}: {key}={value!r} is not a torch dtype name; use one of "
                f"{', '.join(sorted(DTYPE_NAMES))} (labels may stay short)"
            )


def strip_label(config: dict) -> dict:
    """The keyword arguments of a config: everything but its label."""
    return {k: v for k, v in config.items() if k != "label"}
