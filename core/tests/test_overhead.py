# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The per-call cost measurement: host µs per eager call; failures are reported per call."""

from __future__ import annotations

import time

from tirx_kernels.core import overhead


def test_eager_host_time_tracks_the_call_cost():
    fast = overhead.eager_host_us(lambda: None, calls=50, rounds=3)
    slow = overhead.eager_host_us(lambda: time.sleep(200e-6), calls=50, rounds=3)
    assert 0 < fast < 50
    assert slow >= 200 > fast


def test_a_failing_call_is_reported_not_raised():
    def boom():
        raise RuntimeError("no flashinfer here")

    rows = overhead.measure({"ours": lambda: None, "ref": boom}, graphs=False)
    assert rows["ours"]["error"] is None and rows["ours"]["eager_host_us"] > 0
    assert rows["ref"]["error"] == "RuntimeError: no flashinfer here"
    assert rows["ref"]["eager_host_us"] is None
