# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The multi-stage mbarrier ring: protocol and a pure-Python model of it.

A ring of ``stages`` shared-memory slots has two mbarriers per slot:

* ``full[s]``: completes when slot ``s`` holds data. The producer arrives once with
  ``mbarrier.arrive.expect_tx`` (arrival count 1) and the TMA copies complete the bytes.
* ``empty[s]``: completes when every consumer is done reading slot ``s`` (arrival count =
  number of consumer arrivals per use, e.g. one elected lane per consumer warp).

Both sides walk the slots in the same order with a (stage, phase) counter: ``advance``
moves to the next slot and flips ``phase`` when it wraps. An mbarrier's phase parity starts
at 0 and flips each time it completes. ``try_wait.parity p`` returns once the phase with
parity ``p`` has completed, and returns at once for the phase before the current one, so:

* the consumer waits ``full[stage]`` with parity ``phase``;
* the producer waits ``empty[stage]`` with parity ``phase ^ 1``: on the first lap that is
  the (virtual) completed phase before the barrier's first, so fresh slots are free.

:mod:`.dsl` (``Ring``) emits this; :class:`RingModel` executes it in Python for tests.
"""

from __future__ import annotations


class PhaseCounter:
    """(stage, phase) of one side of the ring."""

    def __init__(self, stages: int):
        self.stages, self.stage, self.phase = stages, 0, 0

    def advance(self) -> None:
        self.stage += 1
        if self.stage == self.stages:
            self.stage, self.phase = 0, self.phase ^ 1


class MBarrierModel:
    """An mbarrier: completes a phase when ``count`` arrivals and all tx bytes are in."""

    def __init__(self, count: int):
        self.count, self.pending, self.tx, self.parity = count, count, 0, 0

    def arrive(self, expect_tx: int = 0) -> None:
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.pending, self.parity = self.count, self.parity ^ 1

    def try_wait_parity(self, parity: int) -> bool:
        """True once the phase with ``parity`` completed (the current phase's parity differs)."""
        return self.parity != parity


class RingModel:
    """Slots plus full/empty barriers, driven step by step by a test's scheduler."""

    def __init__(self, stages: int, consumers: int):
        self.slots = [None] * stages
        self.full = [MBarrierModel(1) for _ in range(stages)]
        self.empty = [MBarrierModel(consumers) for _ in range(stages)]
