# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Compiled kernels on disk, shared by processes (opt-in: ``TIRX_KERNELS_CACHE_DIR``).

On a machine with a GPU, :func:`tirx_kernels.core.toolchain.compile` runs nvcc on every
kernel it builds: seconds each, paid again by every process (each ``tirx-run`` worker, each
benchmark, each shard of a test run, a restarted server). With ``TIRX_KERNELS_CACHE_DIR``
naming a folder, a compiled kernel is stored there once as a shared library named by a hash
of what determines it (the kernel's TVMScript, the target arch, the TIRx and nvcc
versions), and a later compile of the same kernel, in any process, loads it instead. A
machine without a GPU can write entries for one that has
(:func:`tirx_kernels.core.toolchain.prebuild`).

Such a library holds the kernel's CUDA source: TIRx compiles it (NVRTC, about 10 s for a
large kernel) each time a process loads it. So the device binary is cached too, as a
``.cubin`` named by a hash of the source and its compiler settings, which the toolchain's
device-compile callback returns instead of compiling.

An entry is written under a temporary name and renamed into place, so no process reads half
of one; an entry that does not load is a miss: the kernel is compiled again and replaces it.
This module knows files and names only; the toolchain exports and loads the libraries.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "TIRX_KERNELS_CACHE_DIR"


def folder() -> Path | None:
    """The cache folder, or None when ``TIRX_KERNELS_CACHE_DIR`` is unset or empty."""
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


@functools.cache
def nvcc_version() -> str:
    """nvcc's release line (it makes the cubin), or "no nvcc"."""
    try:
        done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "no nvcc"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else "no nvcc"


# written beside prebuilt entries: what built them, so a GPU machine can tell before it runs
# anything whether it will load them (entries of another TIRx or nvcc are never looked up)
STAMP = "BUILT_WITH"


def _builder(tirx_version: str) -> str:
    return f"tirx {tirx_version}; nvcc {nvcc_version()}"


def stamp(where: Path, tirx_version: str) -> None:
    """Record in ``where`` the TIRx and nvcc its prebuilt entries are for."""
    where.mkdir(parents=True, exist_ok=True)
    (where / STAMP).write_text(_builder(tirx_version) + "\n")


def check(where: Path, tirx_version: str) -> str:
    """One line: how many entries ``where`` holds and whether this machine will load the
    prebuilt ones (its TIRx and nvcc against the stamp)."""
    count = len(list(where.glob("*.so"))) if where.is_dir() else 0
    here = _builder(tirx_version)
    stamp_file = where / STAMP
    if not stamp_file.is_file():
        return f"{ENV}: {count} entries in {where}, none prebuilt (no {STAMP})"
    built = stamp_file.read_text().strip()
    if built == here:
        return f"{ENV}: {count} entries in {where}, prebuilt with this machine's {here}"
    return f"{ENV}: {count} entries in {where} NOT usable here: built with {built}, here {here}"


def entry(where: Path, script: str, arch: str, tirx_version: str) -> Path:
    """The library file of one kernel: ``script`` is its TVMScript text."""
    digest = hashlib.sha256()
    for part in (tirx_version, arch, nvcc_version(), script):
        digest.update(part.encode())
        digest.update(b"\0")
    return where / f"{digest.hexdigest()[:40]}.so"


def binary_entry(where: Path, source: str, config: str) -> Path:
    """The device binary (cubin) of one CUDA source compiled with ``config`` (TIRx's
    backend-config JSON; compared after parsing, so key order does not matter)."""
    settings = json.dumps(json.loads(config or "{}"), sort_keys=True)
    digest = hashlib.sha256()
    for part in (nvcc_version(), settings, source):
        digest.update(part.encode())
        digest.update(b"\0")
    return where / f"{digest.hexdigest()[:40]}.cubin"


def load(path: Path, read: Callable[[str], Any]) -> Any | None:
    """``read(path)``, or None when there is no entry or it does not load (a warning says
    why: a library of another machine, a truncated file)."""
    if not path.is_file():
        return None
    try:
        return read(str(path))
    except Exception as err:  # noqa: BLE001 - any failure is a miss: the compile replaces it
        warnings.warn(f"{ENV}: {path} does not load ({err}); compiling again", stacklevel=3)
        return None


def store(path: Path, write: Callable[[str], Any], strict: bool = False) -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename it to ``path``; a
    failure leaves no file and warns (the kernel still runs, compiled in this process), or
    raises if ``strict`` (a prebuild: the library is the product)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(
            prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent
        )
        os.close(handle)
    except OSError as err:
        if strict:
            raise
        warnings.warn(f"{ENV}: cannot write in {path.parent} ({err})", stacklevel=3)
        return
    try:
        write(tmp)
        os.replace(tmp, path)
    except Exception as err:  # noqa: BLE001 - a cache that cannot store is only slower
        if strict:
            raise
        warnings.warn(f"{ENV}: storing {path.name} failed ({err})", stacklevel=3)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def store_bytes(path: Path, data: bytes, strict: bool = False) -> None:
    """:func:`store` of a file whose content is ``data`` (a device binary)."""
    store(path, lambda file: Path(file).write_bytes(data), strict)
