# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""tirx_kernels.core.host: the per-signature plan cache and the coarse-key fast path."""

import pytest
import torch

from tirx_kernels.core import host


class Kernel:
    """A launch that refuses what a generated host function would (here: odd first
    arguments), before doing anything, and records what it ran."""

    def __init__(self):
        self.ran = []

    def __call__(self, x):
        if x % 2:
            raise ValueError("Mismatched X.shape[0] on argument #0")
        self.ran.append(x)


def test_run_reuses_a_kernel_checked_plan_under_its_coarse_key():
    kernel, resolved = Kernel(), []

    def plan_of(x):
        resolved.append(x)
        return host.kernel_checked(lambda x: kernel(x))

    fast: dict = {}
    for x in (2, 4, 6):
        host.run(fast, "key", (x,), plan_of, x)
    assert resolved == [2] and kernel.ran == [2, 4, 6]


def test_run_falls_back_to_the_full_lookup_when_the_kernel_refuses():
    kernel, resolved = Kernel(), []

    def plan_of(x):
        resolved.append(x)
        if x % 2:
            return lambda x: kernel.ran.append(("copied", x))  # another plan, not kernel-checked
        return host.kernel_checked(lambda x: kernel(x))

    fast: dict = {}
    host.run(fast, "key", (2,), plan_of, 2)
    host.run(fast, "key", (3,), plan_of, 3)  # the kernel refuses 3: the full plan runs it
    host.run(fast, "key", (4,), plan_of, 4)  # the kernel-checked plan is still the fast one
    assert resolved == [2, 3] and kernel.ran == [2, ("copied", 3), 4]


def test_run_raises_what_the_full_checks_raise():
    def plan_of(x):
        if x < 0:
            raise ValueError("op: x must be >= 0, got -1; pass abs(x)")
        return host.kernel_checked(lambda x: Kernel()(x))

    fast: dict = {}
    host.run(fast, "key", (2,), plan_of, 2)
    with pytest.raises(ValueError, match="must be >= 0"):  # the kernel's refusal is not shown
        host.run(fast, "key", (-1,), plan_of, -1)


def test_run_keeps_only_kernel_checked_plans_and_bounds_the_cache(monkeypatch):
    monkeypatch.setattr(host, "MAX_PLANS", 2)
    fast: dict = {}
    host.run(fast, "view", (2,), lambda: lambda x: None)
    assert fast == {}
    for key in ("a", "b", "c"):
        host.run(fast, key, (2,), lambda: host.kernel_checked(lambda x: None))
    assert list(fast) == ["c"]  # cleared when full, then refilled


def test_signature_tells_apart_what_a_plan_depends_on():
    x = torch.zeros(4, 8)
    assert host.signature(x) == host.signature(torch.zeros(4, 8))
    assert host.signature(x) != host.signature(x.t())  # strides
    assert host.signature(x) != host.signature(x.half())  # dtype
    assert host.signature(x[:, 1:]) != host.signature(x[:, :7])  # strides and 16-byte phase


def test_plain_call_needs_the_first_tensor_on_cuda_and_plain_others(monkeypatch):
    monkeypatch.setattr(host, "plain_cuda", lambda t: type(t) is torch.Tensor)  # no GPU here
    x = torch.zeros(2)

    class Sub(torch.Tensor):
        pass

    assert host.plain_call(x, x, x)
    assert not host.plain_call(x, x, x.as_subclass(Sub))
    assert not host.plain_call(x, None)
    assert not host.plain_call(x.as_subclass(Sub), x)


@pytest.mark.parametrize("direct", [True, False])
def test_bound_on_first_call_binds_once_to_the_first_arguments(direct, monkeypatch):
    binds, mains, launches = [], [], []

    def direct_launcher(executable, *args):
        binds.append(args)
        return (lambda *args: launches.append(("direct", args))) if direct else None

    def main_of(executable):
        mains.append(executable)
        return lambda *args: launches.append(("main", args))

    monkeypatch.setattr(host, "direct_launcher", direct_launcher)
    monkeypatch.setattr(host, "main_of", main_of)
    launch = host.bound_on_first_call("kernel")
    assert not binds  # nothing is bound before a call
    launch(1, 2.0)
    launch(1, 3.0)
    path = "direct" if direct else "main"
    assert binds == [(1, 2.0)] and mains == ([] if direct else ["kernel"])
    assert launches == [(path, (1, 2.0)), (path, (1, 3.0))]
