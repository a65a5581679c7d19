# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What one call of a public op costs a user: eager host µs and CUDA-graph replay µs.

Eager: the host time of ``calls`` back-to-back launches divided by their number, synchronized
only at the end, so it is the Python + dispatch + launch cost a small-batch caller pays
(the GPU queue absorbs the kernels). Graph: ``GRAPH_CALLS`` calls captured in one CUDA graph,
replayed ``calls`` times between two CUDA events, per call: what a graph-capturing server
pays per op (its graph holds many ops, so the graph's own launch is not the op's cost).
:func:`measure` takes the rounds of several implementations in turn (ours, the reference,
ours, ...), so drift of clocks or host load between rounds falls on all of them alike.
An eager row is the fastest of its rounds: host noise (another process, an interrupt, the
core's clock) only adds time, and on an H100 host whole rounds of the same call moved
between 7 and 10 µs, so a median of five flipped with them (core/docs/overhead.md).
A kernel module opts in with ``public_calls(batch)`` (see core/README.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

CALLS = 200  # calls (or replays) per round
ROUNDS = 5
# untimed replays of each graph before its rounds: the GPU's clocks ramp up after the
# host-only eager rounds (core/docs/overhead.md)
WARM_REPLAYS = 2000
# calls of the op in one captured graph: with one, every implementation timed the graph
# launch, not the op (core/docs/overhead.md)
GRAPH_CALLS = 32


def _sync() -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)


def _warm(call: Callable[[], Any]) -> None:
    """Compile caches, the allocator, first-call dispatch."""
    for _ in range(10):
        call()
    _sync()()


def _eager_round(call: Callable[[], Any], calls: int) -> float:
    sync = _sync()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    us = (time.perf_counter() - start) * 1e6 / calls
    sync()
    return us


def eager_host_us(call: Callable[[], Any], calls: int = CALLS, rounds: int = ROUNDS) -> float:
    """Fastest round's host µs per call, launches queued back to back."""
    _warm(call)
    return min(_eager_round(call, calls) for _ in range(rounds))


def _captured(call: Callable[[], Any]) -> Any:
    """A CUDA graph holding ``GRAPH_CALLS`` calls of ``call`` back to back (warmed up outside
    capture, as torch's docs ask)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            call()
    return graph


def _replay_round(graph: Any, replays: int) -> float:
    """µs per call of ``replays`` replays of a :func:`_captured` graph."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (replays * GRAPH_CALLS)


def graph_replay_us(call: Callable[[], Any], replays: int = CALLS, rounds: int = ROUNDS) -> float:
    """Median over rounds of µs per call, replaying a graph of ``GRAPH_CALLS`` calls (needs
    CUDA)."""
    graph = _captured(call)
    _replay_round(graph, WARM_REPLAYS)
    return statistics.median(_replay_round(graph, replays) for _ in range(rounds))


def _in_turns(
    runs: Mapping[str, Callable[[], float]],
    rounds: int,
    results: dict[str, dict],
    key: str,
    pick: Callable[[list[float]], float],
) -> None:
    """``results[name][key]``: ``pick`` (min or median) of ``rounds`` runs of each, taken in
    turns (the runs in ``results[name]["rounds"][key]``); a run that raises records the error
    and drops its implementation."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    live = dict(runs)
    for _ in range(rounds):
        for name, run in list(live.items()):
            try:
                samples[name].append(run())
            except Exception as e:  # one implementation failing must not hide the others
                results[name]["error"] = f"{type(e).__name__}: {e}"
                del live[name]
    for name in live:
        results[name][key] = pick(samples[name])
        results[name].setdefault("rounds", {})[key] = samples[name]


def measure(
    calls: Mapping[str, Callable[[], Any]], *, graphs: bool = True, rounds: int = ROUNDS
) -> dict[str, dict]:
    """``{name: {"eager_host_us", "graph_replay_us" or None, "error"}}`` for each call, the
    implementations' rounds taken in turns.

    A call that raises (a reference that cannot run here) is reported, never fatal.
    """
    results: dict[str, dict] = {
        name: {"eager_host_us": None, "graph_replay_us": None, "error": None} for name in calls
    }
    ready = {}
    for name, call in calls.items():
        try:
            _warm(call)
            ready[name] = call
        except Exception as e:
            results[name]["error"] = f"{type(e).__name__}: {e}"
    eager = {name: (lambda call=call: _eager_round(call, CALLS)) for name, call in ready.items()}
    _in_turns(eager, rounds, results, "eager_host_us", min)
    if graphs:
        captured = {}
        for name, call in ready.items():
            if results[name]["error"] is None:
                try:
                    captured[name] = _captured(call)
                except Exception as e:
                    results[name]["error"] = f"{type(e).__name__}: {e}"
        for graph in captured.values():  # the GPU's clocks ramp up from the eager rounds
            _replay_round(graph, WARM_REPLAYS)
        replays = {name: (lambda g=g: _replay_round(g, CALLS)) for name, g in captured.items()}
        _in_turns(replays, rounds, results, "graph_replay_us", statistics.median)
    return results
