# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Kernel timelines (core.sm90.timeline): a buffer in the layout the timer intrinsics write,
read back into spans; the marks a profiling build emits and the default build does not."""

from __future__ import annotations

import pytest

from tirx_kernels.core import toolchain
from tirx_kernels.core.sm90 import timeline
from tirx_kernels.core.toolchain import T


def _buffer(ctas, groups, marks, records=8):
    """What the intrinsics write: ``marks`` = [(cta, group, event, kind, ns)] in each
    group's write order."""
    words = [0] * timeline.buffer_words(ctas, groups, records)
    words[0] = (groups << 32) | ctas
    written = {}
    for cta, group, event, kind, ns in marks:
        cta_group = cta * groups + group
        n = written.get(cta_group, 0)
        written[cta_group] = n + 1
        tag = (cta_group << 12) | (event << 2) | kind
        words[1 + cta_group + n * ctas * groups] = ((ns % (1 << 32)) << 32) | tag
    return words


def test_spans_pair_each_begin_with_its_end_per_cta_group():
    begin, end = timeline.BEGIN, timeline.END
    marks = [
        (0, 0, 0, begin, 1_000),  # request
        (0, 0, 2, begin, 1_500),  # step
        (0, 0, 2, end, 2_500),
        (0, 0, 2, begin, 2_600),
        (0, 0, 2, end, 3_100),
        (0, 0, 0, end, 4_000),
        (1, 1, 2, begin, 5_000),
        (1, 1, 2, end, 7_000),
        (1, 1, 3, begin, 7_100),  # never ended: dropped
    ]
    spans = timeline.decode(_buffer(2, 2, marks))
    got = sorted((s.cta, s.group, s.event, s.start_ns, s.end_ns) for s in spans)
    assert got == [
        (0, 0, 0, 0, 3_000),
        (0, 0, 2, 500, 1_500),
        (0, 0, 2, 1_600, 2_100),
        (1, 1, 2, 4_000, 6_000),
    ]
    summary = timeline.summarize(spans, {0: "request", 2: "step"})
    assert summary["step"] == {"count": 3, "total_us": 3.5, "median_us": 1.0, "max_us": 2.0}
    assert summary["request"]["count"] == 1


def test_children_are_nested_in_the_parent_of_their_cta_group():
    parent = timeline.Span(0, 1, 0, 100, 200)
    other = timeline.Span(1, 1, 0, 100, 200)
    inside = [timeline.Span(0, 1, 2, 150, 160), timeline.Span(0, 1, 2, 110, 120)]
    # the next parent's first child may start as this one ends
    outside = [timeline.Span(0, 1, 2, 200, 210), timeline.Span(0, 0, 2, 150, 160)]
    got = timeline.nested([other, parent], inside + outside)
    assert got == [(parent, sorted(inside, key=lambda s: s.start_ns)), (other, [])]


def test_occupancy_is_the_share_of_the_span_each_group_spends_in_its_units():
    units = [
        timeline.Span(0, 0, 0, 0, 10_000),
        timeline.Span(0, 0, 0, 10_000, 28_000),  # CTA 0: busy the whole 28 µs
        timeline.Span(1, 0, 0, 0, 7_000),  # CTA 1: done after 7
        timeline.Span(2, 0, 0, 14_000, 28_000),  # CTA 2: starts late
    ]
    got = timeline.occupancy(units + [timeline.Span(3, 1, 5, 1_000, 2_000)], units)
    assert got["kernel_span_us"] == 28 and got["units_per_group"] == 1
    assert got["idle_share"] == pytest.approx(1 - 14 / 28)  # median busy: 14 µs
    assert timeline.occupancy([], []) == {}


def test_the_32_bit_clock_wrapping_mid_kernel_keeps_durations():
    start = (1 << 32) - 300
    marks = [(0, 0, 1, timeline.BEGIN, start), (0, 0, 1, timeline.END, start + 1_000)]
    (span,) = timeline.decode(_buffer(1, 1, marks))
    assert span.us == 1.0


def test_a_buffer_read_back_from_int64_storage_decodes_the_same():
    marks = [(0, 0, 1, timeline.BEGIN, 3_000_000_000), (0, 0, 1, timeline.END, 3_000_002_000)]
    words = _buffer(1, 1, marks)
    signed = [w - (1 << 64) if w >= 1 << 63 else w for w in words]  # the top bit is set
    assert min(signed) < 0 and timeline.decode(signed) == timeline.decode(words)
    assert timeline.decode(signed)[0].us == 2.0


def test_an_empty_buffer_has_no_spans():
    assert timeline.decode([0] * 9) == [] and timeline.decode([]) == []


def _kernel(marked):
    N = T.dynamic("N")
    W = T.dynamic("W", "int64")

    if marked:

        @T.function
        def double(A: T.Tensor((N,), "float32"), TL: T.Tensor((W,), "uint64")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=(4,), block=256))
            tid = T.cuda.thread_idx("x")
            marks = timeline.Timeline(TL, W, 4, 2, tid // 128, tid % 128 == 0)
            marks.init()
            marks.begin(3)
            A[tid] = A[tid] * T.float32(2)
            marks.end(3)

        return double

    @T.function
    def double(A: T.Tensor((N,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(4,), block=256))
        tid = T.cuda.thread_idx("x")
        marks = timeline.NoTimeline()
        marks.init()
        marks.begin(3)
        A[tid] = A[tid] * T.float32(2)
        marks.end(3)

    return double


def test_a_marked_kernel_records_within_its_buffer_and_the_default_emits_nothing():
    source = toolchain.cuda_source(toolchain.compile(_kernel(True)))
    calls = [
        line.strip() for line in source.splitlines() if "_cuda(" in line and "void" not in line
    ]
    assert len(calls) == 3 and "timer_start_cuda(3," in calls[1] and "timer_end_cuda(3," in calls[2]
    assert all("< W" in call for call in calls[1:])  # a full buffer drops records
    assert "timer" not in toolchain.cuda_source(toolchain.compile(_kernel(False)))


@pytest.mark.parametrize("records", [1, 40])
def test_buffer_words(records):
    assert timeline.buffer_words(132, 2, records) == 1 + 264 * records
