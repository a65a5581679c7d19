# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""scripts/gemm_timeline.py's reading of a run's spans (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tirx_kernels.core import testing
from tirx_kernels.core.sm90.timeline import Span
from tirx_kernels.deepgemm._gemm_1d2d_tirx import EPILOGUE, EVENTS, LOADS, TILE, WAIT

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gemm_timeline.py"


@pytest.fixture
def script():
    return testing.load_script(SCRIPT)


def _tile(cta, group, t0, waits_us, main_us, epilogue_us):
    """A consumer tile from ``t0`` ns: K-block waits spread over its main loop, then its
    epilogue."""
    end_main = t0 + int(main_us * 1000)
    spans = [Span(cta, group, TILE, t0, end_main + int(epilogue_us * 1000))]
    spans.append(Span(cta, group, EPILOGUE, end_main, end_main + int(epilogue_us * 1000)))
    t = t0
    for us in waits_us:
        spans.append(Span(cta, group, WAIT, t, t + int(us * 1000)))
        t += 1000
    return spans


def test_the_breakdown_sums_waits_per_tile_and_splits_off_the_epilogue(script):
    spans = (
        _tile(0, 1, 0, [0.2, 0.2, 0.1], main_us=20, epilogue_us=3)
        + _tile(0, 1, 23_000, [0.5, 0.5], main_us=20, epilogue_us=3)
        + _tile(0, 2, 0, [0.1], main_us=22, epilogue_us=2)
        + [Span(0, 0, LOADS, 0, 19_000), Span(0, 0, LOADS, 19_000, 40_000)]
    )
    got = script.breakdown(spans, EVENTS)
    # consumer tiles: 23, 23, 24 µs; mains 20, 20, 22; waits 0.5, 1.0, 0.1
    assert got["tile"] == 23 and got["epilogue"] == 3 and got["loads"] == 20
    assert got["main_loop"] == 20 and got["waits_per_tile"] == pytest.approx(0.5)
    assert got["kernel_span_us"] == 46 and got["units_per_group"] == 1.5


def test_a_bad_shape_is_refused_naming_the_option(script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--shapes", "4096x4096"])
    assert exit_info.value.code == 2
    assert "--shapes: '4096x4096' is not MxNxK" in capsys.readouterr().err
