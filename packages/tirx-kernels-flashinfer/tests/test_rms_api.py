# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The four RMSNorm modules' shared contract functions, on the CPU with a fake launcher."""

import pytest
import torch

from tirx_kernels.core import toolchain
from tirx_kernels.flashinfer import _norm
from tirx_kernels.flashinfer.kernels import (
    fused_add_rmsnorm,
    gemma_fused_add_rmsnorm,
    gemma_rmsnorm,
    rmsnorm,
)

ALL = [rmsnorm, gemma_rmsnorm, fused_add_rmsnorm, gemma_fused_add_rmsnorm]


def cpu_randn(shape, dtype, seed, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale + shift).to(_norm.DTYPES[dtype])


@pytest.fixture
def fake_gpu(monkeypatch):
    """CPU data, a launcher that records, and a bench that returns what it was given."""
    launches = []
    monkeypatch.setattr(_norm, "randn", cpu_randn)
    monkeypatch.setattr(_norm, "launcher", lambda *key: lambda *args: launches.append((key, args)))
    monkeypatch.setattr(toolchain, "bench", lambda impls, references, **kw: (impls, references, kw))
    return launches


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_module_binds_its_own_weight_bias_and_op(module):
    api = module._API
    assert api.meta is module.KERNEL_META
    assert api.weight_bias == module.WEIGHT_BIAS
    assert module.KERNEL_META["name"] == f"flashinfer_{api.op}"
    assert module.run_bench.__self__ is api and module.get_kernel.__self__ is api


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_bench_launches_ours_with_the_host_schedule(module, fake_gpu):
    impls, refs, kw = module.run_bench("bfloat16", 3, 16, rounds=2, cooldown_s=0.5)
    assert set(impls) == {"tirx"} and set(refs) == {"flashinfer", "torch"}
    assert kw["rounds"] == 2 and kw["cooldown_s"] == 0.5
    impls["tirx"]()
    ((key, args),) = fake_gpu
    assert key == (module._API.kind, "bfloat16", 16, 3, module.WEIGHT_BIAS)
    assert args[-1] == 1e-6  # eps, after the tensors


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_the_torch_bench_reference_computes_the_kernel_function(module, fake_gpu):
    """torch's timed op (weight_bias folded into the weight) equals the fp32 reference."""
    data = module.prepare_data("bfloat16", 5, 64)
    want = module.reference(**data)
    want = want[1] if isinstance(want, tuple) else want  # fused add: (residual, output)
    _, refs, _ = module.run_bench("bfloat16", 5, 64)
    got = refs["torch"]()()
    torch.testing.assert_close(got.float(), want, **_norm.dtype_tols("bfloat16"))
