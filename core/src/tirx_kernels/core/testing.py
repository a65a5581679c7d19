# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Helpers every kernel module's run_test and run_bench share: data, tolerances, skips,
the comparison that names the worst element, and the bench wiring. Imports torch.
"""

from __future__ import annotations

import importlib
import unittest
from collections.abc import Callable, Mapping
from typing import Any

import torch

from .meta import DTYPE_NAMES

# an fp32 reference against a 16-bit output: a few ulps of the output dtype
_DTYPE_TOLS = {
    "bfloat16": {"rtol": 1.6e-2, "atol": 1.6e-2},
    "float16": {"rtol": 2e-3, "atol": 2e-3},
    "float32": {"rtol": 1e-5, "atol": 1e-5},
}
# two implementations of the same arithmetic: about one ulp
_ULP_TOLS = {
    "bfloat16": {"rtol": 8e-3, "atol": 1e-5},
    "float16": {"rtol": 1e-3, "atol": 1e-6},
    "float32": {"rtol": 1e-6, "atol": 1e-7},
}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a config's dtype name (torch's own names: ``bfloat16``, ...)."""
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype {name!r} is not one of {sorted(DTYPE_NAMES)}")
    return getattr(torch, name)


def dtype_tols(dtype: str) -> dict[str, float]:
    """Tolerances of a ``dtype`` output against an fp32 reference."""
    return dict(_DTYPE_TOLS[dtype])


def ulp_tols(dtype: str) -> dict[str, float]:
    """Tolerances between two implementations of the same arithmetic in ``dtype``."""
    return dict(_ULP_TOLS[dtype])


def randn(
    shape, dtype: str, seed: int, scale: float = 1.0, shift: float = 0.0, device: str = "cuda"
) -> torch.Tensor:
    """Deterministic normal data, generated on the CPU (the same on every GPU)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32) * scale + shift
    return t.to(torch_dtype(dtype)).to(device)


def load_script(path: Any, name: str | None = None) -> Any:
    """The script at ``path`` (a family's ``scripts/*.py``, not an importable module) as a
    module, for tests of its functions; ``name`` defaults to its stem."""
    import importlib.util
    from pathlib import Path

    path = Path(path)
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"load_script: {path} is not a Python script")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def skip_unless_gpu(meta: Mapping[str, Any]) -> None:
    """unittest.SkipTest unless the visible GPU is one of the kernel's archs."""
    from . import toolchain

    arch = toolchain.gpu_arch()
    if arch not in meta["archs"]:
        raise unittest.SkipTest(f"needs a GPU of arch {'/'.join(meta['archs'])}, found {arch}")


def needs_gpu(meta: Mapping[str, Any]) -> Any:
    """The pytest mark of :func:`skip_unless_gpu`: skip a test unless the visible GPU is one
    of the kernel's archs (``@needs_gpu(KERNEL_META)`` over a GPU test of the op)."""
    import pytest

    from . import toolchain

    arch = toolchain.gpu_arch()
    return pytest.mark.skipif(
        arch not in meta["archs"],
        reason=f"needs a GPU of arch {'/'.join(meta['archs'])}, found {arch}",
    )


def available(module: str) -> bool:
    """Whether an optional reference package imports here (e.g. ``flashinfer.norm``)."""
    try:
        importlib.import_module(module)
    except Exception:  # a broken optional install counts as absent, like a missing one
        return False
    return True


def assert_close(
    what: str, got: torch.Tensor, want: torch.Tensor, *, atol: float, rtol: float
) -> float:
    """Max abs error of ``got`` vs ``want``; AssertionError naming the first element outside
    ``atol + rtol * |want|``, its value and how many are outside."""
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}")
    got, want = got.float(), want.float()
    err = (got - want).abs()
    bad = ~(err <= atol + rtol * want.abs())  # NaN counts as a mismatch
    if bool(bad.any()):
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} mismatched; max abs err "
            f"{float(err.nan_to_num(float('inf')).max()):.4g}; first at {idx}: got "
            f"{float(got[idx]):.6g}, want {float(want[idx]):.6g} (atol={atol}, rtol={rtol})"
        )
    return float(err.max()) if err.numel() else 0.0


def replayed(
    call: Callable[[], Any], out: torch.Tensor, *updates: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """Capture ``call`` (which writes ``out``) in a CUDA graph, after one run outside the
    capture (compiling and loading happen there); then copy each ``(input, new value)`` of
    ``updates`` in place, fill ``out`` with NaN and replay: ``out``, as the replay wrote it."""
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for tensor, value in updates:
        tensor.copy_(value)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    return out


def misaligned_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialized tensor of ``t``'s shape, dtype and device whose data starts one
    element past a 16-byte boundary (for the ops' alignment checks)."""
    flat = torch.empty(t.numel() + 8, dtype=t.dtype, device=t.device)
    return flat[1 : 1 + t.numel()].view(t.shape)


def offset_copy(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    """A contiguous copy of ``t`` whose data starts ``nbytes`` past a 64-byte boundary (a
    multiple of its element size): a tensor as aligned as a caller may legally pass it, no
    more, as slices of larger tensors are."""
    if nbytes % t.element_size() or not 0 <= nbytes < 64:
        raise ValueError(f"offset_copy: nbytes must be a multiple of {t.element_size()} below 64")
    pad = 128 // t.element_size()
    flat = torch.empty(t.numel() + pad, dtype=t.dtype, device=t.device)
    base = (-flat.data_ptr() % 64 + nbytes) // t.element_size()
    out = flat[base : base + t.numel()].view(t.shape)
    out.copy_(t)
    return out


def launch_mismatches(func: Any, args: tuple) -> list[str]:
    """What a launch of the TIRx function ``func`` with ``args`` would reject, found on the
    CPU: for each tensor parameter, a wrong dtype or rank, a static extent that differs, a
    dynamic extent (``T.dynamic``) that disagrees with its first binding, strides that are not
    compact (a parameter without a layout takes a compact tensor), or data not aligned to the
    parameter's ``data_alignment`` (64 bytes unless it declares ``align``), as the generated
    host function checks them. Scalar parameters and extents that are expressions are not
    checked."""
    problems: list[str] = []
    bound: dict[str, int] = {}
    if len(args) != len(func.params):
        return [f"{len(args)} arguments for {len(func.params)} parameters"]
    for param, arg in zip(func.params, args):
        if not hasattr(param, "shape"):
            continue  # a scalar
        where = f"{param.name} {tuple(arg.shape)} {arg.dtype}"
        if str(arg.dtype).removeprefix("torch.") != str(param.dtype):
            problems.append(f"{where}: dtype, the kernel takes {param.dtype}")
        if arg.dim() != len(param.shape):
            problems.append(f"{where}: rank, the kernel takes {len(param.shape)}")
            continue
        for axis, (extent, size) in enumerate(zip(param.shape, arg.shape)):
            kind = type(extent).__name__
            if kind == "IntImm" and int(extent) != size:
                problems.append(f"{where}: shape[{axis}], the kernel takes {int(extent)}")
            elif kind == "Var" and bound.setdefault(str(extent), size) != size:
                problems.append(f"{where}: shape[{axis}] = {extent} is {bound[str(extent)]}")
        if param.layout is None and not _compact(arg):
            problems.append(f"{where}: strides {arg.stride()}, the kernel takes a compact tensor")
        alignment = int(param.data_alignment)
        if arg.numel() and alignment > 1 and arg.data_ptr() % alignment:
            problems.append(
                f"{where}: data at {arg.data_ptr() % alignment} bytes past a {alignment}-byte "
                f"boundary, the kernel takes it aligned"
            )
    return problems


def _compact(t: torch.Tensor) -> bool:
    """Row-major strides, dimensions of size 1 aside (the host function skips them too)."""
    expected = 1
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def checked_launches(
    make: Callable[..., Any], launched: list, effect: Callable[..., Any] | None = None
) -> Callable[..., Any]:
    """A CPU stand-in for a compile-once kernel factory: ``stand_in(*key)`` builds the
    uncompiled kernel ``make(*key)`` and returns a launcher that appends it to ``launched``
    and, as the kernel's generated host function does, raises ValueError naming what it would
    refuse (:func:`launch_mismatches`); otherwise it runs ``effect(*key)(*args)`` when given
    (the kernel's effect in torch). Patched over a family's factory, it lets an op's launch
    code run on CPU tensors."""

    def stand_in(*key: Any, **options: Any) -> Callable[..., Any]:
        func = make(*key, **options)
        run = effect(*key, **options) if effect else None

        def launch(*args: Any) -> Any:
            launched.append(func)
            problems = launch_mismatches(func, args)
            if problems:
                raise ValueError(f"launch of {func.attrs.get('global_symbol', func)}: {problems}")
            return run(*args) if run else None

        return launch

    return stand_in


# the public-op modes a bench row may time (config key ``mode``) beside the kernel launch
OP_MODES = ("eager", "graph")


def bench_calls(calls: Mapping[str, Callable[[], Any]], mode: str, **options: Any) -> dict:
    """What a user's call costs, as a bench result: ``calls`` is a kernel module's
    ``public_calls(batch)`` (``"tirx"``: our public op; the others: references), timed in turns
    by :mod:`.overhead`: ``mode`` "eager" gives host µs per call with launches queued back to
    back (dispatch, checks and launch: what an eager caller at a small batch pays), "graph"
    µs per call replaying a CUDA graph of ``overhead.GRAPH_CALLS`` calls. Of the bench options
    only ``rounds`` applies (at least ``overhead.ROUNDS``). A failing reference is an error of
    its own; ours failing raises."""
    from . import overhead

    if mode not in OP_MODES:
        raise ValueError(f"mode must be one of {OP_MODES}, got {mode!r}")
    key = "eager_host_us" if mode == "eager" else "graph_replay_us"
    rounds = max(int(options.get("rounds") or 1), overhead.ROUNDS)
    rows = overhead.measure(calls, graphs=mode == "graph", rounds=rounds)
    if rows["tirx"]["error"]:
        raise RuntimeError(f"our public op failed: {rows['tirx']['error']}")
    return {
        "impls": {name: row[key] for name, row in rows.items() if row[key] is not None},
        "errors": {name: row["error"] for name, row in rows.items() if row["error"]},
        # graph rows name their calls per graph: rows of another count compare as another timer
        "timer": "eager_op_min" if mode == "eager" else f"graph_op_x{overhead.GRAPH_CALLS}",
        "round_samples": {name: row["rounds"][key] for name, row in rows.items() if row[key]},
    }


def assert_fullgraph_calls(op: Any, fn: Callable[..., Any], *args: Any, refusal: str) -> None:
    """``torch.compile(fn, fullgraph=True)`` traces ``fn`` into one graph (a graph break
    raises) that calls the custom op ``op`` (Dynamo records the packet or its overload).

    ``args`` are CPU tensors: the compiled call must then raise the op's own ValueError
    matching the regex ``refusal``, which shows that the graph ran the op, not a fallback.
    """
    import re

    graphs = []

    def backend(gm, example_inputs):  # record Dynamo's graph, then run it as is
        graphs.append(gm)
        return gm

    model = torch.compile(fn, fullgraph=True, backend=backend)
    try:
        model(*args)
    except ValueError as e:
        if not re.search(refusal, str(e)):
            raise AssertionError(f"expected a ValueError matching {refusal!r}, got {e}") from e
    else:
        raise AssertionError(f"the compiled call ran; expected a ValueError matching {refusal!r}")
    ops = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    if op not in ops and op.default not in ops:
        raise AssertionError(f"{op} is not in the graph: {ops}")


def bench(
    ours: Callable[[], Any],
    references: Mapping[str, Callable[[], Callable[[], Any]]],
    **options: Any,
) -> dict:
    """Time our launch beside lazily built references with the options tirx-run forwards
    (``warmup``, ``repeat``, ``timer``, ``rounds``, ``cooldown_s``); microseconds.

    Other keys are dropped, so a run_bench may pass its whole ``**options`` catch-all.
    """
    from . import toolchain
    from .protocol import BENCH_OPTIONS

    chosen = {key: value for key, value in options.items() if key in BENCH_OPTIONS}
    return toolchain.bench({"tirx": ours}, references=references, **chosen)
