# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Host dispatch of the FlashInfer norm ports: the dispatch domain and which kernel a shape gets.

Upstream: the ``RMSNorm``, ``FusedAddRMSNorm`` and ``LayerNorm`` launchers of
``include/flashinfer/norm.cuh`` (one CTA per row, ``min(1024, d / VEC_SIZE)`` threads,
``VEC_SIZE = gcd(16 / sizeof(T), d)``). This port keeps 16-byte vectors and picks, per
shape, how many a thread holds and how rows map to CTAs: :func:`plan` and :func:`schedule`,
whose result is the keywords of ``_norm_tirx.make_*``. Pure Python (no torch, no compiler).
Why each constant has its value: ``docs/norm.md`` (package root).

Dispatch domain of the port: dtype bfloat16 or float16 (LayerNorm: bfloat16 input, float32
gamma/beta, as upstream); ``1 <= hidden <= 16384``, vectors of ``vec_width(hidden) =
gcd(8, hidden)`` elements as upstream's ``VEC_SIZE = gcd(16 / sizeof(T), d)`` (hidden 111
runs 1-element vectors, 500 4-element ones; only the 8-element path has the tuned large-batch
schedules); ``tokens * hidden < 2**31`` (32-bit indexing). Outside it: ValueError.
"""

from __future__ import annotations

import math

VEC = 8  # elements per 16-byte vector of a 16-bit dtype
WARP_ROW = 32 * VEC  # elements a warp covers with one vector per lane
MAX_HIDDEN = 16384
DTYPE_NAMES = ("bfloat16", "float16")


def check_domain(dtype: str, hidden: int, tokens: int | None = None, *, bf16_only=False) -> None:
    """Raise ValueError unless (dtype, hidden, tokens) is inside the port's dispatch domain."""
    allowed = ("bfloat16",) if bf16_only else DTYPE_NAMES
    if dtype not in allowed:
        raise ValueError(f"dtype {dtype!r} not supported: expected one of {allowed}")
    if not isinstance(hidden, int) or not 1 <= hidden <= MAX_HIDDEN:
        raise ValueError(
            f"hidden={hidden} outside the ported dispatch domain: need 1 <= hidden <= {MAX_HIDDEN}"
        )
    if tokens is not None and not (0 <= tokens and tokens * hidden < 2**31):
        raise ValueError(f"tokens={tokens} x hidden={hidden} exceeds 32-bit indexing")


def vec_width(hidden: int) -> int:
    """Elements per vector access: upstream's ``gcd(16 / sizeof(T), d)`` for 16-bit T."""
    return math.gcd(VEC, hidden)


SMALL_BATCH = 256  # up to ~2 rows per SM: latency-bound, spread a row over more threads


def plan(
    hidden: int,
    tokens: int | None = None,
    kind: str = "rmsnorm",
    vecs_per_thread=None,
    vec: int = VEC,
) -> tuple[int, int]:
    """(vectors of ``vec`` elements per thread, threads per CTA) for one row of ``hidden``.

    Small batches want 1-2 vectors per thread (fused add: at most 512 threads), large
    batches 4 (1 when hidden <= 2048): see docs/norm.md#vectors-per-thread. Tokens only pick
    the plan; the compiled kernel takes any count.
    """
    nvec = -(-hidden // vec)
    if vecs_per_thread:
        k = vecs_per_thread
    elif tokens is not None and tokens <= SMALL_BATCH:
        k = -(-nvec // (512 if kind == "fused_add_rmsnorm" else 1024))
    else:
        k = 1 if nvec <= 256 else 4
    threads = -(-nvec // k)
    threads = -(-threads // 32) * 32
    if threads > 1024:
        raise ValueError(f"hidden={hidden} needs {threads} threads at {k} vectors per thread")
    return k, threads


# The host's schedules beyond plan(), each picked from an H200 sweep (scripts/norm_sweep.py);
# the measurements, and the schedules tried and dropped: docs/norm.md (package root).
MANY_ROWS = 8192  # from here on several rows per CTA or per warp: see docs/norm.md#rows-per-cta
# LayerNorm hidden sizes where evict_last gamma/beta was slower: #layernorm-gamma-and-beta-in-l1
KEEP_GAMMA_BETA_OFF = (8192, 16384)
LEAN_MIN_HIDDEN = 8192  # LayerNorm's one-row kernels from here: lean (#layernorm-lean-rows)
REGISTERS_PER_SM, THREADS_PER_SM, CTAS_PER_SM = 65536, 2048, 32  # sm_90 (all targeted archs)
LEAN_THREADS_PER_SM = 1536  # lean LayerNorm's launch bound: 3 CTAs of 512 threads at h16384
LEAN_MIN_REGISTERS = 40  # the cap a launch bound may set (8-register allocation steps)
RMS_LEAN_MIN_HIDDEN = 4096  # RMSNorm's one-row kernels, 256-8192 tokens: lean (#rmsnorm-lean-rows)
RMS_LEAN_THREADS_PER_SM = 1280  # their launch bound, when it asks for 3 CTAs or more
ROWS_PER_CTA = {  # kind: ((max hidden, R, k or None for plan()'s, lean), ...), first match
    "rmsnorm": ((4096, 2, None, True), (8192, 2, None, False)),
    "layernorm": ((2048, 4, 1, False), (4096, 2, None, False)),
}
WARP_ROWS = {"rmsnorm": {2048: 2}}  # kind: {hidden: warps per CTA, a row each} (#a-row-per-warp)


def lean_ctas_per_sm(threads: int) -> int:
    """CTAs per SM a lean kernel's launch bound asks for: up to 1536 threads and 40 registers."""
    fit = min(LEAN_THREADS_PER_SM // threads, REGISTERS_PER_SM // (LEAN_MIN_REGISTERS * threads))
    return max(1, min(CTAS_PER_SM, fit))


def schedule(kind: str, hidden: int, tokens: int | None) -> dict:
    """The host's kernel choice for ``tokens`` rows (None: a large batch): make_* keywords."""
    vec = vec_width(hidden)
    if vec != VEC:  # upstream's narrow-vector path: one row per CTA, up to 1024 threads
        return {"vecs_per_thread": plan(hidden, 1, kind, vec=vec)[0], "vec": vec}
    k = plan(hidden, tokens, kind)[0]
    small = tokens is not None and tokens <= SMALL_BATCH
    if kind == "fused_add_rmsnorm" and not small:  # docs/norm.md#late-weight
        return {"vecs_per_thread": 2 if hidden >= 16384 else k, "late_weight": True}
    sched = {"vecs_per_thread": k}
    if kind == "layernorm" and hidden not in KEEP_GAMMA_BETA_OFF:
        sched["keep_gamma_beta"] = True
    if kind == "layernorm" and hidden >= LEAN_MIN_HIDDEN and not small:
        sched.update(lean=True, min_ctas_per_sm=lean_ctas_per_sm(plan(hidden, tokens, kind)[1]))
    mid = not small and tokens is not None and tokens < MANY_ROWS  # one row per CTA
    if kind == "rmsnorm" and mid and hidden >= RMS_LEAN_MIN_HIDDEN:
        ctas = RMS_LEAN_THREADS_PER_SM // plan(hidden, tokens, kind)[1]
        sched.update(lean=True, min_ctas_per_sm=ctas if ctas >= 3 else 1)
    if tokens is None or tokens >= MANY_ROWS:
        warps = WARP_ROWS.get(kind, {}).get(hidden)
        if warps:
            return {"vecs_per_thread": hidden // WARP_ROW, "warp_rows": warps, "lean": True}
        for max_hidden, rows, k_rows, lean in ROWS_PER_CTA.get(kind, ()):
            if hidden <= max_hidden:
                sched.update(vecs_per_thread=k_rows or k, rows_per_cta=rows)
                return {**sched, "lean": True} if lean else sched
    return sched


def batch_class(tokens: int) -> int:
    """A token count with the schedule of ``tokens``: schedule() reads tokens only against
    SMALL_BATCH and MANY_ROWS, so the host caches its kernels per class, not per count."""
    if tokens <= SMALL_BATCH:
        return SMALL_BATCH
    return SMALL_BATCH + 1 if tokens < MANY_ROWS else MANY_ROWS
