# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The per-call cost measurement: host µs per eager call; failures are reported per call."""

from __future__ import annotations

import time

import pytest

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


def test_implementations_are_timed_in_turns():
    order: list[str] = []
    calls = {name: (lambda name=name: order.append(name)) for name in ("ours", "ref")}
    rows = overhead.measure(calls, graphs=False, rounds=3)
    assert all(row["eager_host_us"] > 0 and row["error"] is None for row in rows.values())
    turns = [name for i, name in enumerate(order) if i == 0 or order[i - 1] != name]
    assert turns == ["ours", "ref"] * 4  # the warm-up, then three rounds in turns


def test_a_call_failing_after_warm_up_keeps_the_others():
    state = {"n": 0}

    def flaky():
        state["n"] += 1
        if state["n"] > 10:  # the warm-up passes, the first timed round fails
            raise RuntimeError("gone")

    rows = overhead.measure({"flaky": flaky, "ours": lambda: None}, graphs=False)
    assert rows["flaky"] == {
        "eager_host_us": None,
        "graph_replay_us": None,
        "error": "RuntimeError: gone",
    }
    assert rows["ours"]["eager_host_us"] > 0


def test_bench_calls_is_a_bench_result_of_our_op_beside_the_references():
    from tirx_kernels.core import testing
    from tirx_kernels.core.impls import ratio

    def slow():
        time.sleep(100e-6)

    def broken():
        raise RuntimeError("no flashinfer here")

    calls = {"tirx": lambda: None, "flashinfer": slow, "torch": broken}
    result = testing.bench_calls(calls, "eager", rounds=1)
    assert set(result["impls"]) == {"tirx", "flashinfer"} and result["timer"] == "eager_op"
    assert result["errors"] == {"torch": "RuntimeError: no flashinfer here"}
    assert ratio(result["impls"]) > 1  # the reference sleeps: ours is faster
    assert {name: len(runs) for name, runs in result["round_samples"].items()} == {
        "tirx": overhead.ROUNDS,
        "flashinfer": overhead.ROUNDS,
    }
    with pytest.raises(RuntimeError, match="our public op failed"):
        testing.bench_calls({"tirx": broken}, "eager")
    with pytest.raises(ValueError, match="mode must be one of"):
        testing.bench_calls(calls, "kernel")
