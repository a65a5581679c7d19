# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Default implementations of the first-result protocol hooks (tried last).

test: with a GPU whose arch the kernel lists, ``module.run_test(**config)``; without one,
compile every PrimFunc of ``module.get_kernel(**config)`` to a cubin for each listed arch
and report a compile pass with the launch skipped (what CI runs over every config).
bench: ``module.run_bench(**config, **options)``; SKIP without a suitable GPU.
A kernel with ``KERNEL_META["num_gpus"] = N > 1`` runs both on N rank processes
(:mod:`.distributed`) when N such GPUs are visible; else test compiles and bench skips.
prebuild (``tirx-run prebuild``, not a hook): a config's kernels into the kernel cache.
"""

from __future__ import annotations

import unittest

from .hookspecs import hookimpl


class CompileError(Exception):
    """get_kernel, TIRx lowering, CUDA codegen or nvcc failed: a FAIL of the kernel."""


@hookimpl(trylast=True)
def tirx_kernels_run_test(kernel, module, config):
    from . import distributed, kernel_cache, toolchain

    arch = toolchain.gpu_arch()
    why = f"found {arch}" if arch else "no CUDA GPU"
    ranks = distributed.num_gpus(kernel)
    if ranks > 1:
        found, _ = distributed.gpus_available(kernel.archs)
        if found >= ranks:
            distributed.launch(kernel.module, config, "test", ranks)
            return {"launched": True, "detail": f"ran on {ranks} ranks"}
        why = distributed.needs_message(ranks, kernel.archs, found)
    elif arch in kernel.archs:
        module.run_test(**config)
        return {"launched": True}
    # with a kernel cache folder set, the libraries a GPU machine would load go there
    # (the same nvcc check): toolchain.prebuild
    where = kernel_cache.folder()
    build = toolchain.prebuild if where else (lambda f, a: len(toolchain.compile_cubin(f, a)))
    count, size = build_kernels(kernel, module, config, build)
    built = f"libraries in {where}" if where else "cubin"
    return {
        "launched": False,
        "detail": f"compiled {count} kernel(s) to {'/'.join(kernel.archs)} {built} "
        f"({size} bytes); launch skipped: {why}",
    }


def prebuild(kernel, module, config) -> dict:
    """``tirx-run prebuild``: every kernel of ``config`` built into the cache folder as the
    libraries and cubins a GPU machine of the same TIRx and nvcc loads (no GPU needed)."""
    from . import kernel_cache, toolchain

    count, size = build_kernels(kernel, module, config, toolchain.prebuild)
    return {
        "launched": None,
        "detail": f"{count} kernel(s) for {'/'.join(kernel.archs)} in "
        f"{kernel_cache.folder()} ({size} bytes)",
    }


def build_kernels(kernel, module, config, build) -> tuple[int, int]:
    """(kernels, bytes): each PrimFunc of ``module.get_kernel(**config)`` built by
    ``build(func, arch)`` for each arch the kernel lists. CompileError when one fails."""
    try:
        funcs = module.get_kernel(**config)
        funcs = funcs if isinstance(funcs, (list, tuple)) else [funcs]
        return len(funcs), sum(build(f, a) for a in kernel.archs for f in funcs)
    except (unittest.SkipTest, AssertionError):
        raise  # get_kernel may skip or assert like run_test; keep those statuses
    except Exception as e:
        raise CompileError(f"{type(e).__name__}: {e}") from e


@hookimpl(trylast=True)
def tirx_kernels_run_bench(kernel, module, config, options):
    from . import distributed, toolchain

    arch = toolchain.gpu_arch()
    ranks = distributed.num_gpus(kernel)
    if ranks > 1:
        found, _ = distributed.gpus_available(kernel.archs)
        if found < ranks:
            raise unittest.SkipTest(distributed.needs_message(ranks, kernel.archs, found))
    elif arch not in kernel.archs:
        raise unittest.SkipTest(f"needs a {'/'.join(kernel.archs)} GPU, found {arch}")
    if not hasattr(module, "run_bench"):
        raise unittest.SkipTest(f"{module.__name__} has no run_bench")
    if ranks > 1:
        return distributed.launch(kernel.module, config, "bench", ranks, options=options)
    return module.run_bench(**config, **options)
