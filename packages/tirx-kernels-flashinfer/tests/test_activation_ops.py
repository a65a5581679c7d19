# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The gated-activation public ops: registration, argument checks and fakes on the CPU; on a
GPU, results against the torch fp32 reference, under CUDA-graph capture and torch.compile."""

import inspect

import pytest
import torch

from tirx_kernels.core.ops import is_registered
from tirx_kernels.flashinfer import activation
from tirx_kernels.flashinfer.kernels import activation as contract

ACTS = ("silu", "gelu", "gelu_tanh")
OPS = tuple(f"flashinfer_{act}_and_mul" for act in ACTS)


def wrapper(act):
    return getattr(activation, f"{act}_and_mul")


def test_the_ops_are_registered_and_named_by_the_kernel_module():
    assert contract.PUBLIC_OPS == OPS
    assert all(is_registered(name) for name in OPS)


@pytest.mark.parametrize("name", OPS)
def test_the_ops_write_out_only(name):
    schema = getattr(torch.ops.tirx_kernels, name).default._schema
    assert [a.name for a in schema.arguments] == ["out", "input", "enable_pdl"]
    assert [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write] == ["out"]


@pytest.mark.parametrize("act", ACTS)
def test_the_wrappers_keep_flashinfers_signature(act):
    params = inspect.signature(wrapper(act)).parameters
    assert list(params) == ["input", "out", "enable_pdl"]
    assert params["out"].default is None and params["enable_pdl"].default is None


def x(shape=(3, 64), dtype=torch.bfloat16):
    return torch.randn(shape).to(dtype)


BAD = {
    "input must be \\(..., 2 \\* d\\) with d a positive multiple of 4": (x((3, 60)), None),
    "input must be bfloat16 or float16": (x(dtype=torch.float32), None),
    "input's last dimension must be contiguous": (x((64, 3)).t(), None),
    "out must be \\(3, 32\\) of torch.bfloat16": (x(), torch.empty(3, 64, dtype=torch.bfloat16)),
    "out's last dimension must be contiguous": (
        x(),
        torch.empty(32, 3, dtype=torch.bfloat16).t(),
    ),
    "input must be a CUDA tensor": (x(), None),
}


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("message", list(BAD))
def test_bad_arguments_raise_value_errors_naming_them(act, message):
    inp, out = BAD[message]
    with pytest.raises(ValueError, match=f"^{act}_and_mul: {message}"):
        wrapper(act)(inp, out=out)


def test_a_forced_schedule_must_be_known():
    inp = x()
    out = torch.empty(3, 32, dtype=inp.dtype)
    with pytest.raises(ValueError, match="gelu_and_mul: schedule must be one of"):
        activation.act_and_mul_into("gelu", out, inp, schedule="tiled")


def test_the_fakes_run_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        inp = torch.empty(2, 5, 256, dtype=torch.float16)
        outs = [wrapper(act)(inp, enable_pdl=True) for act in ACTS]
        given = torch.empty(2, 5, 128, dtype=torch.float16)
        assert activation.gelu_and_mul(inp, out=given) is given
    assert all(o.shape == (2, 5, 128) and o.dtype == torch.float16 for o in outs)


def test_fullgraph_tracing_sees_the_ops_without_a_gpu():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def model(inp):
        return [wrapper(act)(inp) for act in ACTS]

    with FakeTensorMode():
        graph = make_fx(model)(torch.empty(4, 64, dtype=torch.bfloat16))
    called = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert {f"tirx_kernels.{name}.default" for name in OPS} <= called


# ---- GPU (the hopper fixture of conftest.py skips without an sm_90a GPU)


def _input(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda").to(dtype)


def _check(act, inp, out):
    from tirx_kernels.core.testing import assert_close

    atol, rtol = contract._tolerances(act, str(inp.dtype).removeprefix("torch."))
    want = contract.reference(inp, act)
    assert_close(f"{act} vs torch fp32", out, want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((7, 2 * 3420), torch.bfloat16),
        ((2, 33, 2 * 4096), torch.float16),
        ((1, 2 * 14336), torch.bfloat16),
    ],
)
def test_the_ops_match_the_fp32_reference(hopper, act, shape, dtype):
    inp = _input(shape, dtype)
    out = wrapper(act)(inp)
    _check(act, inp, out)
    given = torch.empty_like(out)
    assert wrapper(act)(inp, out=given, enable_pdl=True) is given
    assert torch.equal(given, out)


@pytest.mark.parametrize("act", ACTS)
def test_the_ops_replay_in_a_cuda_graph(hopper, act):
    inp = _input((129, 2 * 4096), torch.bfloat16)
    wrapper(act)(inp)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = wrapper(act)(inp)
    for seed in (1, 2):
        inp.copy_(_input(inp.shape, inp.dtype, seed))
        graph.replay()
        torch.cuda.synchronize()
        _check(act, inp, out)


def test_the_ops_compile_fullgraph(hopper, backend):
    def model(inp):
        return [wrapper(act)(inp * 1) for act in ACTS]

    compiled = torch.compile(model, fullgraph=True, backend=backend)
    inp = _input((33, 2 * 4096), torch.float16)
    for got, want in zip(compiled(inp), model(inp), strict=True):
        assert torch.equal(got, want)


def test_strided_and_unaligned_inputs_give_the_contiguous_bits(hopper):
    wide = _input((9, 3 * 4096), torch.bfloat16)
    inp = wide[:, : 2 * 4096]  # rows with a stride
    want = activation.silu_and_mul(inp.contiguous())
    assert torch.equal(activation.silu_and_mul(inp), want)
    out = torch.empty(9, 2, 4096, dtype=torch.bfloat16, device="cuda")[:, 0]  # strided out
    assert activation.silu_and_mul(inp, out=out) is out
    assert torch.equal(out, want)
    flat = _input((2 * 4096 + 8,), torch.bfloat16)
    shifted = flat[4 : 4 + 2 * 4096].view(1, -1)  # contiguous, 8 bytes off 16
    assert torch.equal(activation.gelu_and_mul(shifted), activation.gelu_and_mul(shifted.clone()))
