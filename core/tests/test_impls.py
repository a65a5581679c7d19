# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Ours versus references, the ratio, and references whose package is missing."""

import unittest

import pytest

from tirx_kernels.core.impls import guard_references, is_ours, ratio


def test_ours_and_references():
    assert all(map(is_ours, ["tirx", "tirx_stream", "tir", "tir_v2"]))
    assert not any(map(is_ours, ["torch", "flashinfer", "tirxx", "cublas"]))


def test_ratio_is_fastest_reference_over_fastest_ours():
    assert ratio({"tirx": 10.0, "tirx_b": 8.0, "torch": 12.0, "flashinfer": 9.0}) == 9.0 / 8.0
    assert ratio({"tirx": 10.0}) is None
    assert ratio({"torch": 1.0}) is None


def test_missing_reference_package_is_skipped_with_reason():
    def missing():
        import flashinfer_not_installed_anywhere  # noqa: F401

    def skips():
        raise unittest.SkipTest("needs 2 GPUs")

    def broken():
        raise RuntimeError("JIT failed")

    refs, skipped = guard_references({"a": missing, "b": skips, "c": broken, "d": lambda: print})
    assert refs["a"]() is None and refs["b"]() is None
    assert refs["d"]() is print
    with pytest.raises(RuntimeError, match="JIT failed"):  # stays a BASELINE_ERROR
        refs["c"]()
    assert set(skipped) == {"a", "b"}
    assert "flashinfer_not_installed_anywhere" in skipped["a"]
    assert skipped["b"] == "SkipTest: needs 2 GPUs"
