# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""How one finished bench child becomes a suite row status."""

from tirx_kernels.core.runner import PASS, Result
from tirx_kernels.core.suite import BASELINE_ERROR, INTERFERED
from tirx_kernels.core.suite.scheduler import judge


def bench_result(**bench):
    return Result("k", "c", "bench", PASS, bench={"impls": {"tirx": 1.0, "torch": 2.0}, **bench})


def test_missing_optional_reference_is_a_pass_that_says_so():
    status, detail = judge(bench_result(skipped={"flashinfer": "ImportError: no flashinfer"}), [])
    assert status == PASS
    assert detail == "reference 'flashinfer' skipped: ImportError: no flashinfer"


def test_failing_reference_is_baseline_error():
    status, detail = judge(bench_result(errors={"flashinfer": "JIT failed"}), [])
    assert status == BASELINE_ERROR and "JIT failed" in detail


def test_interference_wins():
    assert judge(bench_result(), ["pid 7 on GPU 0"])[0] == INTERFERED
