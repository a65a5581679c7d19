# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The on-disk kernel cache (TIRX_KERNELS_CACHE_DIR) on the CPU: which file a kernel maps
to, that a compile stores it once and a later compile loads it, and that a bad entry or a
folder that cannot be written costs a compile, never a failure. A CPU build cannot be loaded
back (no CUDA loader here), so the load is a stand-in that returns the stored executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
import warnings

import pytest

from tirx_kernels.core import kernel_cache, toolchain


def _copy_kernel(threads: int):
    """A one-block copy kernel; ``threads`` makes kernels that differ."""
    T = toolchain.T
    n = T.dynamic("n")

    @T.function
    def copy(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=threads))
        i = T.cuda.thread_idx("x")
        if i < n:
            b[i] = a[i]

    return copy


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder, a GPU taken to be there, and counts of real compiles and loads (a
    load returns the last compiled executable: a CPU build has no CUDA loader to read it)."""
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path / "kernels"))
    monkeypatch.setattr(toolchain, "gpu_arch", lambda: "sm_90a")
    stats: dict = {"compiles": 0, "loads": 0}
    compile_ = toolchain.tvm_tirx.tirx.compile

    def counting_compile(func, target):
        stats["compiles"] += 1
        stats["last"] = compile_(func, target=target)
        return stats["last"]

    def stand_in_load(path):
        stats["loads"] += 1
        return stats["last"]

    monkeypatch.setattr(toolchain.tvm_tirx.tirx, "compile", counting_compile)
    monkeypatch.setattr(toolchain, "_load_library", stand_in_load)
    return tmp_path / "kernels", stats


def test_an_entry_names_the_kernel_arch_and_compilers():
    where = kernel_cache.Path("/c")
    one = kernel_cache.entry(where, "script A", "sm_90a", "0.1")
    assert one == kernel_cache.entry(where, "script A", "sm_90a", "0.1")
    others = {
        kernel_cache.entry(where, "script B", "sm_90a", "0.1"),
        kernel_cache.entry(where, "script A", "sm_100a", "0.1"),
        kernel_cache.entry(where, "script A", "sm_90a", "0.2"),
    }
    assert one not in others and len(others) == 3
    assert one.parent == where and one.suffix == ".so"


def test_without_the_variable_or_a_gpu_nothing_is_cached(tmp_path, monkeypatch):
    monkeypatch.delenv(kernel_cache.ENV, raising=False)
    assert kernel_cache.folder() is None
    toolchain.compile(_copy_kernel(32))
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path))  # set, but no GPU on this machine
    monkeypatch.setattr(toolchain, "gpu_arch", lambda: None)
    toolchain.compile(_copy_kernel(32))
    assert list(tmp_path.iterdir()) == []


def test_a_kernel_compiles_once_then_loads(cache):
    where, stats = cache
    first = toolchain.compile(_copy_kernel(64))
    entries = list(where.glob("*.so"))
    assert len(entries) == 1 and not list(where.glob(".*"))  # no temporary file left
    assert entries[0].stat().st_size > 0
    again = toolchain.compile(_copy_kernel(64))
    assert (stats["compiles"], stats["loads"]) == (1, 1) and again is first
    toolchain.compile(_copy_kernel(128))  # another kernel: another entry
    assert stats["compiles"] == 2 and len(list(where.glob("*.so"))) == 2


def test_a_bad_entry_is_compiled_again_and_replaced(cache):
    where, stats = cache
    path = kernel_cache.entry(where, _copy_kernel(64).script(), "sm_90a", toolchain.tirx_version())
    where.mkdir()
    path.write_bytes(b"not a library")
    with pytest.warns(UserWarning, match="does not load"):
        toolchain.compile(_copy_kernel(64))
    assert stats["compiles"] == 1 and path.read_bytes() != b"not a library"


def test_a_folder_that_cannot_be_written_costs_only_the_cache(cache, monkeypatch):
    where, stats = cache
    where.write_text("a file where the folder should be")
    with pytest.warns(UserWarning, match="cannot write"):
        executable = toolchain.compile(_copy_kernel(64))
    assert stats["compiles"] == 1 and executable is stats["last"]


def test_the_source_of_a_loaded_kernel_is_lowered_again(cache):
    _, stats = cache

    class Binary:  # a module loaded from a library: no source to inspect
        imports = [type("Cuda", (), {"inspect_source": lambda self: 1 / 0})()]

    executable = toolchain.compile(_copy_kernel(64))
    executable.mod = Binary()
    assert "__global__" in toolchain.cuda_source(executable)


@pytest.mark.skipif(toolchain.gpu_arch() != "sm_90a", reason="needs an sm_90a GPU")
def test_a_loaded_kernel_runs_as_the_compiled_one(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path))
    compiled = toolchain.compile(_copy_kernel(96))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a load that fails warns and compiles: not here
        loaded = toolchain.compile(_copy_kernel(96))
    assert loaded is not compiled and len(list(tmp_path.glob("*.so"))) == 1
    a = torch.randn(80, device="cuda")
    for executable in (compiled, loaded):
        b = torch.zeros_like(a)
        executable(a, b)
        assert torch.equal(a, b)
    assert "__global__" in toolchain.cuda_source(loaded)
    assert len(list(tmp_path.glob("*.cubin"))) == 1  # the load-time compile went through it


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.skipif(toolchain.gpu_arch() is not None, reason="a GPU machine's build compiles")
def test_a_prebuild_on_the_cpu_is_the_entry_a_gpu_compile_loads(tmp_path, monkeypatch):
    """Without a GPU, ``prebuild`` writes the kernel's library (its device code assembled
    by nvcc) under the name a GPU machine's ``compile`` looks up, which then loads it
    instead of compiling; a second prebuild keeps the entry."""
    monkeypatch.setattr(toolchain, "gpu_arch", lambda: None)
    monkeypatch.delenv(kernel_cache.ENV, raising=False)
    with pytest.raises(ValueError, match=kernel_cache.ENV):
        toolchain.prebuild(_copy_kernel(96))
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path))
    size = toolchain.prebuild(_copy_kernel(96))
    (path,) = tmp_path.glob("*.so")
    assert path == kernel_cache.entry(
        tmp_path, _copy_kernel(96).script(), "sm_90a", toolchain.tirx_version()
    )
    library = path.read_bytes()
    assert len(library) == size and library[:4] == b"\x7fELF"
    # the library carries CUDA source, compiled at load: its cubin is an entry of its own
    ((source, config),) = toolchain._device_sources(toolchain.compile(_copy_kernel(96)))
    assert "__global__" in source and source.encode() in library
    (cubin,) = tmp_path.glob("*.cubin")
    assert cubin == kernel_cache.binary_entry(tmp_path, source, config)
    assert cubin.read_bytes()[:4] == b"\x7fELF" and "sm_90a" in config
    stamp = path.stat().st_mtime_ns
    assert toolchain.prebuild(_copy_kernel(96)) == size and path.stat().st_mtime_ns == stamp

    loads = []

    def stand_in_load(where):  # a CPU build has no CUDA loader (see the module docstring)
        loads.append(where)
        return types.SimpleNamespace()

    monkeypatch.setattr(toolchain, "gpu_arch", lambda: "sm_90a")
    monkeypatch.setattr(toolchain, "_load_library", stand_in_load)
    monkeypatch.setattr(toolchain.tvm_tirx.tirx, "compile", lambda *a, **k: 1 / 0)
    assert toolchain.compile(_copy_kernel(96)).tirx_func[1] == "sm_90a"  # loaded, not built
    assert loads == [str(path)]
    assert "prebuilt with this machine's" in toolchain.check_kernel_cache()


def test_the_check_says_whether_prebuilt_entries_load_here(tmp_path, monkeypatch):
    """The stamp a prebuild leaves names its TIRx and nvcc; a machine with others is told
    that the entries will not be used, before it spends its time compiling."""
    where = tmp_path / "kc"
    assert "0 entries" in kernel_cache.check(where, "0.1") and "none prebuilt" in (
        kernel_cache.check(where, "0.1")
    )
    kernel_cache.stamp(where, "0.1")
    (where / "ab.so").write_bytes(b"x")
    assert kernel_cache.check(where, "0.1").endswith(
        f"1 entries in {where}, prebuilt with this machine's tirx 0.1; nvcc "
        f"{kernel_cache.nvcc_version()}"
    )
    assert "NOT usable here: built with tirx 0.1" in kernel_cache.check(where, "0.2")
    monkeypatch.setattr(kernel_cache, "nvcc_version", lambda: "Build cuda_12.8")
    assert "here tirx 0.1; nvcc Build cuda_12.8" in kernel_cache.check(where, "0.1")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_a_cpu_test_run_fills_a_set_cache_folder(tmp_path, monkeypatch):
    """``tirx-run test`` without a GPU builds each config's kernels into the cache folder
    when one is set (a prebuild for a GPU run), else only assembles them."""
    from tirx_kernels.core import defaults

    monkeypatch.setattr(toolchain, "gpu_arch", lambda: None)
    kernel = types.SimpleNamespace(archs=("sm_90a",), meta={})
    module = types.SimpleNamespace(get_kernel=lambda **_: [_copy_kernel(160), _copy_kernel(192)])
    monkeypatch.delenv(kernel_cache.ENV, raising=False)
    result = defaults.tirx_kernels_run_test(kernel=kernel, module=module, config={})
    assert "cubin" in result["detail"] and not list(tmp_path.iterdir())
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path))
    result = defaults.tirx_kernels_run_test(kernel=kernel, module=module, config={})
    assert len(list(tmp_path.glob("*.so"))) == 2
    assert f"libraries in {tmp_path}" in result["detail"] and not result["launched"]


def test_a_load_time_device_compile_is_cached_as_a_cubin(tmp_path, monkeypatch):
    """The CUDA runtime compiles a library's source at each load through the global
    ``tvm_callback_cuda_compile``; with a cache folder, it compiles once and stores the
    cubin, then returns the stored one (a prebuilt entry too); other formats, runs without
    the folder and machines without a GPU are passed through. (On an H100, 2026-12-07, the
    GPU test above saw a load store its cubin through it.)"""
    compiled = []

    def stand_in_compile(source, config):  # NVRTC needs a GPU machine's cuda-bindings
        compiled.append(source)
        return [bytearray(b"\x7fELF" + source.encode()), "ptx" if "ptx" in source else "cubin"]

    monkeypatch.setattr(toolchain, "_compile_device_code", stand_in_compile)
    monkeypatch.setattr(toolchain, "gpu_arch", lambda: "sm_90a")  # loads happen on GPUs
    device_compile = toolchain.tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    config = '{"cuda": {"arch": "sm_90a", "compiler": "nvrtc"}}'

    monkeypatch.delenv(kernel_cache.ENV, raising=False)
    assert bytes(device_compile("k1", config)[0]) == b"\x7fELFk1" and compiled == ["k1"]
    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path))
    for _ in range(2):
        binary, fmt = device_compile("k1", config)
        assert (bytes(binary), fmt) == (b"\x7fELFk1", "cubin")
    assert compiled == ["k1", "k1"]  # once without the folder, once to fill it
    reordered = '{"cuda": {"compiler": "nvrtc", "arch": "sm_90a"}}'
    assert kernel_cache.binary_entry(tmp_path, "k1", reordered).is_file()
    assert kernel_cache.binary_entry(tmp_path, "k2", config) != (
        kernel_cache.binary_entry(tmp_path, "k1", config)
    )
    device_compile("ptx k3", config)
    device_compile("ptx k3", config)
    assert compiled[2:] == ["ptx k3", "ptx k3"]  # only cubins are kept
    kernel_cache.binary_entry(tmp_path, "k4", config).write_bytes(b"prebuilt")
    assert bytes(device_compile("k4", config)[0]) == b"prebuilt" and "k4" not in compiled
    monkeypatch.setattr(toolchain, "gpu_arch", lambda: None)  # a CPU machine keeps nothing
    device_compile("k5", config)
    assert compiled[-1] == "k5" and not kernel_cache.binary_entry(tmp_path, "k5", config).exists()


def _tirx_run(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_tirx_run_prebuild_fills_the_folder_from_both_matrices(tmp_path):
    """``tirx-run prebuild`` builds a config's and a bench-only config's kernels into the
    folder (libraries and cubins, stamped); a second run keeps every entry as it was."""
    env = {kernel_cache.ENV: str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    args = ("prebuild", "--kernel", "rmsnorm", "--config", "bf16_t4113_h128")
    args += ("--config", "bf16_t16384_h5120", "--json")
    done = _tirx_run(*args, env=env)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [(r["label"], r["status"]) for r in results] == [
        ("bf16_t4113_h128", "PASS"),
        ("bf16_t16384_h5120", "PASS"),
    ]
    assert all(str(tmp_path) in r["detail"] for r in results)
    entries = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert len([n for n in entries if n.endswith(".so")]) == 2
    assert any(n.endswith(".cubin") for n in entries) and kernel_cache.STAMP in entries
    again = _tirx_run(*args, env=env)
    assert again.returncode == 0, again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == entries


def test_tirx_run_prebuild_needs_the_folder_named(tmp_path):
    done = _tirx_run("prebuild", "--kernel", "rmsnorm", env={kernel_cache.ENV: ""})
    assert done.returncode == 2 and done.stdout == ""
    assert f"{kernel_cache.ENV} is not set; fix:" in done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = _tirx_run("prebuild", "--kernel", "rmsnorm", env={kernel_cache.ENV: str(blocker)})
    assert done.returncode == 2 and "is not a writable folder" in done.stderr


def test_prebuild_requests_take_bench_configs_only_where_their_parameters_are_new():
    from tirx_kernels.core.cli import _prebuild_requests
    from tirx_kernels.core.meta import strip_label
    from tirx_kernels.core.registry import Registry

    registry = Registry.load()
    kernel = registry.get("flashinfer_rmsnorm")
    args = types.SimpleNamespace(kernels=[kernel.name], families=None, configs=None)
    args.log_dir = None
    requests = _prebuild_requests(registry, args)
    tested = [strip_label(c) for c in kernel.configs]
    new = [c["label"] for c in kernel.bench_matrix if strip_label(c) not in tested]
    assert 0 < len(new) < len(kernel.bench_labels)  # the matrices share some configs
    assert [(r.label, r.options) for r in requests] == [(k, {}) for k in kernel.labels] + [
        (k, {"bench": True}) for k in new
    ]
