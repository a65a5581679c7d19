# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""scripts/mla_timeline.py's reading of a run's spans (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tirx_kernels.core import testing
from tirx_kernels.core.sm90.timeline import Span
from tirx_kernels.flashmla._mla_decode_tirx import END, EVENTS, REQUEST, START, STEP, STORE

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mla_timeline.py"


@pytest.fixture
def script():
    return testing.load_script(SCRIPT)


def _request(cta, t0, steps_us):
    """One request of CTA ``cta`` from ``t0`` ns: start 2 µs, the steps, end 1, store 3."""
    spans = [Span(cta, 0, START, t0, t0 + 2000)]
    t = t0 + 2000
    for us in steps_us:
        spans.append(Span(cta, 0, STEP, t, t + int(us * 1000)))
        t += int(us * 1000)
    spans += [Span(cta, 0, END, t, t + 1000), Span(cta, 0, STORE, t + 1000, t + 4000)]
    return [Span(cta, 0, REQUEST, t0, t + 4000), *spans]


def test_the_breakdown_splits_first_steps_from_later_ones(script):
    # CTA 0: two requests back to back (first steps 5 µs, later 2); CTA 1 one, done early
    spans = _request(0, 0, [5, 2, 2]) + _request(0, 15_000, [5, 2]) + _request(1, 0, [5, 2])
    got = script.breakdown(spans, EVENTS)
    assert got["first_step"] == 5 and got["later_steps"] == 2
    assert got["start"] == 2 and got["end"] == 1 and got["store"] == 3
    assert got["kernel_span_us"] == 28 and got["units_per_group"] == 1.5
    # CTA 0 busy 15 + 13 = 28 of 28 µs, CTA 1 13 of 28: the median group 20.5 µs
    assert got["idle_share"] == pytest.approx(1 - 20.5 / 28)


def test_a_bad_row_is_refused_naming_the_option(script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--rows", "128by1024"])
    assert exit_info.value.code == 2
    assert "--rows: '128by1024' is not BATCHxS_K" in capsys.readouterr().err
