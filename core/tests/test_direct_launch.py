# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The direct launcher (``direct_launch``, ``launch_spec``): what it reads from a kernel's
generated host code, the checks its C++ makes before a launch (run dry on CPU tensors:
the kernel's parameters come back instead of a launch) and, on a GPU, that it writes what
the host function writes, on the caller's stream and under CUDA-graph capture."""

from __future__ import annotations

import struct

import pytest
import torch

from tirx_kernels.core import direct_launch, launch_spec, toolchain

GPU = toolchain.gpu_arch() == "sm_90a"
needs_gpu = pytest.mark.skipif(not GPU, reason="needs an sm_90a GPU")


def _axpy(grid_of, threads: int = 32):
    """y += alpha * x over n elements, ``threads`` a block, ``grid_of(n, blocks)`` blocks (an
    expression of the shape, of the int argument ``blocks``, or of both)."""
    T = toolchain.T
    n = T.dynamic("n")

    @T.function
    def axpy(
        x: T.Tensor((n,), "float32", data_alignment=16),
        y: T.Tensor((n,), "float32", data_alignment=16),
        alpha: T.float32,
        blocks: T.int32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=grid_of(n, blocks), block=threads))
        i = T.cuda.block_idx("x") * threads + T.cuda.thread_idx("x")
        if i < n:
            y[i] = y[i] + alpha * x[i]

    return axpy


def _f32(word: int) -> float:
    return struct.unpack("f", struct.pack("I", word & 0xFFFFFFFF))[0]


@pytest.fixture(scope="module")
def fixed():
    return toolchain.compile(_axpy(lambda n, blocks: (n + 31) // 32))


@pytest.fixture(scope="module")
def from_argument():
    return toolchain.compile(_axpy(lambda n, blocks: blocks))


def test_the_spec_makes_each_parameter_from_the_arguments(fixed):
    x, y = torch.zeros(100), torch.zeros(100)
    (launch,) = launch_spec.launch_spec(toolchain.host_code(fixed), (x, y, 2.0, 5))
    assert launch.dims == [4, 1, 1, 32, 1, 1]  # ceil(100 / 32) blocks, for this n
    # the kernel's own parameter list decides the order; each kind matches its C type
    signature = toolchain.cuda_source(fixed).split("axpy_kernel(")[1].split(")")[0]
    c_types = [p.strip().rsplit(" ", 1)[0] for p in signature.split(",")]
    assert len(c_types) == len(launch.params)
    for c_type, (kind, value) in zip(c_types, launch.params):
        if kind == launch_spec.POINTER:
            assert "float*" in c_type and value in (0, 1)
        elif kind == launch_spec.F32:
            assert c_type == "float" and value == 2  # alpha, argument #2
        else:
            assert kind in (launch_spec.CONST_I32, launch_spec.CONST_I64) and "int" in c_type
            assert value == 100  # n, a constant of this shape
    pointers = [value for kind, value in launch.params if kind == launch_spec.POINTER]
    assert sorted(pointers) == [0, 1]


def test_a_dry_call_passes_the_callers_pointers_and_scalars(fixed):
    x, y = torch.zeros(100), torch.zeros(100)
    launch = direct_launch.bound(fixed, x, y, 2.0, 5, dry=True)
    x2, y2 = torch.ones(100), torch.ones(100)  # another pair of the same shape
    words = list(launch(x2, y2, 0.5, 5))
    (spec,) = launch_spec.launch_spec(toolchain.host_code(fixed), (x, y, 2.0, 5))
    expected = {0: x2.data_ptr(), 1: y2.data_ptr()}
    for (kind, value), word in zip(spec.params, words):
        if kind == launch_spec.POINTER:
            assert word == expected[value]
        elif kind == launch_spec.F32:
            assert _f32(word) == 0.5
    assert words[len(spec.params) :] == [4, 1, 1, 32, 1, 1]


def test_a_grid_taken_from_an_argument_is_read_per_call(from_argument):
    x, y = torch.zeros(64), torch.zeros(64)
    (spec,) = launch_spec.launch_spec(toolchain.host_code(from_argument), (x, y, 1.0, 2))
    assert spec.dims == [-4, 1, 1, 32, 1, 1]  # argument #3, blocks
    launch = direct_launch.bound(from_argument, x, y, 1.0, 2, dry=True)
    assert list(launch(x, y, 1.0, 7))[-6:] == [7, 1, 1, 32, 1, 1]
    with pytest.raises(ValueError, match="launch dimension 0 is 0"):
        launch(x, y, 1.0, 0)


def test_an_argument_inside_a_launch_dimension_is_pinned_to_its_value():
    kernel = toolchain.compile(_axpy(lambda n, blocks: (blocks + 1) // 2, threads=64))
    x, y = torch.zeros(640), torch.zeros(640)
    (spec,) = launch_spec.launch_spec(toolchain.host_code(kernel), (x, y, 1.0, 9))
    assert spec.dims == [5, 1, 1, 64, 1, 1] and spec.pinned == [(3, 9)]
    launch = direct_launch.bound(kernel, x, y, 1.0, 9, dry=True)
    assert list(launch(x, y, 0.5, 9))[-6:] == [5, 1, 1, 64, 1, 1]
    with pytest.raises(ValueError, match="must be the size this launcher was bound to, 9"):
        launch(x, y, 0.5, 11)  # another grid: the full checks and the host function take it


def test_constants_are_baked_in_and_no_longer_passed(from_argument):
    x, y = torch.zeros(64), torch.zeros(64)
    launch = direct_launch.bound(from_argument, x, y, 0.25, 3, constants=(2, 3), dry=True)
    x2 = torch.zeros(64)
    words = list(launch(x2, y))  # alpha and blocks are the examples' now
    (spec,) = launch_spec.launch_spec(toolchain.host_code(from_argument), (x, y, 0.25, 3))
    for (kind, value), word in zip(spec.params, words):
        if kind == launch_spec.F32:
            assert _f32(word) == 0.25
        elif kind == launch_spec.POINTER:
            assert word == (x2, y)[value].data_ptr()
    assert words[-6:] == [3, 1, 1, 32, 1, 1]
    with pytest.raises(TypeError, match="expected 2 arguments"):
        launch(x2, y, 0.25, 3)
    with pytest.raises(ValueError, match="only scalars"):
        direct_launch.bound(from_argument, x, y, 0.25, 3, constants=(0,), dry=True)


def test_tensors_as_called_are_taken_unviewed_and_checked_by_their_own_shape(fixed):
    """``as_called``: callers pass x as (10, 10) and y as (4, 25) where the kernel declares
    (100,): the same parameters as the 1D views give, and the 1D shape is now refused."""
    x, y = torch.zeros(100), torch.zeros(100)
    x2, y2 = torch.ones(10, 10), torch.ones(4, 25)
    as_called = (x2, y2)
    launch = direct_launch.bound(fixed, x, y, 2.0, 5, as_called=as_called, dry=True)
    plain = direct_launch.bound(fixed, x, y, 2.0, 5, dry=True)
    assert list(launch(x2, y2, 0.5, 5)) == list(plain(x2.view(-1), y2.view(-1), 0.5, 5))
    with pytest.raises(ValueError):
        launch(x2.view(-1), y2, 0.5, 5)  # the declared shape is no longer what it checks
    with pytest.raises(ValueError):
        launch(torch.ones(10, 20)[:, ::2], y2, 0.5, 5)  # strided


@pytest.mark.parametrize(
    "called",
    [
        torch.zeros(10, 20)[:, ::2],  # not contiguous
        torch.zeros(10, 11),  # another element count
        torch.zeros(10, 10, dtype=torch.float64),  # another dtype
    ],
)
def test_a_tensor_as_called_must_hold_the_examples_elements(fixed, called):
    x, y = torch.zeros(100), torch.zeros(100)
    assert direct_launch.bound(fixed, x, y, 2.0, 5, as_called=(called,), dry=True) is None


@pytest.mark.parametrize(
    "bad, error",
    [
        (lambda x, y: (x[:50], y, 1.0, 5), ValueError),  # another shape
        (lambda x, y: (x.double(), y, 1.0, 5), ValueError),  # another dtype
        (lambda x, y: (x, torch.zeros(200)[::2], 1.0, 5), ValueError),  # strided
        (lambda x, y: (torch.zeros(101)[1:], y, 1.0, 5), ValueError),  # 4 bytes off 16
        (lambda x, y: (x, y, 1.0), TypeError),  # an argument missing
        (lambda x, y: (x, 3, 1.0, 5), TypeError),  # not a tensor
    ],
)
def test_the_launcher_refuses_what_the_host_function_refuses(fixed, bad, error):
    x, y = torch.zeros(100), torch.zeros(100)
    launch = direct_launch.bound(fixed, x, y, 2.0, 5, dry=True)
    with pytest.raises(error):
        launch(*bad(x, y))


def test_host_code_it_does_not_know_keeps_the_host_function(fixed, monkeypatch):
    x, y = torch.zeros(100), torch.zeros(100)
    known = launch_spec._KNOWN_CALLS - {"tirx.call_extern"}  # say set-device is unknown
    monkeypatch.setattr(launch_spec, "_KNOWN_CALLS", known)
    assert launch_spec.launch_spec(toolchain.host_code(fixed), (x, y, 2.0, 5)) is None
    assert direct_launch.bound(fixed, x, y, 2.0, 5, dry=True) is None


def test_a_kernel_that_cannot_be_loaded_keeps_the_host_function(fixed, monkeypatch):
    x, y = torch.zeros(100), torch.zeros(100)
    monkeypatch.setattr(direct_launch, "_on_gpu", lambda examples: True)  # say they are

    def no_driver(*args):
        raise RuntimeError("CUDA Error: cudaErrorNoDevice")

    monkeypatch.setattr(direct_launch, "_kernel", no_driver)
    with pytest.warns(RuntimeWarning, match="using the generated host function"):
        assert direct_launch.bound(fixed, x, y, 2.0, 5) is None


def test_stand_ins_and_cpu_tensors_get_no_launcher(fixed):
    x, y = torch.zeros(100), torch.zeros(100)
    assert direct_launch.bound(lambda *a: None, x, y, 2.0, 5) is None
    assert direct_launch.bound(fixed, x, y, 2.0, 5) is None  # CPU tensors: not dry


@needs_gpu
@pytest.mark.parametrize("n", [1, 100, 4096 + 3])
def test_on_the_gpu_it_writes_what_the_host_function_writes(fixed, n):
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    want = y.clone()
    fixed(x, want, 0.75, 0)
    launch = direct_launch.bound(fixed, x, y, 0.75, 0)
    assert launch is not None
    launch(x, y, 0.75, 0)
    torch.testing.assert_close(y, want, rtol=0, atol=0)


@needs_gpu
def test_on_the_gpu_it_launches_on_the_callers_stream_and_in_graphs(fixed):
    x = torch.randn(1000, device="cuda")
    y = torch.zeros(1000, device="cuda")
    launch = direct_launch.bound(fixed, x, y, 1.0, 0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch(x, y, 1.0, 0)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(y, x, rtol=0, atol=0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch(x, y, 1.0, 0)
    y.zero_()
    for _ in range(3):
        graph.replay()
    torch.testing.assert_close(y, 3 * x)
