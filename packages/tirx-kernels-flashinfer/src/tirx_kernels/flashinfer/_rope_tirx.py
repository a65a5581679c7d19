# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2023 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The RoPE kernels in TIRx: the few-token "grid" and the many-token "walk" kernel.

Port of FlashInfer's ``BatchQKApplyRotaryPosIdsKernel`` and
``BatchQKApplyRotaryPosIdsHeadParallelismKernel`` with the rotation of
``vec_apply_llama_rope_cos_sin`` / ``vec_apply_llama_rope_cos_sin_interleave``
(``include/flashinfer/pos_enc.cuh`` @ fb28d724). Which one runs, and its grid, is
:mod:`._rope_schedule`'s; the numerics are stated in :mod:`.rope`. A thread owns 8 rotation
pairs of one token: two 16-byte vectors of a head (``a[off:off+16]``), rotated in fp32.
With a partial ``rotary_dim`` (a multiple of 16 below ``head_dim``) the kernels rotate the
leading ``rotary_dim`` columns as a head of that size and leave the rest, as upstream.
"""

from __future__ import annotations

from tirx_kernels.core import toolchain

from ._rope_schedule import MIN_CTAS_PER_SM, PAIRS, THREADS, walk_shape

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256, 512)  # upstream's DISPATCH_HEAD_DIM
POS_DTYPES = ("int32", "int64")


def rotary_dims(head_dim):
    """The ``rotary_dim`` values a head of ``head_dim`` takes: multiples of 16 up to it."""
    return range(2 * PAIRS, head_dim + 1, 2 * PAIRS)


def _check_static(dtype, head_dim, num_q_heads, num_kv_heads, pos_dtype, rotary_dim):
    if dtype not in DTYPES:
        raise ValueError(f"flashinfer_rope: dtype must be one of {DTYPES}, got {dtype!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"flashinfer_rope: head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    if pos_dtype not in POS_DTYPES:
        raise ValueError(f"flashinfer_rope: pos_ids dtype must be one of {POS_DTYPES}")
    for name, h in (("num_q_heads", num_q_heads), ("num_kv_heads", num_kv_heads)):
        if not isinstance(h, int) or h <= 0:
            raise ValueError(f"flashinfer_rope: {name} must be a positive int, got {h!r}")
    if rotary_dim not in rotary_dims(head_dim):
        raise ValueError(
            f"flashinfer_rope: rotary_dim must be a multiple of {2 * PAIRS} in "
            f"[{2 * PAIRS}, head_dim={head_dim}], got {rotary_dim!r}"
        )


# The helpers below run at trace time on the (unrolled) loop variable j; `interleave` is a
# Python bool, so only one formula reaches the IR, and unrolling folds it to constants.
def _pair(tx, j, rotary_dim, interleave):
    """Rotation-pair index of a thread's j-th pair (its chunks start at tx*8 and r/2 + tx*8)."""
    if interleave:  # each 8-element chunk holds 4 adjacent pairs
        return tx * 4 + j % 4 + j // 4 * (rotary_dim // 4)
    return tx * 8 + j


def _slots(j, interleave):
    """Positions of pair j's two elements in the thread's 16-element register vector."""
    if interleave:
        lo = 2 * (j % 4) + 8 * (j // 4)
        return lo, lo + 1
    return j, PAIRS + j


def _at(tok, h, c, head_dim, stride8):
    """The index of 8 elements ``[tok, h, c:c+8]``: of a contiguous (n, heads, head_dim)
    tensor (``stride8`` None), else of a flat view whose tokens are ``8 * stride8`` elements
    apart (heads contiguous; the multiple of 8 keeps 16-byte vectors provably aligned)."""
    if stride8 is None:
        return tok, h, toolchain.T.Ramp(c, 1, 8)
    return (toolchain.T.Ramp(tok * (stride8 * 8) + h * head_dim + c, 1, 8),)


def _q_or_k(strides, is_k):
    """q's or k's token stride of ``strides`` ((q, k) in units of 8 elements, or None)."""
    return None if strides is None else strides[int(is_k)]


def _head_ops(T, dtype, head_dim, rotary_dim, num_q_heads, interleave, out_of_place):
    """T.inline helpers of both kernels: (load_head, store_head, rotate, pass_rest).

    A thread's 16 elements of head ``h`` (of the concatenated q heads, then k heads) are the
    8 at column ``tx * 8`` and the 8 at ``rotary_dim / 2 + tx * 8``; they live at
    ``a[off:off+16]``. ``pass_rest`` copies the columns from ``rotary_dim`` on when
    ``out_of_place``, 8 at a time over the head's threads (in place they are never touched,
    and it emits nothing). ``is_q``: whether ``h`` is a q head (an expression, or True/False
    when known statically). ``st``: None for contiguous q and k, else their token strides in
    units of 8 elements over flat views (:func:`_at`).
    """
    f32 = "float32"
    half = rotary_dim // 2
    hq = num_q_heads
    bdx = rotary_dim // (2 * PAIRS)  # threads per head
    rest = (head_dim - rotary_dim) // 8 if out_of_place else 0  # vectors to pass per head

    @T.inline
    def load(X, tok, h, c0, a, off, s8):
        a[T.Ramp(off, 1, 8)] = X[_at(tok, h, c0, head_dim, s8)]
        a[T.Ramp(off + 8, 1, 8)] = X[_at(tok, h, c0 + half, head_dim, s8)]

    @T.inline
    def store(X, tok, h, c0, o, s8):
        X[_at(tok, h, c0, head_dim, s8)] = o[T.Ramp(0, 1, 8)]
        X[_at(tok, h, c0 + half, head_dim, s8)] = o[T.Ramp(8, 1, 8)]

    @T.inline
    def load_head(Q, K, tok, tx, h, is_q, a, off, st):
        if is_q:
            load(Q, tok, h, tx * 8, a, off, _q_or_k(st, False))
        else:
            load(K, tok, h - hq, tx * 8, a, off, _q_or_k(st, True))

    @T.inline
    def store_head(Q, K, tok, tx, h, is_q, o, st):
        if is_q:
            store(Q, tok, h, tx * 8, o, _q_or_k(st, False))
        else:
            store(K, tok, h - hq, tx * 8, o, _q_or_k(st, True))

    @T.inline
    def pass_rest(Q, K, QO, KO, tok, tx, h, is_q):
        if T.constexpr(rest):
            for i in T.unroll(-(-rest // bdx)):
                v = tx + i * bdx
                if (i + 1) * bdx <= rest or v < rest:  # static where it can be
                    c = rotary_dim + v * 8
                    if is_q:
                        QO[tok, h, T.Ramp(c, 1, 8)] = Q[tok, h, T.Ramp(c, 1, 8)]
                    else:
                        KO[tok, h - hq, T.Ramp(c, 1, 8)] = K[tok, h - hq, T.Ramp(c, 1, 8)]

    @T.inline
    def rotate(a, off, o, cs, sn):
        for j in T.unroll(PAIRS):
            lo, hi = _slots(j, interleave)
            x0 = T.cast(a[off + lo], f32)
            x1 = T.cast(a[off + hi], f32)
            o[lo] = T.cast(x0 * cs[j] - x1 * sn[j], dtype)
            o[hi] = T.cast(x1 * cs[j] + x0 * sn[j], dtype)

    return load_head, store_head, rotate, pass_rest


def _entry(T, threads, min_ctas):
    """T.inline ``enter(grid)`` of both kernels: no-alias buffers, a ``grid`` of CTAs of
    ``threads`` threads, at least ``min_ctas`` CTAs an SM (the launch bound)."""

    @T.inline
    def enter(grid):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=grid, block=threads),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=min_ctas),
        )

    return enter


def _function(T, launch, body, name, tensors, out_of_place, strided):
    """The kernel ``name`` (``name + "_out_of_place"``, ``name + "_strided"``): ``launch(grid)``
    then ``body(Q, K, QO, KO, pos, grid, rcp_scale, rcp_theta, st)``, in place (QO, KO are
    Q, K), from q and k into ``q_rope`` and ``k_rope`` of the same shape, or in place on q
    and k whose tokens are a stride apart (a multiple of 8 elements; heads contiguous: the
    head slices of a fused qkv), read through flat views (``st``: the strides / 8).
    ``tensors``: (n, dtype, head_dim, hq, hk, pos_dtype)."""
    n, dtype, head_dim, hq, hk, pos_dtype = tensors
    qs, ks = (n, hq, head_dim), (n, hk, head_dim)
    # what the loads need (TIRx asks 64 bytes by default): 16-byte vectors of q and k, one
    # position at a time (any element of a longer positions tensor, as upstream)
    pos_align = 4 if pos_dtype == "int32" else 8
    if out_of_place:

        @T.function
        def rope_out_of_place(
            Q: T.Tensor(qs, dtype, align=16),
            K: T.Tensor(ks, dtype, align=16),
            QO: T.Tensor(qs, dtype, align=16),
            KO: T.Tensor(ks, dtype, align=16),
            pos: T.Tensor((n,), pos_dtype, align=pos_align),
            grid: T.int32,
            rcp_scale: T.float32,
            rcp_theta: T.float32,
        ):
            launch(grid)
            body(Q, K, QO, KO, pos, grid, rcp_scale, rcp_theta, None)

        return rope_out_of_place.with_attr("global_symbol", f"{name}_out_of_place")
    if strided:
        sq, sk = T.dynamic("sq"), T.dynamic("sk")

        @T.function
        def rope_strided(
            Q: T.Tensor(qs, dtype, align=16, layout=T.TileLayout(T.S[qs : (sq, head_dim, 1)])),
            K: T.Tensor(ks, dtype, align=16, layout=T.TileLayout(T.S[ks : (sk, head_dim, 1)])),
            pos: T.Tensor((n,), pos_dtype, align=pos_align),
            grid: T.int32,
            rcp_scale: T.float32,
            rcp_theta: T.float32,
        ):
            launch(grid)
            qf = T.decl_tensor(Q.data, ty_args=[T.Tensor((n * sq,), dtype, align=16)])
            kf = T.decl_tensor(K.data, ty_args=[T.Tensor((n * sk,), dtype, align=16)])
            body(qf, kf, qf, kf, pos, grid, rcp_scale, rcp_theta, (sq // 8, sk // 8))

        return rope_strided.with_attr("global_symbol", f"{name}_strided")

    @T.function
    def rope(
        Q: T.Tensor(qs, dtype, align=16),
        K: T.Tensor(ks, dtype, align=16),
        pos: T.Tensor((n,), pos_dtype, align=pos_align),
        grid: T.int32,
        rcp_scale: T.float32,
        rcp_theta: T.float32,
    ):
        launch(grid)
        body(Q, K, Q, K, pos, grid, rcp_scale, rcp_theta, None)

    return rope.with_attr("global_symbol", name)


def _kernel_builder(schedule):
    """Decorator: the public builder of a RoPE kernel, with the signature both kernels share
    (the static shape as FlashInfer names it, then the CTA size ``threads``, the launch bound
    ``min_ctas`` (None: the schedule's), ``rotary_dim`` (None: ``head_dim``),
    ``out_of_place`` (the kernel writes ``q_rope``/``k_rope``) and ``strided`` (q and k
    with a token stride, in place; see :func:`_function`)), around ``schedule(shape, threads,
    min_ctas, out_of_place, strided)`` given a checked static ``shape`` (dtype, head_dim, hq,
    hk, interleave, pos_dtype, rotary_dim)."""

    def build(
        dtype="bfloat16",
        head_dim=128,
        num_q_heads=32,
        num_kv_heads=8,
        interleave=False,
        pos_dtype="int32",
        threads=None,
        min_ctas=None,
        rotary_dim=None,
        out_of_place=False,
        strided=False,
        **_,
    ):
        rotary_dim = rotary_dim or head_dim
        _check_static(dtype, head_dim, num_q_heads, num_kv_heads, pos_dtype, rotary_dim)
        if strided and out_of_place:
            raise ValueError("flashinfer_rope: the token-strided kernels rotate in place")
        shape = (dtype, head_dim, num_q_heads, num_kv_heads, interleave, pos_dtype, rotary_dim)
        return schedule(shape, threads, min_ctas, bool(out_of_place), bool(strided))

    build.__name__ = build.__qualname__ = schedule.__name__
    build.__doc__ = schedule.__doc__
    return build


@_kernel_builder
def get_grid_kernel(shape, threads, min_ctas, out_of_place, strided):
    """The few-token kernel for one static shape family; the token count is dynamic.

    Runtime scalars: ``grid`` (gridDim.y, head groups), ``rcp_scale``, ``rcp_theta``.
    ``rotary_dim`` (default ``head_dim``): the rotated leading columns of each head.
    """
    dtype, head_dim, hq, hk, interleave, pos_dtype, rotary_dim = shape
    threads = threads or THREADS
    min_ctas = min_ctas or MIN_CTAS_PER_SM
    T = toolchain.T
    f32 = "float32"
    bdx = rotary_dim // (2 * PAIRS)  # threads per (token, head)
    bdy = threads // bdx  # tokens per CTA
    whole = bdx * bdy == threads  # else the last threads of a CTA idle
    n = T.dynamic("n")
    ops = _head_ops(T, dtype, head_dim, rotary_dim, hq, interleave, out_of_place)
    load_head, store_head, rotate, pass_rest = ops
    enter = _entry(T, threads, min_ctas)

    @T.inline
    def trig(p, tx, cs, sn, rcp_theta, rcp_scale):
        for j in T.unroll(PAIRS):
            k = _pair(tx, j, rotary_dim, interleave)
            expo = T.cast(2 * k, f32) / T.float32(rotary_dim)
            freq = T.call_pure_extern("__powf", rcp_theta, expo, ty=f32) * rcp_scale
            cs[j] = T.call_pure_extern("__cosf", p * freq, ty=f32)
            sn[j] = T.call_pure_extern("__sinf", p * freq, ty=f32)

    @T.inline
    def head(Q, K, QO, KO, tok, tx, h, is_q, a, o, cs, sn, st):
        rotate(a, 0, o, cs, sn)
        store_head(QO, KO, tok, tx, h, is_q, o, st)
        pass_rest(Q, K, QO, KO, tok, tx, h, is_q)

    @T.inline
    def launch(groups):
        enter((T.ceildiv(n, bdy), groups))

    @T.inline
    def body(Q, K, QO, KO, pos, groups, rcp_scale, rcp_theta, st):
        tid = T.cuda.thread_idx("x")
        tx = tid % bdx
        tok = T.cuda.block_idx("x") * bdy + tid // bdx
        gy = T.cuda.block_idx("y")
        cs = T.alloc_local((PAIRS,), f32)
        sn = T.alloc_local((PAIRS,), f32)
        a = T.alloc_local((2 * PAIRS,), dtype)
        o = T.alloc_local((2 * PAIRS,), dtype)
        if (whole or tid < bdx * bdy) and tok < n:
            p = T.cast(pos[tok], f32)
            # First head (gy < groups <= Hq + Hk) peeled: its loads are issued before the
            # trig, so their latency overlaps the position load (upstream loads a head only
            # after sincos, two dependent DRAM trips for a few tokens).
            load_head(Q, K, tok, tx, gy, gy < hq, a, 0, st)
            trig(p, tx, cs, sn, rcp_theta, rcp_scale)
            head(Q, K, QO, KO, tok, tx, gy, gy < hq, a, o, cs, sn, st)
            for it in range(1, T.ceildiv(hq + hk - gy, groups)):
                h = gy + it * groups
                load_head(Q, K, tok, tx, h, h < hq, a, 0, st)
                head(Q, K, QO, KO, tok, tx, h, h < hq, a, o, cs, sn, st)

    tensors = (n, dtype, head_dim, hq, hk, pos_dtype)
    return _function(T, launch, body, "rope", tensors, out_of_place, strided)


@_kernel_builder
def get_walk_kernel(shape, threads, min_ctas, out_of_place, strided):
    """Many-token schedule: CTA ``b`` of ``grid`` CTAs walks tokens ``b, b + grid, ...``.

    Its threads cover consecutive heads of one token (one contiguous span of q, then of k),
    each thread issuing the loads of all its heads before the token's sin/cos; the
    frequencies are computed once per thread. Runtime scalars: ``grid`` (the CTA count,
    ``<= n``), ``rcp_scale``, ``rcp_theta``. ``threads`` (the CTA size, a multiple of 32 and
    of the ``head_dim / 16`` threads of a head) and ``min_ctas`` (the launch bound) default
    to :func:`walk_shape`'s.
    """
    dtype, head_dim, hq, hk, interleave, pos_dtype, rotary_dim = shape
    cta = walk_shape(rotary_dim, hq + hk)
    threads = threads or cta[0]
    min_ctas = min_ctas or cta[1]
    T = toolchain.T
    f32 = "float32"
    bdx = rotary_dim // (2 * PAIRS)  # threads per head
    if threads % 32 or threads % bdx:
        raise ValueError(f"flashinfer_rope: {threads} threads: need a multiple of 32 and {bdx}")
    slots = threads // bdx  # heads a CTA covers at once
    heads = hq + hk
    iters = -(-heads // slots)
    n = T.dynamic("n")
    ops = _head_ops(T, dtype, head_dim, rotary_dim, hq, interleave, out_of_place)
    load_head, store_head, rotate, pass_rest = ops
    enter = _entry(T, threads, min_ctas)

    @T.inline
    def body(Q, K, QO, KO, pos, ctas, rcp_scale, rcp_theta, st):
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
            k = _pair(tx, j, rotary_dim, interleave)
            expo = T.cast(2 * k, f32) / T.float32(rotary_dim)
            freq[j] = T.call_pure_extern("__powf", rcp_theta, expo, ty=f32) * rcp_scale
        for s in range(T.truncdiv(n - bid + ctas - 1, ctas)):  # the host passes ctas <= n
            tok = bid + s * ctas
            for i in T.unroll(iters):
                h = slot + i * slots
                if (i + 1) * slots <= heads or h < heads:  # static where it can be
                    load_head(Q, K, tok, tx, h, (i + 1) * slots <= hq or h < hq, a, i * 16, st)
            p = T.cast(pos[tok], f32)
            for j in T.unroll(PAIRS):
                cs[j] = T.call_pure_extern("__cosf", p * freq[j], ty=f32)
                sn[j] = T.call_pure_extern("__sinf", p * freq[j], ty=f32)
            for i in T.unroll(iters):
                h = slot + i * slots
                if (i + 1) * slots <= heads or h < heads:
                    rotate(a, i * 16, o, cs, sn)
                    store_head(QO, KO, tok, tx, h, (i + 1) * slots <= hq or h < hq, o, st)
                    pass_rest(Q, K, QO, KO, tok, tx, h, (i + 1) * slots <= hq or h < hq)

    tensors = (n, dtype, head_dim, hq, hk, pos_dtype)
    return _function(T, enter, body, "rope_walk", tensors, out_of_place, strided)
