# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Event timelines from inside a kernel: where a CTA's time goes, on the GPU's clock.

A profiling build of a kernel takes one more argument, a uint64 ``buffer``, and marks the
begin and end of its events with :class:`Timeline` (TIRx's ``T.cuda.timer_*`` intrinsics,
whose record layout is FlashInfer's profiler's). The default build passes
:class:`NoTimeline`, which emits nothing, so its code is unchanged.

Layout: ``buffer[0]`` holds the CTA count and the groups per CTA; each (CTA, group) writes
its records at ``1 + cta_group``, then every ``stride`` (the count of all CTA groups)
after. A record is ``globaltimer_lo`` (ns, 32 bits) << 32 | ``cta_group`` << 12 | event
<< 2 | kind. Records past the buffer's end are dropped, never written: size it with
:func:`buffer_words`. :func:`decode` reads a buffer back into spans.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from ..toolchain import T

BEGIN, END = 0, 1  # a record's kind (the intrinsics' EventType; 2 and 3 are not written here)


def buffer_words(ctas: int, groups: int, records: int) -> int:
    """uint64 words of a buffer holding ``records`` records of each CTA group."""
    return 1 + ctas * groups * records


class Timeline:
    """Marks of one thread per group (``leader``) of a profiling build, constructed inside the
    kernel: ``words`` is the buffer's length, ``ctas`` the grid's CTA count, ``groups`` the
    groups per CTA (e.g. warpgroups) and ``group`` this thread's."""

    def __init__(self, buffer, words, ctas, groups, group, leader):
        self.buffer, self.words, self.groups, self.group = buffer, words, groups, group
        self.stride, self.leader = ctas * groups, leader
        self.tag = T.bind_(T.alloc_local((1,), "uint64"))
        self.offset = T.bind_(T.alloc_local((1,), "uint32"))

    @T.inline
    def init(self):
        T.cuda.timer_init(
            self.buffer.data, self.tag.data, self.offset.data, self.groups, self.group
        )

    @T.inline
    def begin(self, event):
        T.cuda.timer_start(event, *self._where())

    @T.inline
    def end(self, event):
        T.cuda.timer_end(event, *self._where())

    def _where(self):
        fits = T.cast(self.offset[0], "int64") < T.cast(self.words, "int64")
        return self.buffer.data, self.tag.data, self.offset.data, self.stride, self.leader & fits


class NoTimeline:
    """The default build's marks: none."""

    @T.inline
    def init(self):
        """Nothing to set up."""

    @T.inline
    def begin(self, event):
        """No record."""

    @T.inline
    def end(self, event):
        """No record."""


@dataclass(frozen=True)
class Span:
    """One event of one CTA group, begin to end, in ns from the kernel's first mark."""

    cta: int
    group: int
    event: int
    start_ns: int  # globaltimer_lo, unwrapped against the kernel's first record
    end_ns: int

    @property
    def us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3


def decode(words) -> list[Span]:
    """The spans of a buffer (uint64 words, or int64 ones of the same bits): in each CTA
    group's write order,
    an end closes the latest open begin of its event; unmatched marks are dropped."""
    words = [int(w) % (1 << 64) for w in words]  # int64 storage reads back signed
    if not words or words[0] == 0:
        return []
    ctas, groups = words[0] & 0xFFFFFFFF, words[0] >> 32
    stride = ctas * groups
    records = []  # (cta_group, n-th record of it, time, event, kind)
    for i, word in enumerate(words[1:]):
        if word == 0:
            continue
        tag, time = word & 0xFFFFFFFF, word >> 32
        records.append((tag >> 12, i // stride, time, (tag >> 2) & 0x3FF, tag & 0x3))
    first = _earliest([r[2] for r in records])
    open_marks: dict[tuple[int, int], list[int]] = defaultdict(list)
    spans = []
    for cta_group, _, time, event, kind in sorted(records, key=lambda r: (r[0], r[1])):
        ns = (time - first) % (1 << 32)  # globaltimer_lo wraps every 4.3 s
        key = (cta_group, event)
        if kind == BEGIN:
            open_marks[key].append(ns)
        elif kind == END and open_marks[key]:
            start = open_marks[key].pop()
            spans.append(Span(cta_group // groups, cta_group % groups, event, start, ns))
    return spans


def _earliest(times: list[int]) -> int:
    """The first of 32-bit clock readings of one kernel (less than 2**32 ns apart, possibly
    across a wrap): the one after the largest gap around the circle."""
    if not times:
        return 0
    ordered = sorted(set(times))
    gaps = [(ordered[0] + (1 << 32) - ordered[-1], ordered[0])]
    gaps += [(b - a, b) for a, b in zip(ordered, ordered[1:])]
    return max(gaps)[1]


def nested(parents: list[Span], children: list[Span]) -> list[tuple[Span, list[Span]]]:
    """Each parent span with the children of its CTA group that start inside it (at or after
    its start, before its end), in time order (a request and its block steps, a tile and
    its waits)."""
    by_group = defaultdict(list)
    for child in children:
        by_group[(child.cta, child.group)].append(child)
    for group in by_group.values():
        group.sort(key=lambda s: s.start_ns)
    return [
        (
            parent,
            [
                c
                for c in by_group[(parent.cta, parent.group)]
                if parent.start_ns <= c.start_ns < parent.end_ns
            ],
        )
        for parent in sorted(parents, key=lambda s: (s.cta, s.group, s.start_ns))
    ]


def occupancy(spans: list[Span], units: list[Span]) -> dict[str, float]:
    """How a kernel's span is shared out: ``kernel_span_us`` (its first mark to its last,
    over ``spans``) and, over the CTA groups with ``units`` (requests, tiles), the median
    count of them (``units_per_group``) and the median share of the span a group spends
    outside them (``idle_share``: waiting to start, or done before the others)."""
    if not spans or not units:
        return {}
    begin = min(s.start_ns for s in spans)
    span = max(max(s.end_ns for s in spans) - begin, 1)
    per_group = defaultdict(list)
    for unit in units:
        per_group[(unit.cta, unit.group)].append(unit.end_ns - unit.start_ns)
    return {
        "kernel_span_us": span / 1e3,
        "units_per_group": median(len(u) for u in per_group.values()),
        "idle_share": 1 - median(sum(u) for u in per_group.values()) / span,
    }


def by_event(spans: list[Span], names: dict[int, str]) -> dict[str, list[Span]]:
    """The spans of each event, by its name in ``names`` (else its number)."""
    grouped: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        grouped[names.get(span.event, str(span.event))].append(span)
    return grouped


def summarize(spans: list[Span], names: dict[int, str]) -> dict[str, dict]:
    """Per event name: count, total, median and max µs over all CTA groups."""
    return {
        name: {
            "count": len(group),
            "total_us": sum(s.us for s in group),
            "median_us": median(s.us for s in group),
            "max_us": max(s.us for s in group),
        }
        for name, group in by_event(spans, names).items()
    }
