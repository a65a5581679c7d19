# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2023 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Which RoPE kernel the host launches for a shape, and its grid (no torch, no compiler).

Port of the host dispatch of FlashInfer's ``BatchQKApplyRotaryPosIds``
(``include/flashinfer/pos_enc.cuh`` @ fb28d724), which picks a token- or a head-parallel grid.
Ours: a thread owns :data:`PAIRS` rotation pairs of one token. Few tokens: the "grid" kernel,
``gridDim.y`` = :func:`head_groups` groups of heads (upstream's head-parallel kernel). Many
tokens (:func:`uses_walk`): the "walk" kernel, a CTA walking tokens ``b, b + ctas, ...`` with
its threads on consecutive heads of one token (:func:`walk_shape`). See docs/rope.md.
``head_dim`` below is the rotated width (``rotary_dim``; the whole head unless partial).
"""

from __future__ import annotations

THREADS = 128  # the grid kernel's CTA
PAIRS = 8  # rotation pairs per thread: two 16-byte vectors of a head
# The grid kernel's launch bound: caps registers at 40 so 1536 threads stay resident.
MIN_CTAS_PER_SM = 12  # see docs/rope.md#grid-kernel
WALK_MIN_TOKENS = 512  # the walk kernel from here on; see docs/rope.md#grid-or-walk
WALK_MAX_HEAD_STEPS = 4  # a walk thread holds this many heads' vectors at most (registers)
# The walk CTA: a token's heads in one step when they fit, ~1024 threads per SM.
WALK_MAX_THREADS = 512  # see docs/rope.md#walk-cta
WALK_THREADS_PER_SM = 1024  # see docs/rope.md#walk-cta


def walk_shape(head_dim, num_heads):
    """(threads, CTAs per SM) of the walk kernel: the fewest equal head steps that fit
    WALK_MAX_THREADS, rounded up to a warp, and WALK_THREADS_PER_SM threads per SM."""
    bdx = head_dim // (2 * PAIRS)  # threads per head
    steps = -(-num_heads * bdx // WALK_MAX_THREADS)
    threads = -(-(-(-num_heads // steps) * bdx) // 32) * 32
    return threads, max(1, WALK_THREADS_PER_SM // threads)


def uses_walk(tokens, head_dim, num_heads):
    """Whether the host launches the walk kernel for ``tokens`` (None: many) tokens (never
    when its CTA cannot hold whole heads: a partial rotary_dim such as 96)."""
    bdx = head_dim // (2 * PAIRS)
    steps = -(-num_heads // (THREADS // bdx))
    whole = walk_shape(head_dim, num_heads)[0] % bdx == 0
    return (tokens is None or tokens >= WALK_MIN_TOKENS) and steps <= WALK_MAX_HEAD_STEPS and whole


def head_groups(tokens, head_dim, num_heads, sm_count, min_ctas=MIN_CTAS_PER_SM):
    """gridDim.y: the head split minimising waves * (heads per CTA + 1).

    The +1 models a CTA's fixed cost (position load, 8 powf + sincos); resident CTAs are
    guaranteed by the launch bound. Few tokens -> one head per CTA (upstream's head-parallel
    kernel); many tokens -> whole-head loops in one balanced wave.
    """
    bdy = THREADS // (head_dim // (2 * PAIRS))
    nblks = -(-tokens // bdy)
    resident = sm_count * min_ctas
    best, best_cost = 1, None
    for g in range(1, num_heads + 1):
        cost = -(-nblks * g // resident) * (-(-num_heads // g) + 1)
        if best_cost is None or cost < best_cost:
            best, best_cost = g, cost
    return best


def plan(tokens, head_dim, num_heads, sm_count):
    """(walk, grid) for ``tokens >= 1``: which kernel, and its runtime grid scalar (the walk
    kernel's CTA count, at most one per token; the grid kernel's head groups)."""
    if uses_walk(tokens, head_dim, num_heads):
        return True, min(tokens, sm_count * walk_shape(head_dim, num_heads)[1])
    return False, head_groups(tokens, head_dim, num_heads, sm_count)
