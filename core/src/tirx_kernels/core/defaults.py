# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Default implementations of the first-result protocol hooks (tried last)."""

from __future__ import annotations

from .hookspecs import hookimpl


@hookimpl(trylast=True)
def tirx_kernels_run_test(module, config):
    module.run_test(**config)
    return True


@hookimpl(trylast=True)
def tirx_kernels_run_bench(module, config, options):
    if not hasattr(module, "run_bench"):
        raise NotImplementedError(f"{module.__name__} has no run_bench")
    return module.run_bench(**config, **options)
