# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Launch a compiled TIRx kernel for one call shape without TVM's CUDA-module launcher.

Most of the host time of an eager call of a small kernel through the generated host
function is TVM's CUDA-module launcher (measured in packages/tirx-kernels-flashinfer/docs/
overhead.md). :func:`bound` returns a launcher with the host function's arguments, bound to
the shapes, dtypes and device of example arguments: ``direct_launch.cc`` (a tvm-ffi module
compiled once per machine) makes the host function's checks (dtype, shape, compact strides,
alignment, device; ValueError or TypeError before any launch), encodes the TMA descriptors
the host code would, and calls ``cudaLaunchKernel`` (``cudaLaunchKernelExC`` for clusters)
with the parameters :mod:`.launch_spec` read from the host code.

``TIRX_KERNELS_DIRECT_LAUNCH=0`` keeps the host function everywhere (read at import).
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import launch_spec, toolchain

ENABLED = os.environ.get("TIRX_KERNELS_DIRECT_LAUNCH", "1") != "0"
SOURCE = Path(__file__).with_name("direct_launch.cc")
_DEVICE_TYPES = {"cpu": 1, "cuda": 2}  # DLPack device types


@functools.cache
def library() -> Any:
    """``direct_launch.cc`` as a tvm-ffi module, compiled on first use into
    ``~/.cache/tirx-kernels`` (keyed by source, flags and tvm-ffi), or ``None`` where it
    cannot be built (no C++ compiler, no CUDA toolkit): callers keep the host function."""
    import hashlib
    import subprocess

    import tvm_ffi
    from tvm_ffi import libinfo

    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    lib = Path(libinfo.find_libtvm_ffi())
    includes = {libinfo.find_include_path(), libinfo.find_dlpack_include_path(), f"{cuda}/include"}
    command = [os.environ.get("CXX", "c++"), "-std=c++17", "-fPIC", "-O2", "-shared"]
    command += [f"-I{path}" for path in sorted(includes)]
    links = [f"-L{lib.parent}", "-ltvm_ffi", f"-L{cuda}/lib64", "-lcudart_static", "-ldl", "-lrt"]
    digest = hashlib.sha256(
        "\0".join([SOURCE.read_text(), *command, *links, tvm_ffi.__version__]).encode()
    ).hexdigest()[:16]
    built = Path.home() / ".cache" / "tirx-kernels" / f"direct_launch-{digest}.so"
    try:
        if not built.exists():
            built.parent.mkdir(parents=True, exist_ok=True)
            partial = built.with_suffix(f".{os.getpid()}.tmp")
            subprocess.run(
                [*command, str(SOURCE), "-o", str(partial), *links, "-lpthread"],
                check=True,
                capture_output=True,
            )
            os.replace(partial, built)  # atomic: processes building at once each finish
        return tvm_ffi.load_module(str(built))
    except (OSError, subprocess.CalledProcessError, RuntimeError):
        return None


def _host_code(executable: Any) -> Any:
    if not hasattr(executable, "host_code"):
        executable.host_code = toolchain.host_code(executable)
    return executable.host_code


def _image(executable: Any) -> bytes:
    """The kernel binary of a compiled executable (its CUDA module's, else nvcc's)."""
    module = executable.mod.imports[0]
    for fmt in ("cubin", "fatbin", "ptx"):
        if fmt in module.get_write_formats():
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"kernel.{fmt}"
                module.write_to_file(str(path), fmt)
                image = path.read_bytes()
            if image:
                return image + (b"\0" if fmt == "ptx" else b"")
    return toolchain.compile_cubin(*executable.tirx_func)


@functools.cache
def _kernel(executable: Any, name: str, device: int, smem: int) -> int:
    """The kernel's handle, allowed ``smem`` bytes of dynamic shared memory on ``device``."""
    if not hasattr(executable, "library_handle"):
        executable.library_handle = library().load(_image(executable))
    return library().kernel(executable.library_handle, name, device, smem)


def _checks(
    params: list, examples: tuple, as_called: tuple = ()
) -> list[tuple[int, list[int]]] | None:
    """(argument, its C++ check: device, dtype, alignment, shape) of each tensor of
    ``examples``, or ``None`` when an example is not what the kernel declares. A tensor at
    the same index of ``as_called`` is what callers will pass instead: the check is of its
    shape, and it must hold the example's elements in the same order (a contiguous tensor
    of the same dtype and element count, as a reshape of it is)."""
    import tvm_ffi

    checks: list[tuple[int, list[int]]] = []
    for i, (param, example) in enumerate(zip(params, examples)):
        declared = param.ty
        if type(declared).__name__ != "TensorType":
            continue
        if not hasattr(example, "data_ptr"):
            return None
        dtype = tvm_ffi.dtype(str(example.dtype).removeprefix("torch."))
        shape = [int(n) for n in example.shape]
        static = [getattr(d, "value", None) for d in declared.shape]
        align = int(declared.data_alignment or 1)
        if (
            str(declared.dtype) != str(dtype)
            or len(static) != len(shape)
            or any(s is not None and s != n for s, n in zip(static, shape))
            or not example.is_contiguous()
            or example.data_ptr() % align
        ):
            return None
        called = as_called[i] if i < len(as_called) else None
        if called is not None:
            if not _same_elements(called, example):
                return None
            shape = [int(n) for n in called.shape]
        device = (_DEVICE_TYPES[example.device.type], example.device.index or 0)
        checks.append(
            (i, [*device, dtype.type_code, dtype.bits, dtype.lanes, align, len(shape), *shape])
        )
    return checks


def _same_elements(called: Any, example: Any) -> bool:
    """Whether ``called`` is contiguous and holds ``example``'s elements in its order: its
    dtype, device and element count (a contiguous reshape of it)."""
    return (
        hasattr(called, "data_ptr")
        and called.is_contiguous()
        and called.dtype == example.dtype
        and called.device == example.device
        and called.numel() == example.numel()
    )


def _on_gpu(examples: tuple) -> bool:
    return all(e.device.type == "cuda" for e in examples if hasattr(e, "device"))


def _bind_constants(launches: list, examples: tuple, constants: tuple[int, ...]) -> dict:
    """Rewrite ``launches`` so the scalar arguments at ``constants`` are baked in; returns the
    old-to-new index of every argument left."""
    kept = {
        old: new for new, old in enumerate(i for i in range(len(examples)) if i not in constants)
    }
    for launch in launches:
        for d, value in enumerate(launch.dims):
            if value < 0 and -value - 1 in constants:
                launch.dims[d] = int(examples[-value - 1])
            elif value < 0:
                launch.dims[d] = -kept[-value - 1] - 1
        launch.pinned = [(kept[arg], v) for arg, v in launch.pinned if arg not in constants]
        for m in launch.maps:
            if m.arg in constants:
                raise ValueError(f"argument #{m.arg} is a tensor; only scalars can be constants")
            m.arg = kept[m.arg]
        for p, (kind, value) in enumerate(launch.params):
            if kind > launch_spec.I64:  # a constant or a descriptor already
                continue
            if value not in constants:
                launch.params[p] = (kind, kept[value])
            elif kind == launch_spec.F32:
                bits = struct.unpack("<I", struct.pack("<f", float(examples[value])))[0]
                launch.params[p] = (launch_spec.CONST_F32, bits)
            elif kind in (launch_spec.I32, launch_spec.I64):
                const = launch_spec.CONST_I32 if kind == launch_spec.I32 else launch_spec.CONST_I64
                launch.params[p] = (const, int(examples[value]))
            else:  # a tensor cannot be a constant
                raise ValueError(f"argument #{value} is a tensor; only scalars can be constants")
    return kept


def bound(
    executable: Any,
    *examples: Any,
    constants: tuple[int, ...] = (),
    as_called: tuple = (),
    dry: bool = False,
) -> Callable | None:
    """A launcher taking the arguments of ``executable``'s host function, bound to the shapes,
    dtypes, alignment and device of ``examples`` (scalars may change per call, except the int
    ones a launch dimension is computed from, which are pinned), or ``None``
    where the host code does what this launcher does not (see :mod:`.launch_spec`) or the
    module cannot be built. ``constants``: indices of scalar arguments baked in with their
    example values; the launcher then takes the other arguments only. ``as_called``: per
    argument, ``None`` or the tensor callers pass in the example's place, of another shape
    but the same elements (say q ``(batch, seqlen, heads, d)`` where the kernel declares its
    ``(rows, heads * d)`` view): the launcher checks and takes that shape, so a call needs no
    view. ``dry``: check and
    return the kernels' parameters and launch dimensions as int64 words instead of
    launching (tests, no GPU)."""
    if not ENABLED or not hasattr(executable, "tirx_func") or not (dry or _on_gpu(examples)):
        return None  # a stand-in of a kernel (tests), or CPU tensors
    if library() is None:
        return None
    func, _arch = executable.tirx_func
    launches = launch_spec.launch_spec(_host_code(executable), examples)
    checks = _checks(list(func.params), examples, as_called) if launches else None
    if launches is None or checks is None or len(examples) != len(func.params):
        return None
    kept = _bind_constants(launches, examples, constants)
    words = [word for arg, check in checks for word in (kept[arg], *check)]
    index = next(e.device.index or 0 for e in examples if hasattr(e, "device"))
    try:
        kernels = [
            0 if dry else _kernel(executable, launch.kernel, index, launch.smem)
            for launch in launches
        ]
    except Exception as e:  # noqa: BLE001 - the host function still launches it
        warnings.warn(
            f"direct launch of {launches[0].kernel} unavailable ({type(e).__name__}: {e}); "
            "using the generated host function",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    dims = [[*launch.dims, launch.smem, *launch.cluster] for launch in launches]
    params = [[word for pair in launch.params for word in pair] for launch in launches]
    maps = [[word for m in launch.maps for word in m.words()] for launch in launches]
    pinned = [word for launch in launches for pair in launch.pinned for word in pair]
    name = launches[0].kernel
    return library().bind(name, len(kept), words, kernels, dims, params, maps, pinned, dry)
