# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The per-call cost measurement: host µs per eager call; failures are reported per call."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import kernel_source

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


def test_an_eager_row_is_its_fastest_round_and_a_graph_row_its_median(monkeypatch):
    # host noise only adds time: a slow round of one implementation must not decide its row
    eager = iter([9.0, 7.0, 10.0, 7.5, 10.0, 7.2])  # ours, ref, ours, ref, ... in turns
    graph = iter([3.0, 2.0, 1.0, 4.0, 2.0, 9.0])
    monkeypatch.setattr(overhead, "_eager_round", lambda call, calls: next(eager))
    monkeypatch.setattr(overhead, "_captured", lambda call: call)
    monkeypatch.setattr(
        overhead, "_replay_round", lambda g, n: next(graph) if n == overhead.CALLS else 0
    )
    rows = overhead.measure({"ours": lambda: None, "ref": lambda: None}, rounds=3)
    assert rows["ours"]["eager_host_us"] == 9.0 and rows["ref"]["eager_host_us"] == 7.0
    assert rows["ours"]["rounds"]["eager_host_us"] == [9.0, 10.0, 10.0]
    assert rows["ours"]["graph_replay_us"] == 2.0 and rows["ref"]["graph_replay_us"] == 4.0


def test_each_graph_is_warmed_up_before_the_timed_replays(monkeypatch):
    replays: list[tuple[str, int]] = []
    monkeypatch.setattr(overhead, "_captured", lambda call: call.__name__)
    monkeypatch.setattr(
        overhead, "_replay_round", lambda graph, n: replays.append((graph, n)) or 1.0
    )

    def ours():
        pass

    def ref():
        pass

    rows = overhead.measure({"ours": ours, "ref": ref}, rounds=2)
    warm, timed = overhead.WARM_REPLAYS, overhead.CALLS
    assert replays == [("ours", warm), ("ref", warm)] + [("ours", timed), ("ref", timed)] * 2
    assert rows["ours"]["graph_replay_us"] == 1.0 and rows["ours"]["rounds"]["graph_replay_us"] == [
        1.0,
        1.0,
    ]


class _Null:
    """A context manager and stream that do nothing."""

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass

    def wait_stream(self, other):
        pass


class _StandInCuda:
    """torch.cuda as the graph capture and its replay use it: counts the calls made inside
    the capture; every timed span is ``span_ms``."""

    def __init__(self, span_ms):
        self.span_ms, self.capturing, self.captured = span_ms, False, 0
        cuda = self

        class Capture(_Null):
            def __enter__(self):
                cuda.capturing = True

            def __exit__(self, *exc):
                cuda.capturing = False

        class Event:
            def __init__(self, enable_timing):
                self.record = self.synchronize = lambda: None

            def elapsed_time(self, end):
                return cuda.span_ms

        self.graph, self.Event = (lambda graph: Capture()), Event
        self.CUDAGraph = lambda: type("Graph", (), {"replay": lambda self: None})()
        self.Stream = self.current_stream = _Null
        self.stream = lambda stream: _Null()

    def call(self):
        self.captured += self.capturing


def test_a_graph_holds_many_calls_and_is_timed_per_call(monkeypatch):
    import types

    cuda = _StandInCuda(span_ms=6.4)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    graph = overhead._captured(cuda.call)
    assert cuda.captured == overhead.GRAPH_CALLS > 1  # not the graph launch alone
    # 200 replays of GRAPH_CALLS calls in 6.4 ms
    assert overhead._replay_round(graph, 200) == pytest.approx(6.4e3 / (200 * overhead.GRAPH_CALLS))


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
    assert set(result["impls"]) == {"tirx", "flashinfer"} and result["timer"] == "eager_op_min"
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


def test_graph_rows_name_the_calls_in_their_graph(monkeypatch):
    """A graph row's timer says how many calls its graph held, so the suite's comparison
    reports a row timed with another count as a changed timer, not as a speed change."""
    from tirx_kernels.core import testing
    from tirx_kernels.core.suite import baseline

    monkeypatch.setattr(overhead, "_captured", lambda call: call)
    monkeypatch.setattr(overhead, "_replay_round", lambda graph, n: 2.0)
    result = testing.bench_calls({"tirx": lambda: None, "flashinfer": lambda: None}, "graph")
    assert result["timer"] == f"graph_op_x{overhead.GRAPH_CALLS}" == "graph_op_x32"
    old = {"kernel": "k", "config": "c_graph", "ratio": 1.0, "timer": "graph_op"}
    new = {"kernel": "k", "config": "c_graph", "ratio": 1.3, "timer": result["timer"]}
    verdict = baseline._compare_row(new, old, True, 0.03, [])["verdict"]
    assert verdict == "timer changed (graph_op -> graph_op_x32)"


OP_OVERHEAD = Path(__file__).resolve().parents[2] / "scripts" / "op_overhead.py"


def test_op_overhead_script_takes_rounds_and_names_a_bad_kernel(fake_site, tmp_path):
    body = """
    def public_calls(batch):
        return {"tirx": lambda: None, "ref": lambda: sum(range(batch))}
    """
    fake_site.family("timed", {"kern": kernel_source("timed_kern", "timed", body=body)})
    out = tmp_path / "rows.json"
    run = [sys.executable, str(OP_OVERHEAD), "--kernel", "timed_kern", "--batch", "1", "4"]
    p = subprocess.run([*run, "--rounds", "3", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [(r["batch"], r["impl"]) for r in rows] == [
        (1, "tirx"),
        (1, "ref"),
        (4, "tirx"),
        (4, "ref"),
    ]
    assert all(len(r["rounds"]["eager_host_us"]) == 3 and r["eager_host_us"] > 0 for r in rows)
    bad = subprocess.run([*run[:3], "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--kernel/--family: no kernel 'nope'" in bad.stderr
    family = [sys.executable, str(OP_OVERHEAD), "--family", "timed", "--batch", "2"]
    p = subprocess.run([*family, "--rounds", "1", "--json", str(out)], capture_output=True)
    assert p.returncode == 0 and [r["kernel"] for r in json.loads(out.read_text())] == [
        "timed_kern",
        "timed_kern",
    ]
    bad = subprocess.run([*family[:2], "--family", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no family 'nope'" in bad.stderr
    zero = subprocess.run([*run, "--rounds", "0"], capture_output=True, text=True)
    assert zero.returncode == 2 and "--rounds must be at least 1" in zero.stderr
