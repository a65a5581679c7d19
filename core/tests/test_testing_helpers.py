# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The shared run_test helpers: comparisons name the worst element; dtypes use torch names."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import testing


def test_assert_close_passes_within_tolerance_and_returns_the_error():
    want = torch.tensor([1.0, 2.0, 3.0])
    assert testing.assert_close("x", want + 1e-4, want, atol=1e-3, rtol=0) == pytest.approx(
        1e-4, rel=1e-2
    )


def test_assert_close_names_the_first_mismatch_and_the_count():
    want = torch.zeros(2, 3)
    got = want.clone()
    got[1, 2] = 0.5
    got[0, 1] = float("nan")
    with pytest.raises(AssertionError, match=r"out: 2 of 6 mismatched.*first at \(0, 1\)"):
        testing.assert_close("out", got, want, atol=1e-3, rtol=0)


def test_assert_close_refuses_a_shape_mismatch():
    with pytest.raises(AssertionError, match=r"shape \(2,\) != \(3,\)"):
        testing.assert_close("out", torch.zeros(2), torch.zeros(3), atol=1, rtol=1)


def test_randn_is_deterministic_and_uses_torch_dtype_names():
    a = testing.randn((4, 4), "bfloat16", seed=3, device="cpu")
    assert a.dtype == torch.bfloat16
    assert torch.equal(a, testing.randn((4, 4), "bfloat16", seed=3, device="cpu"))
    with pytest.raises(ValueError, match="'bf16' is not one of"):
        testing.torch_dtype("bf16")


def test_tolerances_are_copies():
    testing.dtype_tols("bfloat16")["rtol"] = 1.0
    assert testing.dtype_tols("bfloat16")["rtol"] < 1.0


def test_assert_fullgraph_calls_fails_when_the_compiled_call_runs():
    with pytest.raises(AssertionError, match="the compiled call ran"):
        testing.assert_fullgraph_calls(
            torch.ops.aten.add, lambda x: x + 1, torch.ones(2), refusal="never"
        )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_misaligned_like_keeps_shape_and_dtype_off_16_bytes(dtype):
    t = torch.zeros(3, 8, dtype=dtype)
    m = testing.misaligned_like(t)
    assert (m.shape, m.dtype, m.device) == (t.shape, t.dtype, t.device)
    assert m.is_contiguous() and m.data_ptr() % 16 == t.element_size()


def _two_tensor_function():
    from tirx_kernels.core import toolchain

    T = toolchain.T
    M = T.dynamic("M")

    @T.function
    def scale_rows(X: T.Tensor((M, 8), "float32"), IDX: T.Tensor((M,), "int32"), n: T.int32):
        T.evaluate(0)

    return scale_rows


def test_launch_mismatches_compare_arguments_with_the_kernel_parameters():
    func = _two_tensor_function()
    x, idx = torch.empty(5, 8), torch.zeros(5, dtype=torch.int32)
    assert testing.launch_mismatches(func, (x, idx, 3)) == []
    (wrong_extent,) = testing.launch_mismatches(func, (torch.empty(5, 7), idx, 3))
    assert wrong_extent.startswith("X (5, 7)") and "shape[1], the kernel takes 8" in wrong_extent
    (unbound,) = testing.launch_mismatches(func, (x, torch.zeros(4, dtype=torch.int32), 3))
    assert "IDX (4,)" in unbound and "M is 5" in unbound
    (dtype,) = testing.launch_mismatches(func, (x, idx.long(), 3))
    assert "dtype, the kernel takes int32" in dtype
    assert "rank" in testing.launch_mismatches(func, (x[None], idx, 3))[0]
    assert testing.launch_mismatches(func, (x, idx)) == ["2 arguments for 3 parameters"]


def test_launch_mismatches_check_strides_and_alignment_as_the_host_function():
    """A parameter without ``align`` takes 64-byte aligned data (TIRx's default), and one
    without a layout compact strides; size-1 dimensions' strides do not matter."""
    func = _two_tensor_function()
    idx = torch.zeros(5, dtype=torch.int32)
    (strided,) = testing.launch_mismatches(func, (torch.empty(5, 16)[:, :8], idx, 3))
    assert "strides (16, 1)" in strided and "compact" in strided
    assert testing.launch_mismatches(func, (torch.empty(1, 8).t().t(), idx[:1], 3)) == []
    x = testing.offset_copy(torch.empty(5, 8), 16)
    (unaligned,) = testing.launch_mismatches(func, (x, idx, 3))
    assert "X (5, 8)" in unaligned and "16 bytes past a 64-byte boundary" in unaligned


@pytest.mark.parametrize("nbytes", [0, 4, 16, 48])
def test_offset_copy_starts_that_far_past_a_64_byte_boundary(nbytes):
    t = torch.arange(12, dtype=torch.int32).view(3, 4)
    c = testing.offset_copy(t, nbytes)
    assert c.data_ptr() % 64 == nbytes and c.is_contiguous() and torch.equal(c, t)
    with pytest.raises(ValueError, match="multiple of 4"):
        testing.offset_copy(t, 2)


def test_checked_launches_refuse_as_the_host_function_and_run_the_effect():
    launched, ran = [], []
    make = testing.checked_launches(
        lambda: _two_tensor_function(), launched, lambda: lambda *args: ran.append(args[2])
    )
    launch = make()
    launch(torch.empty(5, 8), torch.zeros(5, dtype=torch.int32), 3)
    with pytest.raises(ValueError, match=r"launch of .*X \(5, 7\).*shape\[1\]"):
        launch(torch.empty(5, 7), torch.zeros(5, dtype=torch.int32), 4)
    assert len(launched) == 2 and ran == [3]
