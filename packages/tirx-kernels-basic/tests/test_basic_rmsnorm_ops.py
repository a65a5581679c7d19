# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op ``torch.ops.tirx_kernels.basic_rmsnorm`` and its wrapper ``rmsnorm``.

CPU: registration, argument checks, the fake. GPU (sm_90a; skipped elsewhere): the op
against an fp32 reference, eagerly, replayed from a CUDA graph and under
``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tirx_kernels.basic import norm, rmsnorm
from tirx_kernels.basic.kernels import rmsnorm as rmsnorm_kernel
from tirx_kernels.core import testing
from tirx_kernels.core.ops import is_registered

BF16 = torch.bfloat16
needs_sm90 = testing.needs_gpu(rmsnorm_kernel.KERNEL_META)


def test_the_op_is_registered_and_named_by_the_kernel_module():
    assert rmsnorm_kernel.PUBLIC_OPS == ("basic_rmsnorm",)
    assert is_registered("basic_rmsnorm")
    assert rmsnorm is norm.rmsnorm


def _args(batch=4, hidden=64, dtype=BF16, wshape=None, wdtype=None, oshape=None, odtype=None):
    x = (
        torch.zeros(batch, hidden, dtype=dtype)
        if isinstance(batch, int)
        else torch.zeros(*batch, hidden, dtype=dtype)
    )
    w = torch.ones(wshape or (hidden,), dtype=wdtype or dtype)
    out = torch.empty(oshape or x.shape, dtype=odtype or dtype)
    return out, x, w


BAD = {
    "input_dtype": (dict(dtype=torch.float32), r"input must be bfloat16 or float16.*input\.to\("),
    "input_dim": (dict(batch=(2, 3)), r"input must be 2-D \(batch, hidden\).*input\.view\("),
    "hidden_ragged": (
        dict(hidden=100),
        r"input\.shape\[1\] \(hidden\) must be a multiple of 8.*got 100",
    ),
    "hidden_large": (
        dict(hidden=32776),
        r"in \[8, 32768\], got 32776; use torch\.nn\.functional\.rms_norm",
    ),
    "weight_shape": (dict(wshape=(32,)), r"weight must have shape \(64,\).*got \(32,\)"),
    "weight_dtype": (
        dict(wdtype=torch.float16),
        r"weight must have input's dtype.*weight\.to\(input\.dtype\)",
    ),
    "out_shape": (dict(oshape=(4, 32)), r"out must have input's shape.*torch\.empty_like\(input\)"),
    "out_dtype": (dict(odtype=torch.float16), r"out must have input's shape \(4, 64\) and dtype"),
    "input_cpu": (dict(), r"input must be a CUDA tensor, got cpu; move it with input\.cuda\(\)"),
}


@pytest.mark.parametrize("bad, message", BAD.values(), ids=BAD.keys())
def test_bad_arguments_raise_value_error_naming_them(bad, message):
    out, x, w = _args(**bad)
    with pytest.raises(ValueError, match=message):
        torch.ops.tirx_kernels.basic_rmsnorm(out, x, w, 1e-6)
    with pytest.raises(ValueError, match=message):
        rmsnorm(x, w, out=out)


def test_the_fake_gives_metadata_without_running():
    with FakeTensorMode():
        out, x, w = _args(batch=3, hidden=4096)
        assert torch.ops.tirx_kernels.basic_rmsnorm(out, x, w, 1e-5) is None
        y = rmsnorm(x, w)
        assert (y.shape, y.dtype) == ((3, 4096), BF16)


def test_fullgraph_compile_traces_the_wrapper_into_one_graph_with_the_op():
    _, x, w = _args()
    testing.assert_fullgraph_calls(
        torch.ops.tirx_kernels.basic_rmsnorm,
        lambda x, w: rmsnorm(x * 2, w) + 1,
        x,
        w,
        refusal="input must be a CUDA tensor",  # the op ran on CPU
    )


# ---- GPU ------------------------------------------------------------------------------


def _data(batch, hidden, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, hidden, generator=g) * torch.randn(batch, 1, generator=g).exp()
    w = 1.0 + 0.5 * torch.randn(hidden, generator=g)
    return x.to(dtype).cuda(), w.to(dtype).cuda()


def _check(y, x, w, eps=1e-6):
    """y vs the fp32 reference, within the kernel module's test tolerance."""
    tols = rmsnorm_kernel.tolerance("bfloat16" if x.dtype == BF16 else "float16")
    torch.testing.assert_close(y.float(), rmsnorm_kernel.reference(x, w, eps), **tols)


@needs_sm90
@pytest.mark.parametrize(
    "batch, hidden, dtype",
    [
        (1, 4096, BF16),
        (7, 2048, BF16),
        (300, 128, torch.float16),
        (33, 1000, BF16),
        (5, 5120, torch.float16),
    ],
)
def test_eager_matches_fp32_reference(batch, hidden, dtype):
    x, w = _data(batch, hidden, dtype)
    _check(rmsnorm(x, w), x, w)
    out = torch.full_like(x, float("nan"))
    assert rmsnorm(x, w, 1e-5, out=out) is out
    _check(out, x, w, 1e-5)


@needs_sm90
def test_empty_batch_and_bad_memory_on_gpu():
    x, w = _data(0, 4096, BF16)
    assert rmsnorm(x, w).shape == (0, 4096)
    x, w = _data(8, 4096, BF16)
    with pytest.raises(ValueError, match="input must be contiguous"):
        rmsnorm(x[::2], w)
    with pytest.raises(ValueError, match="input must be 16-byte aligned"):
        rmsnorm(testing.misaligned_like(x), w)
    with pytest.raises(ValueError, match="weight must be a CUDA tensor"):
        rmsnorm(x, w.cpu())


@needs_sm90
def test_opcheck():
    x, w = _data(16, 4096, BF16)
    out = torch.empty_like(x)
    torch.library.opcheck(torch.ops.tirx_kernels.basic_rmsnorm.default, (out, x, w, 1e-6))


@needs_sm90
def test_cuda_graph_capture_and_replay():
    x, w = _data(64, 4096, BF16)
    out = torch.empty_like(x)
    x2, _ = _data(64, 4096, BF16, seed=1)
    _check(testing.replayed(lambda: rmsnorm(x, w, out=out), out, (x, x2)), x2, w)


@needs_sm90
def test_torch_compile_fullgraph():
    def model(x, w):
        return rmsnorm(x * 2, w, 1e-6) + 1

    x, w = _data(32, 4096, BF16)
    got = torch.compile(model, fullgraph=True)(x, w)
    want = rmsnorm(x * 2, w, 1e-6) + 1
    torch.testing.assert_close(got, want)
