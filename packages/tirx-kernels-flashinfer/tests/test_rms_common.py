# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The four RMSNorm modules' shared contract code, on the CPU with a fake launcher."""

import pytest
import torch

from tirx_kernels.core import testing, toolchain
from tirx_kernels.flashinfer import norm
from tirx_kernels.flashinfer.kernels import (
    fused_add_rmsnorm,
    gemma_fused_add_rmsnorm,
    gemma_rmsnorm,
    rmsnorm,
)

ALL = [rmsnorm, gemma_rmsnorm, fused_add_rmsnorm, gemma_fused_add_rmsnorm]
KIND = {rmsnorm: "rmsnorm", gemma_rmsnorm: "rmsnorm"}  # else fused_add_rmsnorm
name_of = lambda m: m.__name__.rsplit(".", 1)[-1]  # noqa: E731


@pytest.fixture
def fake_gpu(monkeypatch):
    """CPU data, a launcher that records, and a bench that returns what it was given."""
    launches = []
    cpu_randn = testing.randn
    monkeypatch.setattr(testing, "randn", lambda *a, **kw: cpu_randn(*a, **kw, device="cpu"))
    monkeypatch.setattr(norm, "launcher", lambda *key: lambda *args: launches.append((key, args)))
    monkeypatch.setattr(toolchain, "bench", lambda impls, references, **kw: (impls, references, kw))
    return launches


@pytest.mark.parametrize("module", ALL, ids=name_of)
def test_each_module_names_its_own_op_weight_bias_and_reference(module):
    name = name_of(module)
    assert module.KERNEL_META["name"] == f"flashinfer_{name}"
    assert module.PUBLIC_OPS == (f"flashinfer_{name}",)
    assert module.UPSTREAM == name  # flashinfer.norm.<name>
    assert module.WEIGHT_BIAS == (1.0 if name.startswith("gemma") else 0.0)


@pytest.mark.parametrize("module", ALL, ids=name_of)
def test_contract_functions_are_module_functions(module):
    """No bound methods of a shared object (contract v2): plain functions of the module."""
    for name in ("get_kernel", "prepare_data", "reference", "run_test", "run_bench"):
        func = getattr(module, name)
        assert func.__module__ == module.__name__ and not hasattr(func, "__self__")


@pytest.mark.parametrize("module", ALL, ids=name_of)
def test_bench_launches_ours_with_the_host_schedule(module, fake_gpu):
    impls, refs, kw = module.run_bench("bfloat16", 3, 16, rounds=2, cooldown_s=0.5)
    assert set(impls) == {"tirx"} and set(refs) == {"flashinfer", "torch"}
    assert kw["rounds"] == 2 and kw["cooldown_s"] == 0.5
    impls["tirx"]()
    ((key, args),) = fake_gpu
    kind = KIND.get(module, "fused_add_rmsnorm")
    assert key == (kind, "bfloat16", 16, 3, module.WEIGHT_BIAS)
    assert args[-1] == 1e-6  # eps, after the tensors


@pytest.mark.parametrize("module", ALL, ids=name_of)
def test_the_torch_bench_reference_computes_the_kernel_function(module, fake_gpu):
    """torch's timed op (weight_bias folded into the weight) equals the fp32 reference."""
    data = module.prepare_data("bfloat16", 5, 64)
    want = module.reference(**data)
    want = want[1] if isinstance(want, tuple) else want  # fused add: (residual, output)
    _, refs, _ = module.run_bench("bfloat16", 5, 64)
    got = refs["torch"]()()
    torch.testing.assert_close(got.float(), want, **testing.dtype_tols("bfloat16"))
