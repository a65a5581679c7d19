# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Public ops are torch custom ops: eager, fake (meta) and torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core.ops import is_registered, public_op


@public_op("test_scale_into", mutates_args=("out",))
def scale_into(out: torch.Tensor, x: torch.Tensor, factor: float) -> None:
    out.copy_(x * factor)


def _same_shape(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@public_op("test_double", fake=_same_shape)
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """The Python wrapper users call: allocates the output, then runs the op."""
    out = torch.empty_like(x)
    torch.ops.tirx_kernels.test_scale_into(out, x, factor)
    return out


def test_ops_are_registered_in_the_tirx_kernels_namespace():
    assert is_registered("test_scale_into") and is_registered("test_double")
    assert not is_registered("test_never_declared")


def test_eager_call_runs_the_implementation():
    x = torch.arange(6.0)
    assert torch.equal(scale(x, 3.0), x * 3)
    assert torch.equal(torch.ops.tirx_kernels.test_double(x), x * 2)


def test_fake_implementations_give_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 5, dtype=torch.bfloat16)
        y = torch.ops.tirx_kernels.test_double(x)
        out = torch.empty_like(x)
        torch.ops.tirx_kernels.test_scale_into(out, x, 2.0)
    assert y.shape == (4, 5) and y.dtype == torch.bfloat16


def test_fullgraph_compile_traces_through_the_ops():
    def model(x):
        return torch.ops.tirx_kernels.test_double(scale(x, 0.5) + 1)

    compiled = torch.compile(model, fullgraph=True, backend="eager")
    x = torch.randn(3, 7)
    torch.testing.assert_close(compiled(x), model(x))


def test_a_bad_op_name_is_refused():
    with pytest.raises(ValueError, match="must be a Python identifier"):
        public_op("bad-name")


@public_op("test_add_into", schema="(Tensor(a!) out, Tensor x, float value) -> ()")
def add_into(out, *args) -> None:
    x, value = args
    out.copy_(x + value)


def test_a_given_schema_replaces_the_inferred_one():
    schema = str(torch.ops.tirx_kernels.test_add_into.default._schema)
    assert schema == "tirx_kernels::test_add_into(Tensor(a!) out, Tensor x, float value) -> ()"
    out, x = torch.empty(3), torch.arange(3.0)
    torch.ops.tirx_kernels.test_add_into(out, x, value=0.5)
    assert torch.equal(out, x + 0.5)
