# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What one call of a public op costs a user: eager host µs and CUDA-graph replay µs.

Eager: the host time of ``calls`` back-to-back launches divided by their number, synchronized
only at the end, so it is the Python + dispatch + launch cost a small-batch caller pays
(the GPU queue absorbs the kernels). Graph: one call captured in a CUDA graph, replayed
``calls`` times between two CUDA events: what a graph-capturing server pays per op.
A kernel module opts in with ``public_calls(batch)`` (see core/README.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any


def eager_host_us(call: Callable[[], Any], calls: int = 200, rounds: int = 5) -> float:
    """Median over rounds of host µs per call, launches queued back to back."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(10):  # compile caches, allocator, first-call dispatch
        call()
    sync()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - start) * 1e6 / calls)
        sync()
    return statistics.median(samples)


def graph_replay_us(call: Callable[[], Any], replays: int = 200, rounds: int = 5) -> float:
    """Median over rounds of µs per replay of a graph holding one call (needs CUDA)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()  # warm up outside capture, as torch's graph docs ask
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(rounds):
        graph.replay()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / replays)
    return statistics.median(samples)


def measure(calls: Mapping[str, Callable[[], Any]], *, graphs: bool = True) -> dict[str, dict]:
    """``{name: {"eager_host_us", "graph_replay_us" or None, "error"}}`` for each call.

    A call that raises (a reference that cannot run here) is reported, never fatal.
    """
    results: dict[str, dict] = {}
    for name, call in calls.items():
        row: dict[str, Any] = {"eager_host_us": None, "graph_replay_us": None, "error": None}
        try:
            row["eager_host_us"] = eager_host_us(call)
            if graphs:
                row["graph_replay_us"] = graph_replay_us(call)
        except Exception as e:  # one implementation failing must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"
        results[name] = row
    return results
