# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2023 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Rotary position embedding with position ids, in place on q and k (``flashinfer_rope``).

Port of FlashInfer's ``apply_rope_pos_ids_inplace`` path (FlashInfer @ fb28d724):

- ``include/flashinfer/pos_enc.cuh``: ``BatchQKApplyRotaryPosIdsKernel`` and
  ``BatchQKApplyRotaryPosIdsHeadParallelismKernel`` (kernels), ``vec_apply_llama_rope_cos_sin``
  and ``vec_apply_llama_rope_cos_sin_interleave`` (the rotation), ``BatchQKApplyRotaryPosIds``
  (host dispatch: head_dim in {64, 128, 256, 512}, token- vs head-parallel grid).
- ``csrc/rope.cu``: ``apply_rope_pos_ids`` (shape checks, int32/int64 position ids).
- ``flashinfer/rope.py``: ``apply_rope_pos_ids_inplace`` / ``apply_rope_pos_ids`` (defaults
  ``rope_scale=1``, ``rope_theta=1e4``).

The numerics below are identical in flashinfer-python 0.7.2.post1 (git beabf500), the build
used as the reference on the H200.

For a token with position ``p`` and rotation pair ``k`` (``0 <= k < head_dim / 2``), in fp32
with fast-math intrinsics exactly as upstream (TIRx builds with ``-use_fast_math`` as well):
``freq_k = __powf(1/rope_theta, float(2k) / head_dim) * (1/rope_scale)`` (the reciprocals are
rounded to fp32 on the host, as upstream does; upstream's llama-3.1 "smooth" blend is the
identity for this entry point), ``theta = float(p) * freq_k``, ``cos/sin = __cosf/__sinf(theta)``
(PTX ``cos/sin.approx``, like upstream's ``__sincosf``). Pair ``k`` is elements ``(k, k + d/2)``
(non-interleaved, "neox") or ``(2k, 2k + 1)`` (interleaved, GPT-J):
``x0' = x0 * cos - x1 * sin``, ``x1' = x1 * cos + x0 * sin``, rounded to the input dtype.
Expected difference to FlashInfer: at most one output ulp (fp32 contraction order); to an
accurate fp32 torch reference: dominated by ``__powf``'s ~4e-7 relative error times ``p``
(about 1e-2 absolute at p ~ 4k on randn data).

Schedules (see :func:`uses_walk`): a thread owns 8 rotation pairs of one token (two 16-byte
vectors of a head). Few tokens ("grid" kernel): the thread loops over a group of heads (q
heads, then k heads) reusing its cos/sin; ``gridDim.y`` splits the heads into groups, chosen
on the host from the SM count so that few tokens still fill the GPU (upstream's
head-parallel kernel). Many tokens ("walk" kernel): a CTA walks tokens ``b, b + ctas, ...``
with its threads on consecutive heads of one token (all of them at once when they fit 512
threads, :func:`walk_shape`), all of a thread's loads issued before the token's sin/cos.
H200 sweep (scripts/rope_sweep.py, proton, one round, µs, grid vs the first, 128-thread walk):
bf16 d128 32+8 heads t16384 89.94 vs 88.48 (interleaved 90.57 vs 88.31), fp16 d64 t16383
49.87 vs 43.91, bf16 d256 16+8 heads t8192 54.93 vs 52.63; bf16 d128 32+8 heads t512
4.66 vs 4.40.

Dispatch domain (checked; anything else raises ValueError): q ``(nnz, Hq, D)`` and k
``(nnz, Hk, D)`` contiguous CUDA tensors, same dtype bfloat16 or float16, ``D`` in
{64, 128, 256} and ``rotary_dim == D`` (upstream also takes 512 and a partial rotary_dim);
``pos_ids`` contiguous int32 or int64 of shape ``(nnz,)``; ``nnz * max(Hq, Hk) * D < 2**31``.
"""

from __future__ import annotations

import functools
import math
import unittest

import torch

from tirx_kernels.core import toolchain

from .._checks import assert_within

KERNEL_META = {
    "name": "flashinfer_rope",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "RoPE with position ids, in place on q and k (FlashInfer port)",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS: tuple[str, ...] = ()  # declared by the op layer (contract v2)

CONFIGS = [
    {
        "label": "bf16_d128_hq32_hk8_t1",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 1,
    },
    {
        "label": "bf16_d128_hq32_hk8_t4113",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 4113,
    },
    {
        "label": "bf16_d128_hq32_hk8_t4113_il",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": True,
        "tokens": 4113,
    },
    {
        "label": "fp16_d64_hq16_hk4_t777_il_i64",
        "dtype": "float16",
        "head_dim": 64,
        "num_q_heads": 16,
        "num_kv_heads": 4,
        "interleave": True,
        "tokens": 777,
        "pos_dtype": "int64",
    },
    {
        "label": "fp16_d256_hq8_hk1_t31_th1e6_s2",
        "dtype": "float16",
        "head_dim": 256,
        "num_q_heads": 8,
        "num_kv_heads": 1,
        "interleave": False,
        "tokens": 31,
        "rope_theta": 1e6,
        "rope_scale": 2.0,
    },
    {
        "label": "bf16_d64_hq32_hk8_t16",
        "dtype": "bfloat16",
        "head_dim": 64,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 16,
    },
    {
        "label": "bf16_d128_hq28_hk4_t16383_th1e6",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 28,
        "num_kv_heads": 4,
        "interleave": False,
        "tokens": 16383,
        "rope_theta": 1e6,
    },
    {
        # 5 head steps of 8 heads: the grid kernel, its head loop (3 groups of ~14 heads)
        "label": "bf16_d256_hq32_hk8_t4000",
        "dtype": "bfloat16",
        "head_dim": 256,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 4000,
    },
    {
        "label": "bf16_d256_hq16_hk16_t1031_il",
        "dtype": "bfloat16",
        "head_dim": 256,
        "num_q_heads": 16,
        "num_kv_heads": 16,
        "interleave": True,
        "tokens": 1031,
    },
]

BENCH_CONFIGS = [
    {
        "label": "bf16_d128_hq32_hk8_t1",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 1,
    },
    {
        "label": "bf16_d128_hq32_hk8_t16",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 16,
    },
    {
        "label": "bf16_d128_hq32_hk8_t512",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 512,
    },
    {
        "label": "bf16_d128_hq32_hk8_t16384",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 16384,
    },
    {
        "label": "bf16_d128_hq32_hk8_t16384_il",
        "dtype": "bfloat16",
        "head_dim": 128,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": True,
        "tokens": 16384,
    },
    {
        "label": "fp16_d64_hq32_hk8_t16383",
        "dtype": "float16",
        "head_dim": 64,
        "num_q_heads": 32,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 16383,
    },
    {
        "label": "bf16_d256_hq16_hk8_t8192",
        "dtype": "bfloat16",
        "head_dim": 256,
        "num_q_heads": 16,
        "num_kv_heads": 8,
        "interleave": False,
        "tokens": 8192,
    },
]

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256)
POS_DTYPES = ("int32", "int64")
THREADS = 128
# The grid kernel's launch bound: caps registers at 40 so 1536 threads stay resident (an H200
# sweep, proton, t16384 d128: 89.80 µs at 12, 89.28 at 8, 88.85 at 8 with the next head's
# loads prefetched into a second register buffer; the walk kernel now serves many tokens).
MIN_CTAS_PER_SM = 12
PAIRS = 8  # rotation pairs per thread: two 16-byte vectors of a head
WALK_MIN_TOKENS = 512  # the walk kernel from here on (one sweep point; module docstring)
WALK_MAX_HEAD_STEPS = 4  # a walk thread holds this many heads' vectors at most (registers)
# The walk CTA: a token's heads in one step when they fit 512 threads, ~1024 threads per SM
# (H200 sweep, proton, one round, µs, vs the earlier 128-thread CTAs at 8 per SM, 4 at d256:
# bf16 d128 32+8 heads t16384 320 threads x 3 84.73 vs 88.59, interleaved 84.92 vs 88.68;
# fp16 d64 t16383 160 x 6 43.09 vs 43.73; bf16 d256 16+8 t8192 384 x 2 51.63 vs 52.86;
# t512 d128 4.59 vs 4.74. 1536 threads per SM: d128 120.44 at 160 x 9, d64 43.88. Grids
# that split the tokens evenly over fewer CTAs: within 0.5%). Tried and dropped (2026-12-04,
# proton, three rounds, vs this schedule): a walk holding two tokens in registers, loading the
# next token's heads and position while this one rotates: d256 16+8 t8192 55.78 vs 51.68
# (neg 51.17), d128 t16384 94.74 vs 85.03, fp16 d64 55.55 vs 42.87 (nvcc split one of its
# 16-byte stores into 32-bit ones); one more CTA per SM: d256 51.48, d128 86.37 vs 85.03.
WALK_MAX_THREADS = 512
WALK_THREADS_PER_SM = 1024


def _check_static(dtype, head_dim, num_q_heads, num_kv_heads, pos_dtype):
    if dtype not in DTYPES:
        raise ValueError(f"flashinfer_rope: dtype must be one of {DTYPES}, got {dtype!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"flashinfer_rope: head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    if pos_dtype not in POS_DTYPES:
        raise ValueError(f"flashinfer_rope: pos_ids dtype must be one of {POS_DTYPES}")
    for name, h in (("num_q_heads", num_q_heads), ("num_kv_heads", num_kv_heads)):
        if not isinstance(h, int) or h <= 0:
            raise ValueError(f"flashinfer_rope: {name} must be a positive int, got {h!r}")


# The helpers below run at trace time on the (unrolled) loop variable j; `interleave` is a
# Python bool, so only one formula reaches the IR, and unrolling folds it to constants.
def _pair(tx, j, head_dim, interleave):
    """Rotation-pair index of a thread's j-th pair (its chunks start at tx*8 and d/2 + tx*8)."""
    if interleave:  # each 8-element chunk holds 4 adjacent pairs
        return tx * 4 + j % 4 + j // 4 * (head_dim // 4)
    return tx * 8 + j


def _slots(j, interleave):
    """Positions of pair j's two elements in the thread's 16-element register vector."""
    if interleave:
        lo = 2 * (j % 4) + 8 * (j // 4)
        return lo, lo + 1
    return j, PAIRS + j


def _head_ops(T, dtype, head_dim, num_q_heads, interleave):
    """T.inline helpers of both kernels: (load_head, store_head, rotate).

    A thread's 16 elements of head ``h`` (of the concatenated q heads, then k heads) are the
    8 at column ``tx * 8`` and the 8 at ``head_dim / 2 + tx * 8``; they live at ``a[off:off+16]``.
    ``is_q``: whether ``h`` is a q head (an expression, or True/False when known statically).
    """
    f32 = "float32"
    half = head_dim // 2
    hq = num_q_heads

    @T.inline
    def load(X, tok, h, c0, a, off):
        a[T.Ramp(off, 1, 8)] = X[tok, h, T.Ramp(c0, 1, 8)]
        a[T.Ramp(off + 8, 1, 8)] = X[tok, h, T.Ramp(c0 + half, 1, 8)]

    @T.inline
    def store(X, tok, h, c0, o):
        X[tok, h, T.Ramp(c0, 1, 8)] = o[T.Ramp(0, 1, 8)]
        X[tok, h, T.Ramp(c0 + half, 1, 8)] = o[T.Ramp(8, 1, 8)]

    @T.inline
    def load_head(Q, K, tok, tx, h, is_q, a, off):
        if is_q:
            load(Q, tok, h, tx * 8, a, off)
        else:
            load(K, tok, h - hq, tx * 8, a, off)

    @T.inline
    def store_head(Q, K, tok, tx, h, is_q, o):
        if is_q:
            store(Q, tok, h, tx * 8, o)
        else:
            store(K, tok, h - hq, tx * 8, o)

    @T.inline
    def rotate(a, off, o, cs, sn):
        for j in T.unroll(PAIRS):
            lo, hi = _slots(j, interleave)
            x0 = T.cast(a[off + lo], f32)
            x1 = T.cast(a[off + hi], f32)
            o[lo] = T.cast(x0 * cs[j] - x1 * sn[j], dtype)
            o[hi] = T.cast(x1 * cs[j] + x0 * sn[j], dtype)

    return load_head, store_head, rotate


def walk_shape(head_dim, num_heads):
    """(threads, CTAs per SM) of the walk kernel: the fewest equal head steps that fit
    WALK_MAX_THREADS, rounded up to a warp, and WALK_THREADS_PER_SM threads per SM."""
    bdx = head_dim // (2 * PAIRS)  # threads per head
    steps = -(-num_heads * bdx // WALK_MAX_THREADS)
    threads = -(-(-(-num_heads // steps) * bdx) // 32) * 32
    return threads, max(1, WALK_THREADS_PER_SM // threads)


def uses_walk(tokens, head_dim, num_heads):
    """Whether the host launches the walk kernel for ``tokens`` (None: many) tokens."""
    steps = -(-num_heads // (THREADS // (head_dim // (2 * PAIRS))))
    return (tokens is None or tokens >= WALK_MIN_TOKENS) and steps <= WALK_MAX_HEAD_STEPS


def get_kernel(
    dtype="bfloat16",
    head_dim=128,
    num_q_heads=32,
    num_kv_heads=8,
    interleave=False,
    pos_dtype="int32",
    tokens=None,
    **_,
):
    """The TIRx kernel the host launches for ``tokens`` tokens (see :func:`launcher`)."""
    args = (dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype)
    if uses_walk(tokens, head_dim, num_q_heads + num_kv_heads):
        return get_walk_kernel(*args)
    return get_grid_kernel(*args)


def get_grid_kernel(
    dtype="bfloat16",
    head_dim=128,
    num_q_heads=32,
    num_kv_heads=8,
    interleave=False,
    pos_dtype="int32",
    threads=THREADS,
    min_ctas=MIN_CTAS_PER_SM,
    **_,
):
    """The few-token kernel for one static shape family; the token count is dynamic.

    Runtime scalars: ``groups`` (gridDim.y, head groups), ``rcp_scale``, ``rcp_theta``.
    """
    _check_static(dtype, head_dim, num_q_heads, num_kv_heads, pos_dtype)
    T = toolchain.T
    f32 = "float32"
    bdx = head_dim // (2 * PAIRS)  # threads per (token, head)
    bdy = threads // bdx  # tokens per CTA
    hq, hk = num_q_heads, num_kv_heads
    n = T.dynamic("n")

    load_head, store_head, rotate = _head_ops(T, dtype, head_dim, hq, interleave)

    @T.inline
    def trig(p, tx, cs, sn, rcp_theta, rcp_scale):
        for j in T.unroll(PAIRS):
            k = _pair(tx, j, head_dim, interleave)
            expo = T.cast(2 * k, f32) / T.float32(head_dim)
            freq = T.call_pure_extern("__powf", rcp_theta, expo, ty=f32) * rcp_scale
            cs[j] = T.call_pure_extern("__cosf", p * freq, ty=f32)
            sn[j] = T.call_pure_extern("__sinf", p * freq, ty=f32)

    @T.function
    def rope(
        Q: T.Tensor((n, hq, head_dim), dtype),
        K: T.Tensor((n, hk, head_dim), dtype),
        pos: T.Tensor((n,), pos_dtype),
        groups: T.int32,
        rcp_scale: T.float32,
        rcp_theta: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=(T.ceildiv(n, bdy), groups), block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=min_ctas),
        )
        tid = T.cuda.thread_idx("x")
        tx = tid % bdx
        tok = T.cuda.block_idx("x") * bdy + tid // bdx
        gy = T.cuda.block_idx("y")
        cs = T.alloc_local((PAIRS,), f32)
        sn = T.alloc_local((PAIRS,), f32)
        a = T.alloc_local((2 * PAIRS,), dtype)
        o = T.alloc_local((2 * PAIRS,), dtype)
        if tok < n:
            p = T.cast(pos[tok], f32)
            # First head (gy < groups <= Hq + Hk) peeled: its loads are issued before the
            # trig, so their latency overlaps the position load (upstream loads a head only
            # after sincos, two dependent DRAM trips for a few tokens).
            load_head(Q, K, tok, tx, gy, gy < hq, a, 0)
            trig(p, tx, cs, sn, rcp_theta, rcp_scale)
            rotate(a, 0, o, cs, sn)
            store_head(Q, K, tok, tx, gy, gy < hq, o)
            for it in range(1, T.ceildiv(hq + hk - gy, groups)):
                h = gy + it * groups
                load_head(Q, K, tok, tx, h, h < hq, a, 0)
                rotate(a, 0, o, cs, sn)
                store_head(Q, K, tok, tx, h, h < hq, o)

    return rope


def get_walk_kernel(
    dtype="bfloat16",
    head_dim=128,
    num_q_heads=32,
    num_kv_heads=8,
    interleave=False,
    pos_dtype="int32",
    min_ctas=None,
    threads=None,
    **_,
):
    """Many-token schedule: CTA ``b`` of ``ctas`` walks tokens ``b, b + ctas, ...``.

    Its threads cover consecutive heads of one token (one contiguous span of q, then of k),
    each thread issuing the loads of all its heads before the token's sin/cos; the
    frequencies are computed once per thread. Runtime scalars: ``ctas`` (``<= n``),
    ``rcp_scale``, ``rcp_theta``. ``threads`` (the CTA size, a multiple of 32 and of the
    ``head_dim / 16`` threads of a head) and ``min_ctas`` (the launch bound) default to
    :func:`walk_shape`'s.
    """
    _check_static(dtype, head_dim, num_q_heads, num_kv_heads, pos_dtype)
    shape = walk_shape(head_dim, num_q_heads + num_kv_heads)
    threads = threads or shape[0]
    min_ctas = min_ctas or shape[1]
    T = toolchain.T
    f32 = "float32"
    bdx = head_dim // (2 * PAIRS)  # threads per head
    if threads % 32 or threads % bdx:
        raise ValueError(f"flashinfer_rope: {threads} threads: need a multiple of 32 and {bdx}")
    slots = threads // bdx  # heads a CTA covers at once
    hq, hk = num_q_heads, num_kv_heads
    heads = hq + hk
    iters = -(-heads // slots)
    n = T.dynamic("n")

    load_head, store_head, rotate = _head_ops(T, dtype, head_dim, hq, interleave)

    @T.function
    def rope_walk(
        Q: T.Tensor((n, hq, head_dim), dtype),
        K: T.Tensor((n, hk, head_dim), dtype),
        pos: T.Tensor((n,), pos_dtype),
        ctas: T.int32,
        rcp_scale: T.float32,
        rcp_theta: T.float32,
    ):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=ctas, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=min_ctas),
        )
        tid = T.cuda.thread_idx("x")
        bid = T.cuda.block_idx("x")
        tx = tid % bdx
        slot = tid // bdx
        freq = T.alloc_local((PAIRS,), f32)
        cs = T.alloc_local((PAIRS,), f32)
        sn = T.alloc_local((PAIRS,), f32)
        a = T.alloc_local((iters * 2 * PAIRS,), dtype)
        o = T.alloc_local((2 * PAIRS,), dtype)
        for j in T.unroll(PAIRS):
            k = _pair(tx, j, head_dim, interleave)
            expo = T.cast(2 * k, f32) / T.float32(head_dim)
            freq[j] = T.call_pure_extern("__powf", rcp_theta, expo, ty=f32) * rcp_scale
        for s in range(T.truncdiv(n - bid + ctas - 1, ctas)):  # the host passes ctas <= n
            tok = bid + s * ctas
            for i in T.unroll(iters):
                h = slot + i * slots
                if (i + 1) * slots <= heads or h < heads:  # static where it can be
                    load_head(Q, K, tok, tx, h, (i + 1) * slots <= hq or h < hq, a, i * 16)
            p = T.cast(pos[tok], f32)
            for j in T.unroll(PAIRS):
                cs[j] = T.call_pure_extern("__cosf", p * freq[j], ty=f32)
                sn[j] = T.call_pure_extern("__sinf", p * freq[j], ty=f32)
            for i in T.unroll(iters):
                h = slot + i * slots
                if (i + 1) * slots <= heads or h < heads:
                    rotate(a, i * 16, o, cs, sn)
                    store_head(Q, K, tok, tx, h, (i + 1) * slots <= hq or h < hq, o)

    return rope_walk


@functools.cache
def _compiled(dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, walk):
    args = (dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype)
    if walk:
        return toolchain.compile(get_walk_kernel(*args))
    return toolchain.compile(get_grid_kernel(*args))


def launcher(dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, tokens, sms):
    """``f(q, k, pos, rcp_scale, rcp_theta)`` running the host's kernel for ``tokens >= 1``.

    ``sms``: the device's SM count, which sizes the grid.
    """
    heads = num_q_heads + num_kv_heads
    walk = uses_walk(tokens, head_dim, heads)
    ex = _compiled(dtype, head_dim, num_q_heads, num_kv_heads, bool(interleave), pos_dtype, walk)
    if walk:
        grid = min(tokens, sms * walk_shape(head_dim, heads)[1])
    else:
        grid = head_groups(tokens, head_dim, heads, sms)
    return lambda q, k, pos, rcp_scale, rcp_theta: ex(q, k, pos, grid, rcp_scale, rcp_theta)


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


def _f32(x):
    return float(torch.tensor(x, dtype=torch.float32))


def apply_rope_pos_ids_inplace(
    q, k, pos_ids, rotary_dim=None, interleave=False, rope_scale=1.0, rope_theta=1e4
):
    """Rotate q ``(nnz, Hq, D)`` and k ``(nnz, Hk, D)`` in place by ``pos_ids`` ``(nnz,)``."""
    for name, t in (("q", q), ("k", k), ("pos_ids", pos_ids)):
        if not isinstance(t, torch.Tensor) or not t.is_cuda or not t.is_contiguous():
            raise ValueError(f"flashinfer_rope: {name} must be a contiguous CUDA tensor")
    if q.dim() != 3 or k.dim() != 3:
        raise ValueError("flashinfer_rope: q and k must be (nnz, heads, head_dim)")
    nnz, hq, d = q.shape
    if k.shape[0] != nnz or k.shape[2] != d or tuple(pos_ids.shape) != (nnz,):
        raise ValueError(
            f"flashinfer_rope: shapes disagree: q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"pos_ids {tuple(pos_ids.shape)}"
        )
    if k.dtype != q.dtype or k.device != q.device or pos_ids.device != q.device:
        raise ValueError("flashinfer_rope: q and k must share dtype and device with pos_ids")
    if rotary_dim is not None and rotary_dim != d:
        raise ValueError(f"flashinfer_rope: only rotary_dim == head_dim ({d}) is supported")
    dtype = str(q.dtype).removeprefix("torch.")
    pos_dtype = str(pos_ids.dtype).removeprefix("torch.")
    hk = k.shape[1]
    _check_static(dtype, d, hq, hk, pos_dtype)
    if nnz * max(hq, hk) * d >= 2**31:
        raise ValueError("flashinfer_rope: q/k too large for int32 indexing")
    if (
        not math.isfinite(rope_scale)
        or not math.isfinite(rope_theta)
        or rope_scale == 0
        or rope_theta == 0
    ):
        raise ValueError("flashinfer_rope: rope_scale and rope_theta must be finite and nonzero")
    if nnz == 0:
        return
    run = launcher(
        dtype, d, hq, hk, interleave, pos_dtype, nnz, toolchain.sm_count(q.device.index or 0)
    )
    # Upstream passes float rope_scale / rope_theta and takes 1.0f / x in fp32 on the host.
    run(q, k, pos_ids, _f32(1.0 / _f32(rope_scale)), _f32(1.0 / _f32(rope_theta)))


def prepare_data(
    dtype="bfloat16", head_dim=128, num_q_heads=32, num_kv_heads=8, tokens=1, pos_dtype="int32", **_
):
    g = torch.Generator(device="cuda").manual_seed(4321 + tokens + head_dim)
    tdt = getattr(torch, dtype)
    q = torch.randn(tokens, num_q_heads, head_dim, generator=g, device="cuda").to(tdt)
    k = torch.randn(tokens, num_kv_heads, head_dim, generator=g, device="cuda").to(tdt)
    pos = torch.randint(
        0, 4096, (tokens,), generator=g, device="cuda", dtype=getattr(torch, pos_dtype)
    )
    return q, k, pos


def reference(x, pos, interleave=False, rope_scale=1.0, rope_theta=1e4):
    """torch fp32 RoPE of x ``(nnz, H, D)`` (accurate pow / cos / sin)."""
    d = x.shape[-1]
    expo = torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d
    freq = torch.pow(torch.tensor(_f32(1.0 / _f32(rope_theta)), device=x.device), expo)
    freq = freq * _f32(1.0 / _f32(rope_scale))
    theta = pos.float()[:, None, None] * freq  # (nnz, 1, D/2)
    c, s = theta.cos(), theta.sin()
    xf = x.float()
    x0, x1 = (xf[..., 0::2], xf[..., 1::2]) if interleave else xf.chunk(2, dim=-1)
    y0, y1 = x0 * c - x1 * s, x1 * c + x0 * s
    if interleave:
        return torch.stack((y0, y1), dim=-1).flatten(-2)
    return torch.cat((y0, y1), dim=-1)


def run_test(
    dtype="bfloat16",
    head_dim=128,
    num_q_heads=32,
    num_kv_heads=8,
    interleave=False,
    tokens=1,
    pos_dtype="int32",
    rope_scale=1.0,
    rope_theta=1e4,
    **_,
):
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        raise unittest.SkipTest(f"needs one of {KERNEL_META['archs']}, have {toolchain.gpu_arch()}")
    q, k, pos = prepare_data(dtype, head_dim, num_q_heads, num_kv_heads, tokens, pos_dtype)
    q0, k0 = q.clone(), k.clone()
    apply_rope_pos_ids_inplace(
        q, k, pos, interleave=interleave, rope_scale=rope_scale, rope_theta=rope_theta
    )
    torch.cuda.synchronize()
    ulp = 2**-7 if dtype == "bfloat16" else 2**-10
    # __powf's relative error (~4e-7) times positions < 4096 moves the angle by up to ~1.5e-3.
    report = {}
    for name, got, x0 in (("q", q, q0), ("k", k, k0)):
        want = reference(x0, pos, interleave, rope_scale, rope_theta)
        report[f"max_err_torch_{name}"] = assert_within(
            got, want, 1.5e-2, ulp, f"{name} vs torch fp32"
        )
    try:
        import flashinfer.rope as fr
    except ImportError:
        return report
    qf, kf = q0.clone(), k0.clone()
    fr.apply_rope_pos_ids_inplace(
        qf, kf, pos, interleave=interleave, rope_scale=rope_scale, rope_theta=rope_theta
    )
    for name, got, want in (("q", q, qf), ("k", k, kf)):  # same intrinsics: <= 1 ulp apart
        report[f"max_err_flashinfer_{name}"] = assert_within(
            got, want, 1e-4, ulp, f"{name} vs flashinfer"
        )
    return report


def run_bench(
    dtype="bfloat16",
    head_dim=128,
    num_q_heads=32,
    num_kv_heads=8,
    interleave=False,
    tokens=1,
    pos_dtype="int32",
    rope_scale=1.0,
    rope_theta=1e4,
    *,
    warmup=None,
    repeat=None,
    timer=None,
    rounds=1,
    cooldown_s=1.0,
    **_,
):
    q, k, pos = prepare_data(dtype, head_dim, num_q_heads, num_kv_heads, tokens, pos_dtype)
    hq, hk = num_q_heads, num_kv_heads
    sms = toolchain.sm_count(q.device.index or 0)
    run = launcher(dtype, head_dim, hq, hk, interleave, pos_dtype, tokens, sms)
    rs, rt = _f32(1.0 / _f32(rope_scale)), _f32(1.0 / _f32(rope_theta))

    def tirx():  # in place, repeated: a rotation keeps the data bounded
        run(q, k, pos, rs, rt)

    def build_flashinfer():
        import flashinfer.rope as fr

        qf, kf = q.clone(), k.clone()

        def launch():
            fr.apply_rope_pos_ids_inplace(
                qf, kf, pos, interleave=interleave, rope_scale=rope_scale, rope_theta=rope_theta
            )

        launch()  # JIT build and load outside timing
        return launch

    def build_torch():
        qt, kt = q.clone(), k.clone()

        def launch():
            for x in (qt, kt):
                x.copy_(reference(x, pos, interleave, rope_scale, rope_theta))

        return launch

    return toolchain.bench(
        {"tirx": tirx},
        references={"flashinfer": build_flashinfer, "torch": build_torch},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )
