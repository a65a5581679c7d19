# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The example family's own tests: its op checks arguments, its fake gives shapes, and on an
sm_90a GPU it matches torch eagerly, in a CUDA graph and under torch.compile."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.hello import add

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_op_is_registered():
    assert hasattr(torch.ops.tirx_kernels, "hello_add")


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32), "a: dtype"),
        (torch.zeros(2, 2), torch.zeros(2, 2), "a: must be a contiguous 1D"),
        (torch.zeros(4), torch.zeros(5), "a and b: must match"),
    ],
)
def test_bad_arguments_name_the_argument(a, b, match):
    with pytest.raises(ValueError, match=match):
        add(a, b)


def test_fake_shapes_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(10, dtype=torch.bfloat16)
        assert add(a, a).shape == (10,)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_launch_matches_the_kernel_without_a_gpu(monkeypatch, dtype):
    """The op's launch on CPU tensors, against the uncompiled kernel's parameters."""
    from tirx_kernels.core import testing
    from tirx_kernels.hello import elementwise
    from tirx_kernels.hello._add_tirx import make_add

    launched: list = []
    monkeypatch.setattr(elementwise, "compiled", testing.checked_launches(make_add, launched))
    a = torch.zeros(37, dtype=dtype)
    add(a, a)
    assert len(launched) == 1


@needs_gpu
@pytest.mark.parametrize("n", [1, 7, 1000003])
def test_eager_graph_and_compile_match_torch(n):
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(add(a, b), a + b, rtol=0, atol=0)
    out = torch.empty_like(a)
    graph = torch.cuda.CUDAGraph()
    add(a, b, out)  # compile outside capture
    with torch.cuda.graph(graph):
        add(a, b, out)
    out.zero_()
    graph.replay()
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)
    compiled = torch.compile(lambda x, y: add(x, y) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), (a + b) * 2, rtol=0, atol=0)
