# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""assert_within, the tolerance check of the activation and RoPE tests, on CPU tensors."""

import pytest
import torch

from tirx_kernels.flashinfer._checks import assert_within


def test_within_tolerance_returns_the_max_error():
    want = torch.tensor([[1.0, -2.0], [4.0, 0.0]])
    got = want + torch.tensor([[0.01, 0.0], [-0.03, 0.0]])
    assert assert_within(got, want, atol=0.0, rtol=0.01, what="x") == pytest.approx(0.03)


def test_outside_tolerance_names_the_first_bad_element():
    want = torch.zeros(2, 3)
    got = want.clone()
    got[1, 2], got[0, 1] = 0.5, -0.2
    with pytest.raises(AssertionError, match=r"x: 2 of 6 mismatched.*first at \(0, 1\)"):
        assert_within(got, want, atol=0.1, rtol=0.0, what="x")


def test_empty_tensors_pass():
    assert assert_within(torch.empty(0), torch.empty(0), 0.0, 0.0, "x") == 0.0
