# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The hooks a kernel family implements. Documented in core/README.md ("Hooks").

A family is one plugin module named by an entry point in the ``tirx_kernels`` group.
Hooks only ever gain arguments; an implementation may accept any subset of them.
"""

from __future__ import annotations

import pluggy

PROJECT = "tirx_kernels"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def tirx_kernels_family():
    """Declare the family: return one :class:`tirx_kernels.core.family.Family`."""


@hookspec
def tirx_kernels_register_kernels(family, register):
    """Contribute kernel modules by import path, without importing them.

    Call ``register("tirx_kernels.basic.kernels.rmsnorm")`` once per kernel module.
    The host reads ``KERNEL_META`` and the config matrices from the source as literals.
    """


@hookspec
def tirx_kernels_suite_configs(family, register):
    """Contribute bench-suite YAML files: call ``register(path)`` once per file."""


@hookspec(firstresult=True)
def tirx_kernels_run_test(kernel, module, config):
    """Run one correctness config; first non-None result wins.

    ``kernel`` is the registry entry, ``module`` the imported kernel module and ``config``
    the keyword arguments (label stripped). Return ``{"launched": bool, "detail": str}``;
    raise AssertionError
    on mismatch and ``unittest.SkipTest`` when hardware or a reference is missing.
    The default implementation calls ``module.run_test(**config)``.
    """


@hookspec(firstresult=True)
def tirx_kernels_run_bench(kernel, module, config, options):
    """Run one bench config; first non-None result wins.

    ``options`` holds the timer settings the user gave (``warmup``, ``repeat``, ``timer``)
    plus ``rounds`` and ``cooldown_s``. Return the bench result dict (microseconds).
    The default implementation calls ``module.run_bench(**config, **options)``.
    """
