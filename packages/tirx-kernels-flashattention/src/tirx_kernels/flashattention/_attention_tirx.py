# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The sm_90a forward attention kernel, after FlashAttention-3's Hopper forward
(``hopper/flash_fwd_kernel_sm90.h``, ``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``,
``hopper/softmax.h``, ``hopper/mask.h``, ``hopper/epilogue_fwd.hpp``).

``O = softmax(Q K^T * scale) V`` per (batch, head), fp32 softmax and accumulation, bf16/fp16
in and out, plus ``LSE = log(sum(exp(Q K^T * scale)))`` per query row in fp32.

Tensors are passed as 2D views: Q ``[batch * seqlen_q, heads_q * d]``, K
``[batch * seqlen_k, heads_kv * d]``, V ``[batch * seqlen_k, heads_kv * dv]``, ``Out`` like Q
with dv, LSE ``[batch * heads_q * seqlen_q]`` (the contiguous ``(batch, heads, seqlen)``).

Variable length (``make_flash_fwd_varlen``, ``hopper/seqlen.h``): the same body over packed
Q ``[total_q, heads_q * d]``, K/V ``[total_k, heads_kv * d]``, LSE ``(heads_q, total_q)``,
each sequence's offsets and lengths read from ``cu_seqlens``.

Sizes are launch arguments, as upstream's: the row counts come from the tensors, batch,
sequence lengths (or ``max_seqlen_q``) and the softmax scale are scalars, so one compiled
kernel per (heads, head dims, dtype, causal, schedule) serves every problem.

Schedule (``_attention_schedule.Schedule``): one CTA per (kBlockM-row Q tile, head, batch),
one producer warpgroup and kBlockM / 64 consumers (128: 384 threads; 192: 512). Warpgroup 0
is the producer: one thread TMA-loads the Q tile once and then K and V tiles (kBlockN rows,
128B swizzle) into ``stages`` ring slots with full/empty mbarriers, separate for K and V
(``split_kv``) or shared. Each consumer warpgroup owns 64 Q rows: S = Q K^T with ``wgmma``
SS (both K-major), the masks (keys past seqlen_k; causal, bottom-right aligned) and the
online softmax on the f32 accumulator fragment (rows reduced over the 4 lanes of a quad),
P rounded to 16 bits in registers as the A operand of ``wgmma`` RS for O += P V, with V
read MN-major from the same shared tile (``imm-trans-b``). Epilogue: O / rowsum and LSE
stored from registers, clipped at seqlen_q. A tile's K/V rows past seqlen_k belong to the
next batch (or are zero-filled by TMA at the end): they are masked to -inf in S, so their P
is exactly 0. ``overlap`` issues S of block it with P V of block it - 1 (intra-warpgroup);
``pingpong`` gives the consumers' GEMMs turns with named barriers (inter-warpgroup).
``persistent`` (batched kernel): one CTA per SM walks the tiles in
``_attention_schedule.tile_coords`` order (causal: handed out by an atomic counter), the
producer reloading Q once the consumers' last S GEMMs of the previous tile are done (a
Q-free mbarrier) while they finish it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types

from tirx_kernels.core import toolchain
from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.wgmma import (
    kmajor_descriptor_base,
    kstep_offset,
    mnmajor_descriptor_base,
    mnmajor_kstep_offset,
)
from tirx_kernels.core.toolchain import T

from ._attention_schedule import pick_schedule, section_heads, tile_coords

DTYPES = ("bfloat16", "float16")
# named barriers of the ping-pong (upstream's FwdNamedBarriers::WarpSchedulerWG1..3): the
# consumer warpgroup wg (1 .. consumers) waits on 3 + wg before issuing its GEMMs, then passes
# the turn to the next one, cyclically; 0 is the CTA barrier
_SCHED_BAR = 3
_P_BAR = 6  # with ``pv_smem``, warpgroup wg's P tile is written when named barrier 6 + wg opens
_CVT = {"bfloat16": "bf16x2", "float16": "f16x2"}
LOG2E = 1.4426950408889634
NINF = -math.inf


def _check_sizes(dtype, heads_q, heads_kv):
    if dtype not in DTYPES:
        raise ValueError(f"flash_attn_fwd: dtype must be one of {DTYPES}, got {dtype!r}")
    for name, v in (("heads_q", heads_q), ("heads_kv", heads_kv)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"flash_attn_fwd: {name} must be a positive int, got {v!r}")
    if heads_q % heads_kv:
        raise ValueError("flash_attn_fwd: heads_q must be a multiple of heads_kv")


@functools.cache
def make_flash_fwd(heads_q, heads_kv, d, dv, dtype, causal, schedule=None):
    """The PrimFunc of every batched problem of these heads, head dims, dtype and mask:
    ``f(Q, K, V, Out, LSE, batch, seqlen_q, seqlen_k, scale)`` over the 2D views (LSE the
    contiguous ``(batch, heads_q, seqlen_q)``); sizes >= 1, ``scale`` the softmax scale. The
    persistent causal schedule takes a zeroed int32 tile counter after LSE (:func:`needs_counter`).

    ``schedule``: a :class:`Schedule` (default :func:`pick_schedule` of the head dims).
    """
    _check_sizes(dtype, heads_q, heads_kv)
    return _build(heads_q, heads_kv, d, dv, dtype, causal, schedule, False)


def needs_counter(schedule, causal, varlen=False) -> bool:
    """Whether the kernel of ``schedule`` takes a zeroed int32 tile counter (``Sem``) after LSE:
    the persistent causal walk hands out tiles with it."""
    return bool(schedule.persistent and causal and not varlen)


def consumer_registers(producer_regs, consumers):
    """Each consumer warpgroup's ``setmaxnreg``: what the producer's registers leave of those
    the CTA got at launch. ``__launch_bounds__(threads, 1)`` gives every thread 64K / threads
    registers (in steps of 8: 168 at 384 threads), and ``setmaxnreg.inc`` waits until the
    CTA's pool has the registers it asks for, so asking for more than that pool (two
    consumers of 240 beside a producer of 32) hangs the kernel."""
    warpgroups = 1 + consumers
    pool = 65536 // (128 * warpgroups) // 8 * 8 * warpgroups
    return (pool - producer_regs) // consumers // 8 * 8


@functools.cache
def make_flash_fwd_varlen(heads_q, heads_kv, d, dv, dtype, causal, schedule=None):
    """The PrimFunc of packed variable-length problems (``hopper/seqlen.h``):
    ``f(Q, K, V, Out, LSE, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, scale)``; sequence ``i``
    is rows ``cu_seqlens[i]:cu_seqlens[i + 1]`` of Q ``[total_q, heads_q * d]`` and K/V
    ``[total_k, heads_kv * d]``; LSE is ``(heads_q, total_q)``. ``max_seqlen_q`` (>= 1) sizes
    the grid; Q tiles past a sequence's end exit at once."""
    _check_sizes(dtype, heads_q, heads_kv)
    return _build(heads_q, heads_kv, d, dv, dtype, causal, schedule, True)


def _build(heads_q, heads_kv, d, dv, dtype, causal, schedule, varlen):
    """The kernel over 2D views of Q, K, V and Out; ``varlen``: sequence offsets from
    ``cu_seqlens`` arguments, else ``batch`` sequences of equal lengths."""
    sched = schedule or pick_schedule(d, dv, causal, {}, varlen)
    persistent = sched.persistent and not varlen
    # causal tiles differ in length: they are handed out by an atomic counter, longest
    # first (upstream's DynamicPersistentTileScheduler); the others are walked statically
    dynamic = needs_counter(sched, causal, varlen)
    sms = sched.grid or toolchain.num_sms()  # CTAs of the persistent grid
    BN, nstages, split, pingpong = sched.bn, sched.stages, sched.split_kv, sched.pingpong
    group = heads_q // heads_kv
    BM, consumers = sched.bm, sched.consumers
    threads = 128 * (1 + consumers)
    consumer_regs = consumer_registers(sched.regs, consumers)
    mode = Swizzle.B128
    q_bytes = BM * d * 2
    k_bytes = BN * d * 2
    v_bytes = BN * dv * 2
    stage_bytes = k_bytes + v_bytes  # slot s: K at q_bytes + s * stage_bytes, V after it
    smem = q_bytes + nstages * stage_bytes
    p_tile = None
    if sched.pv_smem:  # each consumer's P after the ring, read by SS wgmmas
        steps = tuple(kstep_offset(k, rows=64, elem_bytes=2, mode=mode) for k in range(BN // 16))
        p_tile = _PTile(smem, 64 * BN * 2, kmajor_descriptor_base(mode, 64), steps)
        smem += consumers * p_tile.nbytes
    lag = 1 if sched.overlap else 0  # the producer loads V of block it - lag after K of it
    desc_q = kmajor_descriptor_base(mode, BM)
    desc_k = kmajor_descriptor_base(mode, BN)
    desc_v = mnmajor_descriptor_base(mode, BN)
    q_steps = [kstep_offset(k, rows=BM, elem_bytes=2, mode=mode) for k in range(d // 16)]
    k_steps = [kstep_offset(k, rows=BN, elem_bytes=2, mode=mode) for k in range(d // 16)]
    v_steps = [mnmajor_kstep_offset(k, mode=mode) for k in range(BN // 16)]
    rows_q, rows_k, lse_n, cu_n = (T.dynamic(n) for n in ("rows_q", "rows_k", "lse_n", "cu_n"))

    @T.inline
    def enter(max_q, batch):
        """One CTA of 1 + ``consumers`` warpgroups per (Q tile of ``max_q`` rows, head,
        sequence); the functions number the Q tiles from the last, longest causal first."""
        T.device_entry(
            launch=T.cuda.LaunchConfig(
                grid=(T.ceildiv(max_q, BM), heads_q, batch),
                block=threads,
                dynamic_smem_bytes=smem,
            ),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )

    @T.inline
    def enter_persistent(tiles):
        """One CTA per SM (at most one per tile), each walking tiles ``blockIdx.x``,
        ``+ sms``, ... of ``tiles``."""
        T.device_entry(
            launch=T.cuda.LaunchConfig(
                grid=T.min(tiles, sms), block=threads, dynamic_smem_bytes=smem
            ),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )

    @T.inline
    def walk_to(tc, tw, tile, n_mb, heads_batch, total_n, shift):
        """``tc[:4]`` = (Q tile, head, sequence, K/V blocks) of persistent ``tile``
        (``tc[4]``: the causal order's section size; ``tw``: the walk's scratch registers)."""
        ops = (T.if_then_else, T.truncdiv, T.truncmod, lambda slot, v: _keep(tw, slot, v))
        mb, h, b = tile_coords(tile, n_mb, heads_q, heads_batch, tc[4], causal, ops)
        tc[0] = mb
        tc[1] = h
        tc[2] = b
        tc[3] = kv_blocks(tc[0], total_n, shift)

    def kv_blocks(mb, total_n, shift):
        """K/V blocks Q tile ``mb`` reads (:func:`num_kv_blocks`)."""
        if causal:
            return T.min(total_n, (T.max(mb * BM + BM + shift, 0) + (BN - 1)) // BN)
        return total_n

    @T.inline
    def produce(Q, K, V, arena, qbar, kring, vring, mb, h, hk, q0, k0, n_blocks):
        """The producer thread's loads of one Q tile: Q, then the K/V blocks through the
        ring (K of block it, then V of block it - lag with ``split_kv``)."""
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(qbar.ptr_to([0]), T.uint32(q_bytes))
        _load_tile(arena, 0, BM, d, Q, qbar.ptr_to([0]), q0 + mb * BM, h * d, dtype)
        kv0 = k0
        if T.constexpr(split):
            # K of block it, then V of block it - lag (upstream's load: S of block it
            # needs K before P V of block it - 1 needs V)
            for it in T.serial(n_blocks + lag):
                if it < n_blocks:
                    kring.producer_acquire()
                    kring.producer_expect(k_bytes)
                    slot = q_bytes + kring.stage * stage_bytes
                    _load_tile(
                        arena,
                        slot,
                        BN,
                        d,
                        K,
                        kring.full_bar(),
                        kv0 + it * BN,
                        hk * d,
                        dtype,
                    )
                    kring.advance()
                if it >= lag:
                    vring.producer_acquire()
                    vring.producer_expect(v_bytes)
                    slot = q_bytes + vring.stage * stage_bytes + k_bytes
                    kv_row = kv0 + (it - lag) * BN
                    _load_tile(arena, slot, BN, dv, V, vring.full_bar(), kv_row, hk * dv, dtype)
                    vring.advance()
        else:
            for it in T.serial(n_blocks):
                kring.producer_acquire()
                kring.producer_expect(stage_bytes)
                slot = q_bytes + kring.stage * stage_bytes
                kv_row = kv0 + it * BN
                _load_tile(arena, slot, BN, d, K, kring.full_bar(), kv_row, hk * d, dtype)
                _load_tile(
                    arena,
                    slot + k_bytes,
                    BN,
                    dv,
                    V,
                    kring.full_bar(),
                    kv_row,
                    hk * dv,
                    dtype,
                )
                kring.advance()

    @T.inline
    def consume(st, mb, h, q0, lse0, n_blocks, q_phase):
        """A consumer warpgroup's part of Q tile ``mb`` of head ``h``: S, masks, online
        softmax and P V per K/V block, then the epilogue. ``st``: the warpgroup's buffers,
        barriers and the problem's scalars (:func:`attend`); ``q_phase``: the parity of
        this tile's Q load; ``st.qfree`` (persistent): arrived on once its S GEMMs are done."""
        row0 = mb * BM + (st.wg - 1) * 64  # this warpgroup's first query row
        row = row0 + 16 * (st.t // 32) + (st.t % 32) // 4  # this thread's query row, + 8 hh
        col = 2 * (st.t % 4)  # this thread's key column in the block, + 8 j + e
        base = dsl.smem_addr(st.arena)
        for i in T.unroll(dv // 2):
            st.o[i] = T.float32(0)
        for hh in T.unroll(2):
            st.m[hh] = T.float32(NINF)
            st.lsum[hh] = T.float32(0)
        T.cuda.mbarrier_wait(st.qbar.ptr_to([0]), q_phase)
        dq = dsl.descriptor(desc_q, base + T.uint32((st.wg - 1) * 64 * 128))
        kslot = (desc_k, base + T.uint32(q_bytes), stage_bytes)  # K of slot 0, slot bytes
        vslot = (desc_v, base + T.uint32(q_bytes + k_bytes), stage_bytes)
        if T.constexpr(not sched.overlap):
            # each GEMM waited for before the softmax
            for it in T.serial(n_blocks):
                _issue_s(st.s, dq, kslot, st.kring, q_steps, k_steps, BN, dtype)
                dsl.wgmma_wait(0)
                _done_k(st.kring, st.lane, split)
                _mask(st.s, it * BN, row, col, row0, BN, st.seqlen_k, st.shift, causal)
                _online_softmax(
                    st.s, st.m, st.lsum, st.corr, st.mx, st.msc, st.rs, BN, st.scale_log2
                )
                _rescale(st.o, st.corr, dv)
                _to_p(st.p, st.s, BN, dtype, p_tile, base, st.wg)
                _issue_pv(
                    st.o, st.p, vslot, st.vring, v_steps, dv, dtype, split, p_tile, base, st.wg
                )
                dsl.wgmma_wait(0)
                _done_v(st.kring, st.vring, st.lane, split)
            _q_done(st.qfree, st.lane)
        elif n_blocks > 0:
            # FA3's intra-warpgroup overlap: S of block it and P V of block it - 1 are in
            # flight together; the softmax of block it runs while P V finishes. With
            # ``pingpong`` the consumer warpgroups take turns issuing their GEMMs
            # (upstream's warp_scheduler_barrier_sync/arrive), so one's softmax runs under
            # another's GEMMs; the first warpgroup gets the first turn (upstream's
            # mma_init; persistent: once, before the first tile). All run the same
            # n_blocks, so the turns go round evenly, tile after tile.
            if T.constexpr(pingpong and st.qfree is None):
                if st.wg == 1:
                    T.ptx.bar.arrive(T.uint32(_SCHED_BAR + 1), T.uint32(256))
            _issue_s(st.s, dq, kslot, st.kring, q_steps, k_steps, BN, dtype)
            dsl.wgmma_wait(0)
            _done_k(st.kring, st.lane, split)
            _mask(st.s, 0, row, col, row0, BN, st.seqlen_k, st.shift, causal)
            _online_softmax(st.s, st.m, st.lsum, st.corr, st.mx, st.msc, st.rs, BN, st.scale_log2)
            _to_p(st.p, st.s, BN, dtype, p_tile, base, st.wg)  # O is still 0: nothing to rescale
            for it in T.serial(1, n_blocks):
                _sched_sync(st.wg, pingpong)
                _issue_s(st.s, dq, kslot, st.kring, q_steps, k_steps, BN, dtype)
                if T.constexpr(sched.early_rescale):  # block it - 1's correction, under S
                    _rescale(st.o, st.corr, dv)
                _issue_pv(
                    st.o, st.p, vslot, st.vring, v_steps, dv, dtype, split, p_tile, base, st.wg
                )
                _sched_arrive(st.wg, pingpong, consumers)
                dsl.wgmma_wait(1)  # S done (groups complete in order); P V may run on
                _done_k(st.kring, st.lane, split)
                _mask(st.s, it * BN, row, col, row0, BN, st.seqlen_k, st.shift, causal)
                _online_softmax(
                    st.s, st.m, st.lsum, st.corr, st.mx, st.msc, st.rs, BN, st.scale_log2
                )
                dsl.wgmma_wait(0)  # P V of block it - 1 done: its slot, P and O are free
                _done_v(st.kring, st.vring, st.lane, split)
                if T.constexpr(not sched.early_rescale):
                    _rescale(st.o, st.corr, dv)
                _to_p(st.p, st.s, BN, dtype, p_tile, base, st.wg)
            _q_done(st.qfree, st.lane)  # every S of the tile has completed
            if T.constexpr(sched.early_rescale):
                _rescale(st.o, st.corr, dv)
            _issue_pv(st.o, st.p, vslot, st.vring, v_steps, dv, dtype, split, p_tile, base, st.wg)
            dsl.wgmma_wait(0)
            _done_v(st.kring, st.vring, st.lane, split)
        if T.constexpr(sched.overlap and st.qfree is not None):
            if n_blocks == 0:
                _q_done(st.qfree, st.lane)
        # epilogue (hopper/softmax.h finalize, hopper/epilogue_fwd.hpp)
        for hh in T.unroll(2):
            st.rs[0] = T.cuda.warp_sum(st.lsum[hh], 4)
            if (st.rs[0] == T.float32(0)) | T.isnan(st.rs[0]):
                st.corr[hh] = T.float32(0)
                st.msc[0] = T.float32(NINF)
            else:
                st.corr[hh] = T.float32(1) / st.rs[0]
                st.msc[0] = st.m[hh] * st.scale + T.log(st.rs[0])
            if (st.t % 4 == 0) & (row + 8 * hh < st.seqlen_q):
                st.LSE[lse0 + row + 8 * hh] = st.msc[0]
        _rescale(st.o, st.corr, dv)
        dsl.store_acc(
            st.o,
            st.Out,
            q0 + mb * BM + (st.wg - 1) * 64,
            h * dv,
            dv,
            q0 + st.seqlen_q,
            heads_q * dv,
            True,
            False,
            st.packed,
        )

    @T.inline
    def attend(
        Q, K, V, Out, LSE, mb, h, q0, seqlen_q, k0, seqlen_k, lse0, scale, batch=None, sem=None
    ):
        """Q tile ``mb`` of head ``h`` of one sequence: its Q rows start at row ``q0`` of Q
        and Out, its keys at row ``k0`` of K and V, its LSE row at ``LSE[lse0]``. With
        ``persistent`` the tile arguments are None and the CTA walks its share of the
        ``batch`` sequences' tiles (:func:`tile_coords`); ``sem``: the tile counter of the
        dynamic (causal) walk, 0 at launch."""
        scale_log2 = scale * T.float32(LOG2E)
        total_n = (seqlen_k + (BN - 1)) // BN
        shift = seqlen_k - seqlen_q  # bottom-right causal alignment
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        if T.constexpr(not persistent):
            hk = h // group
        arena = T.alloc_shared((smem // 2,), dtype, scope="shared.dyn", align=1024)
        qbar = T.alloc_shared((1,), "uint64", align=8)
        # persistent: Q's slot is free again once every consumer warp's last S of a tile
        # has completed (one elected lane per consumer warp arrives)
        qfree = _q_barrier(persistent)
        # K ring; with split_kv a V ring over the same slots (upstream's pipeline_k and
        # pipeline_v), else one barrier per slot for K and V together and ``vring`` is only
        # the consumer's V read counter
        kring = dsl.Ring(nstages)
        vring = dsl.Ring(nstages)
        if tid == 0:
            kring.init(4 * consumers)  # one elected lane per consumer warp
            if T.constexpr(split):
                vring.init(4 * consumers)
            T.ptx.mbarrier.init.shared.b64(qbar.ptr_to([0]), T.uint32(1))
            if T.constexpr(persistent):
                T.ptx.mbarrier.init.shared.b64(qfree.ptr_to([0]), T.uint32(4 * consumers))
            kring.fence_init()
        T.cuda.cta_sync()
        kring.reset()
        vring.reset()
        if T.constexpr(persistent):
            n_mb = T.ceildiv(seqlen_q, BM)
            heads_batch = heads_q * batch
            first_tile = T.cuda.block_idx("x")
            # the tile's (Q tile, head, sequence, K/V blocks) and the section size in
            # registers: as expressions they reach every use and stall the compiler's passes
            tc = T.alloc_local((5,), "int32")
            tw = T.alloc_local((5,), "int32")
            # dynamic walk: the tile the producer took, named to the consumers in shared
            # memory with its Q (n_mb * heads_batch: no tile left)
            slot = _tile_slot(dynamic)
            walk = T.alloc_local((2,), "int32")  # (this tile, tiles walked so far)
            if T.constexpr(causal):
                tc[4] = section_heads(seqlen_k, d, dv, group, _floor_pow2)
        else:
            n_blocks = kv_blocks(mb, total_n, shift)
        if wg == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(sched.regs)
            if tid == 0:
                if T.constexpr(persistent):
                    walk[0] = first_tile
                    walk[1] = 0
                    while walk[0] < n_mb * heads_batch:
                        walk_to(tc, tw, walk[0], n_mb, heads_batch, total_n, shift)
                        _q_free_wait(qfree, walk[1])
                        if T.constexpr(dynamic):
                            slot[0] = walk[0]
                        produce(
                            Q,
                            K,
                            V,
                            arena,
                            qbar,
                            kring,
                            vring,
                            tc[0],
                            tc[1],
                            tc[1] // group,
                            tc[2] * seqlen_q,
                            tc[2] * seqlen_k,
                            tc[3],
                        )
                        if T.constexpr(dynamic):  # the grid's first tiles were taken at launch
                            grid = T.min(n_mb * heads_batch, sms)
                            walk[0] = T.cuda.atomic_add(sem.ptr_to([0]), 1) + grid
                        else:
                            walk[0] = walk[0] + sms
                        walk[1] = walk[1] + 1
                    if T.constexpr(dynamic):
                        _q_free_wait(qfree, walk[1])
                        slot[0] = n_mb * heads_batch  # no tile left: the consumers stop
                        T.ptx.mbarrier.arrive.shared.b64(qbar.ptr_to([0]), T.uint32(1))
                else:
                    produce(Q, K, V, arena, qbar, kring, vring, mb, h, hk, q0, k0, n_blocks)
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(consumer_regs)
            s = T.alloc_local((BN // 2,), "float32")
            o = T.alloc_local((dv // 2,), "float32")
            p = T.alloc_local((4 if p_tile else BN // 4,), "uint32")  # stmatrix scratch or P
            m = T.alloc_local((2,), "float32")
            lsum = T.alloc_local((2,), "float32")
            corr = T.alloc_local((2,), "float32")
            mx = T.alloc_local((1,), "float32")
            msc = T.alloc_local((1,), "float32")
            rs = T.alloc_local((1,), "float32")
            packed = T.local_scalar("uint32")
            t = tid - 128 * wg
            lane = tid % 32
            st = types.SimpleNamespace(
                Out=Out,
                LSE=LSE,
                arena=arena,
                qbar=qbar,
                qfree=qfree,
                kring=kring,
                vring=vring,
                s=s,
                o=o,
                p=p,
                m=m,
                lsum=lsum,
                corr=corr,
                mx=mx,
                msc=msc,
                rs=rs,
                packed=packed,
                wg=wg,
                t=t,
                lane=lane,
                seqlen_q=seqlen_q,
                seqlen_k=seqlen_k,
                shift=shift,
                scale=scale,
                scale_log2=scale_log2,
            )
            if T.constexpr(persistent):
                if T.constexpr(pingpong):  # the first turn is warpgroup 1's (mma_init)
                    if wg == 1:
                        T.ptx.bar.arrive(T.uint32(_SCHED_BAR + 1), T.uint32(256))
                walk[0] = first_tile
                walk[1] = 0
                while walk[1] >= 0:
                    if T.constexpr(dynamic):  # the producer's next tile comes with its Q
                        T.cuda.mbarrier_wait(qbar.ptr_to([0]), T.truncmod(walk[1], 2))
                        walk[0] = slot[0]
                    if walk[0] >= n_mb * heads_batch:
                        break
                    walk_to(tc, tw, walk[0], n_mb, heads_batch, total_n, shift)
                    consume(
                        st,
                        tc[0],
                        tc[1],
                        tc[2] * seqlen_q,
                        (tc[2] * heads_q + tc[1]) * seqlen_q,
                        tc[3],
                        T.truncmod(walk[1], 2),
                    )
                    walk[1] = walk[1] + 1
                    if T.constexpr(not dynamic):
                        walk[0] = walk[0] + sms
            else:
                consume(st, mb, h, q0, lse0, n_blocks, 0)

    if varlen:

        @T.function
        def flash_fwd_varlen(
            Q: T.Tensor((rows_q, heads_q * d), dtype, align=16),
            K: T.Tensor((rows_k, heads_kv * d), dtype, align=16),
            V: T.Tensor((rows_k, heads_kv * dv), dtype, align=16),
            Out: T.Tensor((rows_q, heads_q * dv), dtype, align=16),
            LSE: T.Tensor((lse_n,), "float32", align=16),
            CuQ: T.Tensor((cu_n,), "int32", align=4),
            CuK: T.Tensor((cu_n,), "int32", align=4),
            max_seqlen_q: T.int32,
            scale: T.float32,
        ):
            enter(max_seqlen_q, cu_n - 1)
            mb = T.ceildiv(max_seqlen_q, BM) - 1 - T.cuda.block_idx("x")
            h = T.cuda.block_idx("y")
            b = T.cuda.block_idx("z")
            q0 = CuQ[b]
            seqlen_q = CuQ[b + 1] - q0
            k0 = CuK[b]
            seqlen_k = CuK[b + 1] - k0
            if mb * BM < seqlen_q:
                lse0 = h * rows_q + q0
                attend(Q, K, V, Out, LSE, mb, h, q0, seqlen_q, k0, seqlen_k, lse0, scale)

        return flash_fwd_varlen

    if dynamic:

        @T.function
        def flash_fwd_dynamic(
            Q: T.Tensor((rows_q, heads_q * d), dtype, align=16),
            K: T.Tensor((rows_k, heads_kv * d), dtype, align=16),
            V: T.Tensor((rows_k, heads_kv * dv), dtype, align=16),
            Out: T.Tensor((rows_q, heads_q * dv), dtype, align=16),
            LSE: T.Tensor((lse_n,), "float32", align=16),
            Sem: T.Tensor((1,), "int32", align=4),
            batch: T.int32,
            seqlen_q: T.int32,
            seqlen_k: T.int32,
            scale: T.float32,
        ):
            enter_persistent(T.ceildiv(seqlen_q, BM) * heads_q * batch)
            attend(
                Q,
                K,
                V,
                Out,
                LSE,
                None,
                None,
                None,
                seqlen_q,
                None,
                seqlen_k,
                None,
                scale,
                batch,
                Sem,
            )

        return flash_fwd_dynamic

    @T.function
    def flash_fwd(
        Q: T.Tensor((rows_q, heads_q * d), dtype, align=16),
        K: T.Tensor((rows_k, heads_kv * d), dtype, align=16),
        V: T.Tensor((rows_k, heads_kv * dv), dtype, align=16),
        Out: T.Tensor((rows_q, heads_q * dv), dtype, align=16),
        LSE: T.Tensor((lse_n,), "float32", align=16),
        batch: T.int32,
        seqlen_q: T.int32,
        seqlen_k: T.int32,
        scale: T.float32,
    ):
        if T.constexpr(persistent):
            enter_persistent(T.ceildiv(seqlen_q, BM) * heads_q * batch)
            attend(
                Q, K, V, Out, LSE, None, None, None, seqlen_q, None, seqlen_k, None, scale, batch
            )
        else:
            enter(seqlen_q, batch)
            mb = T.ceildiv(seqlen_q, BM) - 1 - T.cuda.block_idx("x")
            h = T.cuda.block_idx("y")
            b = T.cuda.block_idx("z")
            lse0 = (b * heads_q + h) * seqlen_q
            q0, k0 = b * seqlen_q, b * seqlen_k
            attend(Q, K, V, Out, LSE, mb, h, q0, seqlen_q, k0, seqlen_k, lse0, scale)

    return flash_fwd


@T.inline
def _mask(s, kv0, row, col, row0, bn, seqlen_k, shift, causal):
    """-inf on keys past seqlen_k and, if ``causal``, keys after ``row + shift``
    (``hopper/mask.h``); skipped for a block no row of the warpgroup needs masked."""
    tail = kv0 + bn > seqlen_k
    if T.constexpr(causal):
        tail = tail | (kv0 + bn - 1 > row0 + shift)
    if tail:
        for j in T.unroll(bn // 8):
            for hh in T.unroll(2):
                for e in T.unroll(2):
                    if T.constexpr(causal):
                        if (kv0 + 8 * j + col + e >= seqlen_k) | (
                            kv0 + 8 * j + col + e > row + 8 * hh + shift
                        ):
                            s[4 * j + 2 * hh + e] = T.float32(NINF)
                    else:
                        if kv0 + 8 * j + col + e >= seqlen_k:
                            s[4 * j + 2 * hh + e] = T.float32(NINF)


@T.inline
def _online_softmax(s, m, lsum, corr, mx, msc, rs, bn, scale_log2):
    """One block of the online softmax (``hopper/softmax.h``), exponents in base 2: new row
    max (quad shuffles), ``corr`` = exp2 of the max change, s = P (f32), lsum updated.
    A row whose max is still -inf uses 0 as its base, so it stays all zeros, never NaN."""
    for hh in T.unroll(2):
        mx[0] = m[hh]
        for j in T.unroll(bn // 8):
            for e in T.unroll(2):
                mx[0] = T.max(mx[0], s[4 * j + 2 * hh + e])
        mx[0] = T.cuda.warp_max(mx[0], 4)
        msc[0] = T.if_then_else(mx[0] == T.float32(NINF), T.float32(0), mx[0] * scale_log2)
        corr[hh] = T.exp2(m[hh] * scale_log2 - msc[0])
        m[hh] = mx[0]
        rs[0] = T.float32(0)
        for j in T.unroll(bn // 8):
            for e in T.unroll(2):
                s[4 * j + 2 * hh + e] = T.exp2(s[4 * j + 2 * hh + e] * scale_log2 - msc[0])
                rs[0] = rs[0] + s[4 * j + 2 * hh + e]
        lsum[hh] = lsum[hh] * corr[hh] + rs[0]


@T.inline
def _rescale(o, corr, dv):
    """O rows times ``corr`` (2 rows per thread)."""
    for j in T.unroll(dv // 8):
        for hh in T.unroll(2):
            for e in T.unroll(2):
                o[4 * j + 2 * hh + e] = o[4 * j + 2 * hh + e] * corr[hh]


@dataclasses.dataclass(frozen=True)
class _PTile:
    """Where consumer warpgroup wg keeps P with ``pv_smem``: a 64 x kBlockN K-major tile
    (128B swizzle, 64 columns per 8 KiB block) at ``offset + (wg - 1) * nbytes`` of the
    arena; ``desc``/``steps``: its wgmma descriptor base and k16 offsets."""

    offset: int
    nbytes: int
    desc: int
    steps: tuple

    def addr(self, base, wg):
        return base + T.cast(self.offset + (wg - 1) * self.nbytes, "uint32")


@T.inline
def _to_p(p, s, bn, dtype, p_tile, base, wg):
    """P to 16 bits. In registers (``p_tile`` None): S registers 8 kk .. 8 kk + 7 are the A
    fragment of P V's k-step kk. Else into the warpgroup's shared P tile (``stmatrix``; ``p``
    its scratch), visible to the async proxy once the warpgroup's 128 threads have written."""
    if T.constexpr(p_tile is None):
        cvt = getattr(T.ptx.cvt.rn, _CVT[dtype]).f32
        for kk in T.unroll(bn // 16):
            for r in T.unroll(4):
                cvt(p[4 * kk + r], s[8 * kk + 2 * r + 1], s[8 * kk + 2 * r])
    else:
        for chunk in T.unroll(bn // 64):
            dsl.stmatrix_acc_chunk(
                s, p_tile.addr(base, wg) + T.uint32(chunk * 8192), chunk, p, dtype
            )
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(T.cast(_P_BAR + wg, "uint32"), T.uint32(128))


def _load_tile(arena, offset, rows, cols, src, bar, row, col, dtype):
    """TMA-load ``src[row : row + rows, col : col + cols]`` into the K-major tile format at
    ``arena + offset``: one ``[rows, 64]`` 128B-swizzled view and box per 64-column block,
    block j at ``offset + j * rows * 128`` (Python-unrolled)."""
    mode = Swizzle.B128
    for j in range(cols // 64):
        view = dsl.smem_view(arena, offset + j * rows * 128, (rows, 64), dtype, mode)
        dsl.tma_load_tile(view, src, bar, (row, col + 64 * j), mode)


@T.inline
def _issue_s(s, dq, kslot, kring, q_steps, k_steps, bn, dtype):
    """Wait for the next K tile and issue S = Q K^T on it (one commit group)."""
    kring.consumer_wait()
    dk = _slot_descriptor(kslot, kring.stage)
    dsl.wgmma_fence()
    dsl.mma_ksteps(s, dq, dk, q_steps, k_steps, T.bool(False), bn, dtype)
    dsl.wgmma_commit()


@T.inline
def _sched_sync(wg, pingpong):
    """Wait for this warpgroup's turn to issue GEMMs (named barrier 3 + wg: its 128 threads
    and the 128 of the warpgroup before it)."""
    if T.constexpr(pingpong):
        T.ptx.bar.sync(T.cast(_SCHED_BAR + wg, "uint32"), T.uint32(256))


@T.inline
def _sched_arrive(wg, pingpong, consumers):
    """Give the next consumer warpgroup its turn (upstream's order: 1 -> 2 [-> 3] -> 1)."""
    if T.constexpr(pingpong):
        if T.constexpr(consumers == 2):
            T.ptx.bar.arrive(T.cast(_SCHED_BAR + 3 - wg, "uint32"), T.uint32(256))
        else:
            T.ptx.bar.arrive(T.cast(_SCHED_BAR + 1 + wg % consumers, "uint32"), T.uint32(256))


@T.inline
def _done_k(kring, lane, split):
    """S has read its K tile: with ``split``, free the slot's K half (upstream releases K
    right after S); else the slot is freed with V (:func:`_done_v`)."""
    if T.constexpr(split):
        if lane == 0:
            kring.consumer_release(kring.stage)
    kring.advance()


@T.inline
def _issue_pv(o, p, vslot, vring, v_steps, dv, dtype, split, p_tile, base, wg):
    """Wait for the next V tile (``split``; else it came with K) and issue O += P V on it:
    one ``wgmma`` per k16 step (one commit group), RS from ``p`` or, with a ``p_tile``, SS
    from the warpgroup's shared P tile."""
    if T.constexpr(split):
        vring.consumer_wait()
    dvd = _slot_descriptor(vslot, vring.stage)
    dsl.wgmma_fence()
    if T.constexpr(p_tile is None):
        _pv_ksteps(o, p, dvd, v_steps, dv, dtype)
    else:
        dp = dsl.descriptor(p_tile.desc, p_tile.addr(base, wg))
        dsl.mma_ksteps(o, dp, dvd, p_tile.steps, v_steps, T.bool(True), dv, dtype, 0, 1)
    dsl.wgmma_commit()


@T.inline
def _done_v(kring, vring, lane, split):
    """P V has read its V tile: free it (with ``split`` the V ring's slot, else the K/V slot)."""
    if lane == 0:
        if T.constexpr(split):
            vring.consumer_release(vring.stage)
        else:
            kring.consumer_release(vring.stage)
    vring.advance()


def _floor_pow2(n):
    """:func:`floor_pow2` of an int32 expression: ``1 << (31 - clz(max(n, 1)))``."""
    return T.shift_left(1, 31 - T.clz(T.max(n, 1)))


def _keep(regs, slot, value):
    """``regs[slot] = value``, then the register (``tile_coords``' ``keep``)."""
    _store(regs, slot, value)
    return regs[slot]


@T.inline
def _store(regs, slot, value):
    regs[slot] = value


def _tile_slot(dynamic):
    """Shared int32 through which the dynamic walk's producer names each tile; None otherwise."""
    return T.bind_(T.alloc_shared((1,), "int32", align=4)) if dynamic else None


@T.inline
def _q_free_wait(qfree, done):
    """Persistent producer, before loading the Q of its tile number ``done``: wait until the
    consumers' S GEMMs of the tile before are done with the Q slot."""
    if done > 0:
        T.cuda.mbarrier_wait(qfree.ptr_to([0]), T.truncmod(done - 1, 2))


def _q_barrier(persistent):
    """The persistent kernel's "Q slot free" mbarrier in shared memory; None otherwise."""
    return T.bind_(T.alloc_shared((1,), "uint64", align=8)) if persistent else None


@T.inline
def _q_done(qfree, lane):
    """Persistent kernel (``qfree`` not None): this warp's S GEMMs of the tile have
    completed, so the producer may load the next tile's Q over this one."""
    if T.constexpr(qfree is not None):
        if lane == 0:
            T.ptx.mbarrier.arrive.shared.b64(qfree.ptr_to([0]), T.uint32(1))


def _slot_descriptor(slot, stage):
    """Descriptor of a ring tile: ``slot`` = (descriptor base, address of slot 0, slot bytes)."""
    desc, addr0, nbytes = slot
    return dsl.descriptor(desc, addr0 + T.cast(stage * nbytes, "uint32"))


def _pv_ksteps(o, p, dvd, v_steps, dv, dtype):
    """O += P V over one K/V block: one ``wgmma`` RS per k16 step (Python-unrolled)."""
    for kk, off in enumerate(v_steps):
        dsl.mma_rs(o, p, 4 * kk, dvd + T.uint64(off >> 4), T.bool(True), dv, dtype, 1)
