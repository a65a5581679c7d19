# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""RMSNorm's schedule: how a row of ``hidden`` elements is spread over threads.

A row is read as 16-byte vectors; each of the row's ``tpr`` threads keeps ``per`` vectors
of X and of W in registers, so X is read once and Y written once. What matters at large
batch is bytes of X in flight per SM; the choices below are measured in docs/rmsnorm.md.
"""

from __future__ import annotations

VEC = 8  # elements per 16-byte access (bf16/fp16)
MAX_HIDDEN = 32768  # the kernel's domain: hidden % VEC == 0 and VEC <= hidden <= MAX_HIDDEN
THREADS_PER_SM = 2048


def cdiv(a, b):
    return -(-a // b)


def default_schedule(hidden):
    """(threads per row, rows per CTA, CTAs per SM for the launch bounds) of a row size."""
    nvec = hidden // VEC
    if nvec <= 32:  # short rows share a warp, 8 warps a CTA
        tpr = 1 << (nvec - 1).bit_length()
        return tpr, 256 // tpr, 8
    # 4 vectors a thread for 4096 <= hidden <= 8192, else 2 (docs/rmsnorm.md#vectors-per-thread)
    per = 4 if 512 <= nvec <= 1024 else max(2, cdiv(nvec, 1024))
    tpr = cdiv(cdiv(nvec, per), 32) * 32
    # 2 vectors: full occupancy at 32 registers; 4: half occupancy at 64 registers. Masked
    # (ragged) rows or more vectors (hidden > 16384): let ptxas choose rather than spill.
    if tpr * cdiv(nvec, tpr) != nvec or per > 4:
        return tpr, 1, 1
    return tpr, 1, THREADS_PER_SM // tpr // (1 if per <= 2 else 2)
