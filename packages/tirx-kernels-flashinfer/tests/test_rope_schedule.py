# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The RoPE port's host dispatch on the CPU: which kernel a shape gets, its grid."""

from pathlib import Path

import pytest

from tirx_kernels.core import testing
from tirx_kernels.flashinfer import _rope_schedule as sched

SWEEP = Path(__file__).resolve().parents[3] / "scripts" / "rope_sweep.py"


@pytest.mark.parametrize(
    "tokens,head_dim,heads,walk",
    [
        (1, 128, 40, False),  # few tokens: head groups spread over the SMs
        (sched.WALK_MIN_TOKENS - 1, 128, 40, False),
        (sched.WALK_MIN_TOKENS, 128, 40, True),
        (16384, 64, 40, True),
        (16384, 256, 24, True),
        (16384, 256, 40, False),  # 5 head steps of 8 heads: too many registers
        (None, 128, 64, True),
    ],
)
def test_rope_uses_the_walk_kernel_for_many_tokens(tokens, head_dim, heads, walk):
    assert sched.uses_walk(tokens, head_dim, heads) is walk


@pytest.mark.parametrize(
    "head_dim,heads,shape",
    [
        (128, 40, (320, 3)),  # all heads in one step
        (64, 40, (160, 6)),
        (256, 24, (384, 2)),
        (64, 20, (96, 10)),  # rounded up to whole warps: 4 idle head slots
        (128, 80, (320, 3)),  # two steps of 40 heads
    ],
)
def test_rope_walk_shape(head_dim, heads, shape):
    assert sched.walk_shape(head_dim, heads) == shape


def test_rope_plan_picks_the_kernel_and_its_grid():
    assert sched.plan(1, 128, 40, 132) == (False, sched.head_groups(1, 128, 40, 132))
    assert sched.plan(16384, 128, 40, 132) == (True, 132 * 3)  # 3 CTAs of 320 threads per SM
    assert sched.plan(600, 128, 40, 264) == (True, 600)  # never more CTAs than tokens


def test_rope_head_groups_split_few_tokens_over_the_sms():
    assert sched.head_groups(1, 128, 40, 132) == 40  # one token: one head per CTA
    assert sched.head_groups(4000, 256, 40, 132) == 3  # the grid kernel's head loop


def test_rope_launcher_grids(monkeypatch):
    from tirx_kernels.flashinfer import rope

    launches = []
    fake = lambda *key: lambda *args: launches.append((key[-2], args[3]))  # noqa: E731
    monkeypatch.setattr(rope, "_compiled", fake)
    for tokens, sms in ((1, 132), (16384, 132), (600, 264)):
        rope.launcher("bfloat16", 128, 32, 8, False, "int32", tokens, sms)("q", "k", "p", 1, 1)
    assert launches == [
        (False, sched.head_groups(1, 128, 40, 132)),  # grid kernel: head groups
        (True, 132 * 3),  # walk kernel: 3 CTAs of 320 threads per SM
        (True, 600),  # never more CTAs than tokens
    ]


def test_the_sweep_script_finds_what_it_times():
    sweep = testing.load_script(SWEEP)
    assert sweep.walk_threads(128, 40) == [160, 320]  # 320: the host's walk_shape
    assert sweep.walk_threads(64, 40) == [160]
    from tirx_kernels.flashinfer import _rope_tirx, rope
    from tirx_kernels.flashinfer.kernels import rope as contract

    for module, names in (
        (sched, ("THREADS", "WALK_THREADS_PER_SM", "head_groups")),
        (_rope_tirx, ("get_grid_kernel", "get_walk_kernel")),
        (rope, ("rcp_f32",)),
        (contract, ("prepare_data",)),
    ):
        assert all(hasattr(module, name) for name in names), module.__name__
