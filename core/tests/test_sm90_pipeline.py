# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The full/empty mbarrier ring protocol, executed on the Python model under random
interleavings: every item reaches every consumer in order and no slot is overwritten early."""

import random

import pytest

from tirx_kernels.core.sm90.pipeline import MBarrierModel, PhaseCounter, RingModel


def run_ring(stages, consumers, items, seed, producer_parity_flip=1, release_lag=0):
    """Simulate one producer and ``consumers`` consumers; returns what each consumer read.

    ``release_lag=1`` frees the previous slot after reading the next (one wgmma group in
    flight, as the GEMM does). Raises RuntimeError on deadlock.
    """
    rng = random.Random(seed)
    ring = RingModel(stages, consumers)
    prod = PhaseCounter(stages)
    cons = [PhaseCounter(stages) for _ in range(consumers)]
    produced = 0
    pending_tx = []  # (slot, item) copies in flight: land later, in any order
    reads = [[] for _ in range(consumers)]
    held = [[] for _ in range(consumers)]  # slots read but not yet released
    live = [0] * stages  # consumers still reading each slot
    steps = 0
    while any(len(r) < items for r in reads):
        steps += 1
        if steps > 100000:
            raise RuntimeError("deadlock")
        actor = rng.randrange(consumers + 2)
        if actor == consumers:  # producer
            if produced < items and ring.empty[prod.stage].try_wait_parity(
                prod.phase ^ producer_parity_flip
            ):
                assert live[prod.stage] == 0, "producer overwrote a slot still being read"
                ring.full[prod.stage].arrive(expect_tx=2)
                pending_tx.append((prod.stage, produced))
                produced += 1
                prod.advance()
        elif actor == consumers + 1:  # the copy engine lands a copy (two tx halves)
            if pending_tx:
                slot, item = pending_tx.pop(rng.randrange(len(pending_tx)))
                ring.slots[slot] = item
                live[slot] = consumers
                ring.full[slot].complete_tx(1)
                ring.full[slot].complete_tx(1)
        else:
            c = actor
            me = cons[c]
            if len(reads[c]) < items and ring.full[me.stage].try_wait_parity(me.phase):
                reads[c].append(ring.slots[me.stage])
                held[c].append(me.stage)
                me.advance()
                while len(held[c]) > release_lag or (len(reads[c]) == items and held[c]):
                    slot = held[c].pop(0)
                    live[slot] -= 1
                    ring.empty[slot].arrive()
    return reads


@pytest.mark.parametrize(
    "stages, release_lag", [(1, 0), (2, 0), (2, 1), (4, 0), (4, 1), (4, 3), (7, 1)]
)
@pytest.mark.parametrize("consumers", [1, 2, 8])
def test_ring_delivers_in_order(stages, consumers, release_lag):
    for seed in range(5):
        reads = run_ring(
            stages, consumers, items=3 * stages + 5, seed=seed, release_lag=release_lag
        )
        assert all(r == list(range(3 * stages + 5)) for r in reads)


def test_producer_waiting_on_current_parity_deadlocks():
    """Waiting ``empty`` with parity ``phase`` (not ``phase ^ 1``) blocks on a fresh ring."""
    with pytest.raises(RuntimeError, match="deadlock"):
        run_ring(4, 2, items=10, seed=0, producer_parity_flip=0)


def test_phase_counter_wraps():
    pc = PhaseCounter(3)
    seen = []
    for _ in range(7):
        seen.append((pc.stage, pc.phase))
        pc.advance()
    assert seen == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 0)]


def test_mbarrier_model_parity():
    bar = MBarrierModel(2)
    assert bar.try_wait_parity(1) and not bar.try_wait_parity(0)  # fresh: phase 0 pending
    bar.arrive(expect_tx=16)
    bar.arrive()
    assert not bar.try_wait_parity(0)  # bytes outstanding
    bar.complete_tx(16)
    assert bar.try_wait_parity(0) and not bar.try_wait_parity(1)
