# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The tile-scheduler metadata (FlashMLA's get_mla_metadata, pure Python): every request's
blocks are covered exactly once, in order, by its splits 0 .. n-1, and the parts are balanced."""

import random

import pytest

from tirx_kernels.flashmla._mla_decode_schedule import (
    FIXED_OVERHEAD_BLOCKS,
    covered,
    num_blocks,
    num_sm_parts,
    sched_meta,
)


def test_num_sm_parts_as_upstream():
    assert num_sm_parts(132, 128, 1) == 66  # h_q 128, s_q 1: two 64-row tiles
    assert num_sm_parts(132, 16, 1) == 132
    assert num_sm_parts(132, 256, 1) == 33
    assert num_sm_parts(2, 1024, 1) == 1


def check(seqlens, parts):
    rows, splits = sched_meta(seqlens, parts)
    assert len(rows) == parts and len(splits) == len(seqlens) + 1 and splits[0] == 0
    cov = covered(rows, seqlens, splits)
    for r, s in enumerate(seqlens):
        keys = sorted(k for k in cov if k[0] == r)
        assert [k[1] for k in keys] == list(range(splits[r], splits[r + 1]))
        pos = 0
        for key in keys:
            lo, hi = cov[key]
            assert lo == pos and hi >= lo
            pos = hi
        assert pos == -(-s // 64)
    assert splits[-1] <= len(seqlens) + parts
    return rows, splits


@pytest.mark.parametrize("seed", range(40))
def test_random_batches_are_covered_exactly_once(seed):
    rng = random.Random(seed)
    batch = rng.randint(1, 140)
    seqlens = [rng.choice([0, 1, 63, 64, 65, rng.randint(1, 20000)]) for _ in range(batch)]
    check(seqlens, num_sm_parts(132, rng.choice([16, 32, 64, 128, 256]), 1))


def test_long_request_is_split_evenly_over_the_parts():
    rows, splits = check([8192], 66)
    # payload ceil((128 + 5) / 66) + 5 = 8 units: 3 blocks per part, 43 parts, 23 idle
    assert splits == [0, 43]
    cost = [r[3] - r[2] for r in rows[:43]]
    assert cost == [3] * 42 + [2]
    assert all(r[0] > r[1] for r in rows[43:])


def test_short_requests_are_not_split():
    rows, splits = check([64] * 8, 4)
    assert splits == list(range(9))
    assert all(r[5] == 0 and r[6] == 0 for r in rows)


def test_payload_counts_the_fixed_overhead():
    seqlens = [1000, 1, 5000]
    rows, _ = sched_meta(seqlens, 10)
    total = sum(num_blocks(s) for s in seqlens) + FIXED_OVERHEAD_BLOCKS * 3
    assert rows[0][0] == 0 and rows[-1][1] <= 2
    assert total == 16 + 1 + 79 + 15


def test_empty_parts_have_no_requests():
    rows, _ = check([1], 4)
    assert rows[0][:2] == [0, 0]
    assert all(r[0] > r[1] for r in rows[1:])


def test_the_metadata_kernel_compiles_for_sm90a():
    from tirx_kernels.core import toolchain
    from tirx_kernels.flashmla._mla_metadata_tirx import make_sched_meta

    assert toolchain.compile_cubin(make_sched_meta())


def test_the_metadata_path_is_chosen_by_the_environment():
    from tirx_kernels.flashmla._mla_decode_schedule import METADATA_ENV, metadata_on_device

    assert metadata_on_device({}) and metadata_on_device({METADATA_ENV: "device"})
    assert not metadata_on_device({METADATA_ENV: "host"})
    with pytest.raises(ValueError, match=f"{METADATA_ENV}='gpu' is not 'device' or 'host'"):
        metadata_on_device({METADATA_ENV: "gpu"})
