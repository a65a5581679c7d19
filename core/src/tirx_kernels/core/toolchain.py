# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The one module of the harness that touches the TIRx compiler and timer API.

A TVM upgrade (or a move to the ``tvm.tirx`` namespace of apache-tvm) changes this file
only. Kernels may import their DSL from here (``from tirx_kernels.core.toolchain import T``)
or from ``tvm_tirx`` directly; no other harness module imports ``tvm_tirx``.

Importing this module imports the compiler (2-6 s): never import it on the listing path.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tvm_ffi
import tvm_tirx
import tvm_tirx.support.nvcc  # noqa: F401  (registers the device compile wrapped below)
from tvm_tirx.codegen.executable import Executable
from tvm_tirx.script import tirx as T  # noqa: F401  (re-exported DSL)
from tvm_tirx.target import Target

from . import kernel_cache
from .impls import guard_references

__all__ = [
    "T",
    "bench",
    "check_kernel_cache",
    "compile",
    "compile_cubin",
    "prebuild",
    "cuda_source",
    "distributed_context",
    "gpu_arch",
    "host_code",
    "num_sms",
    "ptxas_report",
    "ptxas_usage",
    "setmaxnreg_shortfall",
    "sm_count",
    "target",
    "tirx_version",
    "walk",
]


def tirx_version() -> str:
    return getattr(tvm_tirx, "__version__", "unknown")


def target(arch: str = "sm_90a") -> Target:
    """A CUDA target for ``arch`` (e.g. ``sm_90a``), usable without a GPU."""
    return Target({"kind": "cuda", "arch": arch})


def compile(func, arch: str = "sm_90a"):  # noqa: A001 - mirrors tvm_tirx.tirx.compile
    """Lower and build ``func`` for ``arch``; returns a callable executable.

    Without a GPU the device module stays CUDA source (see :func:`cuda_source`). With one and
    ``TIRX_KERNELS_CACHE_DIR`` set, the executable comes from or goes to that on-disk cache
    (:mod:`.kernel_cache`).
    """
    where = kernel_cache.folder()
    if where is None or gpu_arch() is None:  # a CPU build is CUDA source: nothing to reuse
        executable = tvm_tirx.tirx.compile(func, target=target(arch))
    else:
        path = kernel_cache.entry(where, func.script(), arch, tirx_version())
        executable = kernel_cache.load(path, _load_library)
        if executable is None:
            executable = tvm_tirx.tirx.compile(func, target=target(arch))
            kernel_cache.store(path, executable.export_library)
    executable.tirx_func = (func, arch)  # cuda_source and host_code lower it again
    return executable


# TIRx compiles a library's CUDA source when a process loads it, through this callback
# (tvm_tirx.support.nvcc registers it; the CUDA runtime looks it up by name at each load)
_DEVICE_COMPILE = "tvm_callback_cuda_compile"
_compile_device_code = tvm_ffi.get_global_func(_DEVICE_COMPILE)


def _compile_device_code_cached(source: str, config: str) -> list:
    """TIRx's device compile through the kernel cache's ``.cubin`` entries: an entry is
    returned as the cubin it is, a miss compiles and stores one (on a GPU machine: a build
    there compiles its device code at once, a load of a library holding source when loaded)."""
    where = kernel_cache.folder()
    if where is None or gpu_arch() is None:
        return _compile_device_code(source, config)
    path = kernel_cache.binary_entry(where, source, config)
    binary = kernel_cache.load(path, lambda file: Path(file).read_bytes())
    if binary is not None:
        return [bytearray(binary), "cubin"]
    binary, fmt = _compile_device_code(source, config)
    if fmt == "cubin":
        kernel_cache.store_bytes(path, bytes(binary))
    return [binary, fmt]


tvm_ffi.register_global_func(_DEVICE_COMPILE, _compile_device_code_cached, override=True)


def _load_library(path: str) -> Executable:
    executable = Executable(tvm_ffi.load_module(path))
    executable.jit()  # raises here, not at the first launch, when it cannot run
    return executable


def cuda_source(executable) -> str:
    """The generated CUDA C++ of a compiled executable (one loaded from the kernel cache
    holds a cubin, not source: its kernel is lowered again)."""
    try:
        source = executable.mod.imports[0].inspect_source()
    except Exception:  # noqa: BLE001 - a binary module; tvm_ffi raises its own error types
        if not hasattr(executable, "tirx_func"):
            raise
        source = ""
    if source or not hasattr(executable, "tirx_func"):
        return source
    func, arch = executable.tirx_func  # a loaded cubin's module answers "" on the GPU
    return tvm_tirx.tirx.compile(func, target=target(arch)).mod.imports[0].inspect_source()


def host_code(executable) -> Any:
    """The generated host function of a compiled executable, as TIRx's compile has it right
    after splitting host from device code (lowered again; no device code generated)."""
    import importlib

    func, arch = executable.tirx_func
    compile_module: Any = importlib.import_module(tvm_tirx.tirx.compile.__module__)
    split = compile_module._split_host_device_modules
    seen: list = []

    class _Stop(Exception):
        pass

    def capture(mod):  # the host half, then stop before code generation
        seen.append(split(mod)[0])
        raise _Stop

    compile_module._split_host_device_modules = capture
    try:
        tvm_tirx.tirx.compile(func, target=target(arch))
    except _Stop:
        pass
    finally:
        compile_module._split_host_device_modules = split
    (function,) = seen[0].functions.values()
    return function


def walk(node: Any, callback: Callable, order: str = "post") -> None:
    """Call ``callback(child, facts)`` on every node under the TIRx IR ``node``."""
    tvm_tirx.tirx.structural_walk_with_constraint_context(node, callback, order=order)


def prebuild(func, arch: str = "sm_90a") -> int:
    """Build ``func``'s library for ``arch`` into the ``TIRX_KERNELS_CACHE_DIR`` entry a GPU
    machine's :func:`compile` of it loads (same TIRx and nvcc), without needing a GPU. The
    library holds the kernel's CUDA source, which a load compiles: nvcc compiles it here
    into the ``.cubin`` entry that load then uses. Existing entries are kept.
    Returns the library's size in bytes; raises as :func:`compile_cubin` does on a bad kernel.

    This is how device time skips compiles: fill the folder on a CPU machine (``tirx-run
    test`` does, for each config's kernels, when the variable is set there) and carry it.
    """
    where = kernel_cache.folder()
    if where is None:
        raise ValueError(f"prebuild needs {kernel_cache.ENV} to name the cache folder")
    path = kernel_cache.entry(where, func.script(), arch, tirx_version())
    executable = tvm_tirx.tirx.compile(func, target=target(arch))
    if not path.is_file():
        kernel_cache.store(path, executable.export_library, strict=True)
        kernel_cache.stamp(where, tirx_version())
    for source, config in _device_sources(executable):
        binary = kernel_cache.binary_entry(where, source, config)
        if not binary.is_file():
            kernel_cache.store_bytes(binary, _nvcc_cubin(source, config), strict=True)
    return path.stat().st_size


def _device_sources(executable) -> list[tuple[str, str]]:
    """(CUDA source, backend-config JSON) of each device module a load compiles."""
    found = []
    for module in executable.mod.imports:
        if module.kind == "cuda":
            code, fmt, _names = module["__tvm_cuda_binary"]()
            if fmt == "cuda":
                found.append((bytes(code).decode(), module.inspect_source("backend_config")))
    return found


def _nvcc_cubin(source: str, config: str) -> bytes:
    """``source`` compiled by nvcc with ``config``'s arch and options into a cubin (the
    format the load-time compile returns; NVRTC is not needed here)."""
    from tvm_tirx.backend.cuda.compiler import compile_source

    settings = json.loads(config or "{}")
    cuda = {**settings.get("cuda", {}), "compiler": "nvcc", "target_format": "cubin"}
    result = compile_source(source, {**settings, "cuda": cuda})
    return result.binary


def check_kernel_cache() -> str:
    """:func:`.kernel_cache.check` of the ``TIRX_KERNELS_CACHE_DIR`` folder (for device
    scripts, scripts/h200-env.sh)."""
    where = kernel_cache.folder()
    return kernel_cache.check(where, tirx_version()) if where else f"{kernel_cache.ENV} unset"


def compile_cubin(func, arch: str = "sm_90a") -> bytes:
    """Lower ``func``, generate CUDA and assemble it with nvcc into a cubin for ``arch``.

    This is the full compile check on a machine without a GPU: a TIRx lowering error,
    a CUDA codegen error or a ptxas rejection all raise.
    """
    from tvm_tirx.backend.cuda.compiler import compile_source

    source = cuda_source(compile(func, arch))
    result = compile_source(
        source, {"cuda": {"compiler": "nvcc", "arch": arch, "target_format": "cubin"}}
    )
    if not result.binary:
        raise RuntimeError(f"nvcc produced an empty cubin for {arch}")
    return bytes(result.binary)


def ptxas_usage(func, arch: str = "sm_90a") -> tuple[str, int, int]:
    """(CUDA source, registers per thread, bytes spilled) of ``func`` as nvcc assembles it
    for ``arch`` with TIRx's own compiler flags (no GPU needed)."""
    source, registers, spilled, _ = ptxas_report(func, arch)
    return source, registers, spilled


# ptxas's notes C7514/C7515: it serialized every wgmma of the kernel (an accumulator or
# operand register is touched inside a wgmma pipeline stage, as ptxas sees the program)
WGMMA_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized")


def ptxas_report(func, arch: str = "sm_90a") -> tuple[str, int, int, bool]:
    """:func:`ptxas_usage` plus whether ptxas serialized the kernel's wgmmas (no GPU
    needed): a schedule that overlaps wgmmas with other work loses that overlap silently
    otherwise."""
    import subprocess
    import tempfile
    from pathlib import Path

    from tvm_tirx.backend.cuda.backend_config import compiler_options, default_backend_config

    source = cuda_source(compile(func, arch))
    flags = compiler_options({**default_backend_config(), "compiler": "nvcc"})
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(source)
        cmd = ["nvcc", "-cubin", "-arch", arch, "--resource-usage", *flags, "-o", f"{cu}bin", cu]
        log = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    registers = re.search(r"Used (\d+) registers", log)
    spilled = re.search(r"(\d+) bytes spill stores", log)
    if not registers or not spilled:
        raise RuntimeError(f"no register report in nvcc's output:\n{log}")
    serialized = bool(WGMMA_SERIALIZED.search(log))
    return source, int(registers.group(1)), int(spilled.group(1)), serialized


def setmaxnreg_shortfall(source: str, registers: int) -> int:
    """Registers (per thread of each warpgroup, summed) that the ``setmaxnreg`` of a
    producer/consumer kernel asks for beyond the CTA's pool (``registers`` per thread from
    ptxas, times the ``__launch_bounds__`` threads); 0 when it fits. One warpgroup takes
    ``setmaxnreg.dec``, every other ``.inc``, and ``.inc`` waits until the pool has the
    registers: a shortfall hangs the kernel on the GPU."""
    bounds = re.search(r"__launch_bounds__\((\d+)", source)
    if not bounds:
        raise ValueError("the kernel source has no __launch_bounds__: its pool is unknown")
    threads = int(bounds.group(1))
    dec = {int(n) for n in re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32 (\d+)", source)}
    inc = {int(n) for n in re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32 (\d+)", source)}
    if not inc:
        return 0
    warpgroups = threads // 128
    asked = max(dec, default=registers) + (warpgroups - 1) * max(inc)
    return max(0, asked - warpgroups * registers)


@functools.cache
def gpu_arch() -> str | None:
    """The arch of the visible CUDA device as a TIRx target arch (``sm_90a``), or None.

    Hopper's wgmma/setmaxnreg need the arch-specific ``a`` target, so capability 9.0
    maps to ``sm_90a``.
    """
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    suffix = "a" if major >= 9 else ""
    return f"sm_{major}{minor}{suffix}"


@functools.cache
def sm_count(device_index: int = 0) -> int:
    """Streaming multiprocessors of a CUDA device (sizes persistent grids)."""
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


H200_SMS = 132


@functools.cache
def num_sms() -> int:
    """SMs of device 0, or the H200's 132 without a GPU (where only codegen runs): the size
    of the persistent grids kernels compile in."""
    import torch

    return sm_count(0) if torch.cuda.is_available() else H200_SMS


def bench(
    funcs: Mapping[str, Callable[[], Any]],
    *,
    references: Mapping[str, Callable[[], Callable[[], Any]]] | None = None,
    warmup: float | None = None,
    repeat: float | None = None,
    timer: str | None = None,
    rounds: int = 1,
    cooldown_s: float = 1.0,
    **kwargs,
) -> dict:
    """``tvm_tirx.testing.bench.bench``, imported lazily (it needs torch and triton).

    Results are in microseconds: ``{"impls", "round_samples", "errors", "timer", ...}``.
    A reference builder that raises ``unittest.SkipTest`` or ``ImportError`` (its optional
    package is not installed) is not timed and lands in ``result["skipped"]`` with the
    reason; any other builder failure stays a BASELINE_ERROR in ``result["errors"]``.
    """
    from tvm_tirx.testing.bench import bench as _bench

    guarded, skipped = guard_references(references or {})
    result = _bench(
        funcs,
        references=guarded or None,
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
        **kwargs,
    )
    if skipped:
        result["skipped"] = skipped
    return result


def distributed_context(
    *,
    rank: int,
    world_size: int,
    barrier: Callable[[], None],
    max_reduce: Callable[[float], float],
    stream: Any,
):
    """A ``tvm_tirx.testing.bench.DistributedBenchContext`` for one rank (imported lazily).

    Pass it as ``bench(..., distributed=ctx)``: the timer becomes kineto (fixed iteration
    counts; warmup/repeat must stay None), ``prepare={name: fn}`` runs outside the measured
    span, and launches that use other streams must make ``stream`` wait for them.
    ``tirx_kernels.core.distributed.bench_context()`` builds one from torch.distributed.
    """
    from tvm_tirx.testing.bench import DistributedBenchContext

    return DistributedBenchContext(
        rank=rank, world_size=world_size, barrier=barrier, max_reduce=max_reduce, stream=stream
    )
