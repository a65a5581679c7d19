# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The dense GEMM kernel for sm_90a: ``C[M, N] = A[M, K] @ B[N, K]^T`` in bf16 or fp16.

Numerics: A, B, C share the dtype (bf16 or fp16); products are accumulated in fp32 by the
tensor cores (wgmma) over the whole K, then rounded once to the output dtype (round to
nearest even), as cuBLAS does with fp32 compute. The K order within a tile is fixed, so
results are deterministic run to run.

Layouts (``layout``, one kernel each): the first letter is A's, the second B's, as the
storage of ``C = op(A) @ op(B)`` in row-major terms. "NT" (the default): A ``[M, K]``, B
``[N, K]`` (``a @ b.T``, both K-major); "NN": A ``[M, K]``, B ``[K, N]`` (``a @ w``); "TN": A
``[K, M]``, B ``[K, N]``; "TT": A ``[K, M]``, B ``[N, K]``. An MN-major operand (A ``[K, M]``,
B ``[K, N]``) is TMA-loaded as a ``[64, mn]`` tile of the same 128B-swizzled format turned on
its side (64-column boxes along M or N) and read by wgmma with its transpose bit
(``imm-trans-a``/``imm-trans-b``; descriptor: ``wgmma.mnmajor_descriptor_base``). C is
row-major ``[M, N]``; every tensor contiguous and 16-byte aligned (torch allocations are).

Domain: N, K static, M a run-time symbol (``T.dynamic``): one compiled kernel per
(N, K, dtype, tile config) serves every M >= 1. The host wrapper builds the TMA descriptors
of A and C from the M of the tensors passed, and the grid (``min(tiles, SMs)``) and the tile
count from M at launch. TMA needs 16-byte row strides: N % 8 == 0 (C, and B ``[K, N]``),
K % 8 == 0 unless both operands are MN-major ("TN"), and M % 8 == 0 when A is ``[K, M]``
(checked at call time by the op); M*K, N*K, M*N < 2^31 (int32 indexing); other shapes raise
ValueError. M, N, K need not be multiples of the tile: TMA zero-fills out-of-bounds loads
and clips stores at M and N.

Schedule (warp-specialized, persistent; building blocks in ``tirx_kernels.core.sm90``):
384 threads = 3 warpgroups. Warpgroup 0 is the producer (``setmaxnreg`` down to 40): one
thread issues the TMA loads of each K-block (A bm x 64 in row boxes, B bn x 64, 128B
swizzle) into a ``stages``-deep full/empty mbarrier ring; A boxes wholly past M are not
issued (the K-block's expected bytes count only the boxes issued), so a skinny M loads only
the rows it has. Warpgroups 1 and 2 are consumers (``setmaxnreg`` up to 232): at bm=128
each computes 64 rows x bn of the tile, at bm=64 each 64 rows x bn/2 (``_gemm_schedule``),
with ``wgmma m64nWk16`` (4 per K-block) into W/2 fp32 registers, keeps one wgmma group in
flight and frees a ring slot as soon as the wgmma reading it completes. Shared rows of A
that no box loaded hold stale data: they only reach output rows >= M, which are never
stored. Epilogue: per 64-column chunk, the accumulators are converted and written with
``stmatrix`` into one of two 128B-swizzled 64x64 staging tiles per warpgroup, and one thread
issues an asynchronous TMA store (clipped at M and N), so the consumers start the next
tile's wgmmas while the stores drain. CTAs (one per SM) walk the tiles in grouped order
(``group_m`` M-tiles per group) for L2 reuse.
Split-K (``config.split`` = S > 1, for shapes with fewer tiles than SMs): the CTAs walk
(split, tile) units, each over an even S-th of the K-blocks; a unit writes its fp32 partial
tile to the workspace ``WS`` and counts itself on the tile's lock in ``LOCK``; the last of
the S sums the partials in split order (deterministic), resets the lock to zero and stores
the tile (``_split_reduce``). The kernel then takes ``(A, B, C, WS, LOCK)``: WS holds
>= S * tiles * bm * bn floats, LOCK >= tiles int32 zeros (``gemm.split_scratch``).
Variants (``make_gemm`` keywords, benchmarked in development): ``epilogue="direct"``
(32-bit stores from registers), ``cluster_m=2`` (B multicast across a CTA pair),
``inflight``, ``stages``, ``group_m``, ``a_box``.
"""

from __future__ import annotations

import functools

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.wgmma import (
    kmajor_descriptor_base,
    kstep_offset,
    mnmajor_descriptor_base,
    mnmajor_kstep_offset,
)
from tirx_kernels.core.toolchain import T

from ._gemm_schedule import BK, EPI_BYTES, TileConfig, pick_stages
from ._gemm_schedule import num_sms as default_num_sms

DTYPES = ("bfloat16", "float16")
LAYOUTS = ("NT", "NN", "TN", "TT")  # (A, B): N = [M, K] / [K, N] storage, T = transposed
DEFAULT_CONFIG = TileConfig(128, 128)
OPS = ("", "scale", "scale_bias")
_PRODUCER_REGS, _CONSUMER_REGS = 40, 232  # 128*40 + 256*232 <= 64K registers per SM
# rows of one A box at bm=64: boxes past M are skipped (decode M loads 16 rows, not 64)
_SMALL_A_BOX = 16
_MN_BOX = 64  # columns of one MN-major box: one 128B swizzle atom of 16-bit elements


def check_domain(N, K, dtype, M=1, layout="NT"):
    """ValueError for a shape, dtype or layout the kernel does not take (M: any int >= 1,
    a multiple of 8 when A is ``[K, M]``; None skips the M checks)."""
    if dtype not in DTYPES:
        raise ValueError(f"fp16_bf16_gemm: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"fp16_bf16_gemm: layout must be one of {LAYOUTS}, got {layout!r}")
    if M is None:
        M = 8
    elif layout[0] == "T" and isinstance(M, int) and M % 8:
        raise ValueError(f"fp16_bf16_gemm: M={M} must be a multiple of 8 when A is [K, M]")
    for name, v in (("M", M), ("N", N), ("K", K)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"fp16_bf16_gemm: {name} must be a positive int, got {v!r}")
    if K % 8 and layout != "TN":
        raise ValueError(f"fp16_bf16_gemm: K={K} must be a multiple of 8 (TMA 16-byte rows)")
    if N % 8:
        raise ValueError(f"fp16_bf16_gemm: N={N} must be a multiple of 8")
    if max(M * K, N * K, M * N) >= 2**31:
        raise ValueError("fp16_bf16_gemm: M*K, N*K and M*N must be < 2^31 (int32 indexing)")


def _check_variant(config, stages, inflight, cluster_m, epilogue, a_box, ktiles, layout):
    if TileConfig(config.bm, config.bn) not in _VALID_CONFIGS:
        raise ValueError(
            f"fp16_bf16_gemm: config must be bm in (64, 128) with a wgmma width of 64..256 "
            f"in steps of 64, got {config}"
        )
    if epilogue not in ("tma", "direct"):
        raise ValueError(f"fp16_bf16_gemm: epilogue must be 'tma' or 'direct', got {epilogue!r}")
    if not 0 <= inflight < stages or cluster_m not in (1, 2):
        raise ValueError("fp16_bf16_gemm: need 0 <= inflight < stages and cluster_m in (1, 2)")
    if not 1 <= config.split <= ktiles or (config.split > 1 and cluster_m > 1):
        raise ValueError(
            f"fp16_bf16_gemm: split={config.split} must be in 1..{ktiles} (K-blocks), "
            "and split-K runs without clusters"
        )
    if config.split > 1 and inflight > ktiles // config.split:
        raise ValueError("fp16_bf16_gemm: split-K needs inflight <= K-blocks per split")
    if a_box % 8 or config.bm % a_box:
        raise ValueError(f"fp16_bf16_gemm: a_box={a_box} must be a multiple of 8 dividing bm")
    # an MN-major box is whole 64-column (128-byte) swizzle atoms along M or N
    if layout[0] == "T" and a_box % _MN_BOX:
        raise ValueError(f"fp16_bf16_gemm: a_box={a_box} must be a multiple of 64 for A [K, M]")
    if layout[1] == "N" and cluster_m > 1 and (config.bn // cluster_m) % _MN_BOX:
        raise ValueError("fp16_bf16_gemm: cluster_m=2 with B [K, N] needs bn / 2 % 64 == 0")


_VALID_CONFIGS = {TileConfig(128, n) for n in (64, 128, 192, 256)} | {
    TileConfig(64, n) for n in (128, 256)
}


@functools.cache
def make_gemm(
    N,
    K,
    dtype="bfloat16",
    config=DEFAULT_CONFIG,
    stages=None,
    group_m=8,
    num_sms=None,
    inflight=1,
    cluster_m=1,
    epilogue="tma",
    a_box=None,
    ops="",
    layout="NT",
):
    """The PrimFunc for one (N, K, dtype, tile config, layout); M is a run-time symbol.

    ``config``: the :class:`TileConfig` (``_gemm_schedule.pick_config`` picks it per M);
    ``stages``/``num_sms`` default from ``_gemm_schedule`` and the device.
    ``inflight``: wgmma K-block groups left in flight when a consumer frees a ring slot (it
    frees the slot of K-block ``kt - inflight``; 0 waits for each K-block's wgmmas).
    ``cluster_m=2``: CTA pairs along M share each B tile: each loads half of it and
    multicasts it to both (halves the B traffic from L2).
    ``epilogue``: "tma" stages each 64-column chunk in shared memory (stmatrix) and stores it
    with an asynchronous TMA store; "direct" stores column pairs from registers.
    ``a_box``: rows of one A TMA box (default: the whole tile at bm=128, 16 at bm=64).
    ``ops``: "" stores ``A @ B^T``; "scale" stores ``alpha * A @ B^T + beta * C`` and
    "scale_bias" adds ``bias[col]`` too (fp32 math before the one rounding; C is read only
    when beta != 0). Those kernels take ``(A, B, C, WS, LOCK, BIAS, alpha, beta)`` whatever
    the split (unused tensors may be any small placeholder).
    ``layout``: one of :data:`LAYOUTS` (module docstring); A and B are passed as stored.
    """
    check_domain(N, K, dtype, None, layout)
    config = TileConfig(*config)
    BM, BN, WN, split = config.bm, config.bn, config.wgmma_n, config.split
    num_sms = num_sms or default_num_sms()
    a_mn, b_mn = layout[0] == "T", layout[1] == "N"  # MN-major operands
    a_box = a_box or (_MN_BOX if a_mn else BM if BM == 128 else _SMALL_A_BOX)
    tdt = dtype
    a_bytes, b_bytes = BM * BK * 2, BN * BK * 2
    # TMA epilogue: 2 consumer warpgroups x 2 staging buffers of 64 x 64 (8 KiB)
    staging = 4 * EPI_BYTES if epilogue == "tma" else 0
    stages = stages or pick_stages(BM, BN, staging)
    _check_variant(config, stages, inflight, cluster_m, epilogue, a_box, -(-K // BK), layout)
    if ops not in OPS:
        raise ValueError(f"fp16_bf16_gemm: ops must be one of {OPS}, got {ops!r}")
    has_ops, with_bias = ops != "", ops == "scale_bias"
    ring_bytes = stages * (a_bytes + b_bytes)
    smem = ring_bytes + staging
    chunks = WN // 64
    n_boxes = BM // a_box
    box_bytes = a_box * BK * 2
    M = T.dynamic("M")
    num_m = T.ceildiv(M, BM)
    num_n = -(-N // BN)
    num_cm = T.ceildiv(num_m, cluster_m)  # cluster rows of tiles
    total = num_cm * num_n
    units = total * split  # (split, tile) work units, split-major: a tile's splits run together
    ctas = T.min(units, num_sms // cluster_m)  # persistent clusters: grid = ctas * cluster_m
    ktiles = -(-K // BK)
    mode = Swizzle.B128
    # an MN-major stage tile is [BK, bm or bn]: 64-column blocks of BK * 128 bytes, so the
    # per-warpgroup byte offsets below hold for both majors
    desc_a, a_steps = _operand(a_mn, BM, mode)
    desc_b, b_steps = _operand(b_mn, BN, mode)
    a_view = (BK, a_box) if a_mn else (a_box, BK)  # one A box in shared memory
    a_shape, b_shape = ((K, M) if a_mn else (M, K)), ((K, N) if b_mn else (N, K))
    check_cols = N % BN != 0
    group = max(1, group_m // cluster_m)
    half = BN // cluster_m  # B rows each CTA of a cluster loads
    # per consumer warpgroup: byte offset of its A rows and B rows in a stage, and its
    # output tile's offset in the CTA tile (split by rows at bm=128, by columns at bm=64)
    a_wg_bytes = 64 * BK * 2 if BM == 128 else 0
    b_wg_bytes = 0 if BM == 128 else WN * BK * 2
    wg_row, wg_col = (64, 0) if BM == 128 else (0, WN)

    def _load_a(arena, A, ring, stage_bytes, row, col):
        """The A boxes of one K-block (Python-unrolled): the first always, the others only
        when they hold a row < M (``boxes`` of them; the tx count expects exactly those)."""
        for j in range(n_boxes):
            sa = dsl.smem_view(arena, stage_bytes + j * box_bytes, a_view, tdt, mode)
            r, c = (col, row + j * a_box) if a_mn else (row + j * a_box, col)
            if j == 0:
                dsl.tma_load_tile(sa, A, ring.full_bar(), (r, c), mode)
            else:
                _guarded_load(sa, A, ring.full_bar(), r, c, row + j * a_box < M)

    def _load_b(arena, B, ring, offset, rows, row, col, cta_mask):
        """B rows [row, row + rows) of the tile (N), K-block at ``col``: one tile load."""
        sb = dsl.smem_view(arena, offset, (BK, rows) if b_mn else (rows, BK), tdt, mode)
        at = (col, row) if b_mn else (row, col)
        dsl.tma_load_tile(sb, B, ring.full_bar(), at, mode, cta_mask=cta_mask)

    @T.inline
    def store_tile(C, acc, arena, base, tm, tn, wg, packed, packed4, BIAS, alpha, beta):
        row0 = tm * BM + (wg - 1) * wg_row
        col0 = tn * BN + (wg - 1) * wg_col
        if T.constexpr(has_ops):
            _apply_ops(acc, C, BIAS, alpha, beta, row0, col0, WN, M, N, with_bias)
        if T.constexpr(epilogue == "tma"):
            dsl.store_acc_tma(
                acc,
                C,
                arena,
                base,
                ring_bytes + (wg - 1) * 2 * EPI_BYTES,
                [(j, row0, col0 + 64 * j) for j in range(chunks)],
                wg,
                packed4,
                tdt,
            )
        else:
            dsl.store_acc(acc, C, row0, col0, WN, M, N, True, check_cols, packed)

    @T.inline
    def body(A, B, C, WS, LOCK, BIAS, alpha, beta):
        dsl.persistent_entry(ctas, cluster_m, smem)
        tid = T.cuda.thread_idx("x")
        wg = tid // 128
        rank = T.cuda.block_idx("x") % cluster_m
        first = T.cuda.block_idx("x") // cluster_m
        arena = T.alloc_shared((smem // 2,), tdt, scope="shared.dyn", align=1024)
        ring = dsl.Ring(stages)
        ring.setup(tid, cluster_m)
        if wg == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(_PRODUCER_REGS)
            if tid == 0:
                for u in T.serial(first, units, step=ctas):
                    cm, tn = dsl.grouped_tile(_tile_of(u, total, split), num_cm, num_n, group)
                    tm = cm * cluster_m + rank
                    k0, k1 = _k_range(_split_of(u, total, split), ktiles, split)
                    # A boxes holding a row < M (at least one: rows of a cluster's spare
                    # tile past M are zero-filled)
                    boxes = T.max(T.min(T.ceildiv(M - tm * BM, a_box), n_boxes), 1)
                    for kt in T.serial(k0, k1):
                        ring.producer_acquire()
                        ring.producer_expect(T.cast(boxes * box_bytes + b_bytes, "uint32"))
                        _load_a(arena, A, ring, ring.stage * a_bytes, tm * BM, kt * BK)
                        if T.constexpr(cluster_m == 1):
                            _load_b(
                                arena,
                                B,
                                ring,
                                stages * a_bytes + ring.stage * b_bytes,
                                BN,
                                tn * BN,
                                kt * BK,
                                None,
                            )
                        else:
                            _load_b(
                                arena,
                                B,
                                ring,
                                stages * a_bytes + ring.stage * b_bytes + rank * half * BK * 2,
                                half,
                                tn * BN + rank * half,
                                kt * BK,
                                (1 << cluster_m) - 1,
                            )
                        ring.advance()
                if T.constexpr(cluster_m > 1):
                    ring.producer_tail()
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(_CONSUMER_REGS)
            acc = T.alloc_local((WN // 2,), "float32")
            if T.constexpr(split > 1):
                last = T.alloc_shared((1,), "int32")  # this unit is the tile's last split
                tmp = T.local_scalar("float32")
            packed = T.local_scalar("uint32")
            packed4 = T.alloc_local((4,), "uint32")
            lane = tid % 32
            base = dsl.smem_addr(arena)
            a_wg = T.cast((wg - 1) * a_wg_bytes, "uint32")
            b_wg = T.cast((wg - 1) * b_wg_bytes, "uint32")
            for u in T.serial(first, units, step=ctas):
                t, part = _tile_of(u, total, split), _split_of(u, total, split)
                cm, tn = dsl.grouped_tile(t, num_cm, num_n, group)
                tm = cm * cluster_m + rank
                k0, k1 = _k_range(part, ktiles, split)
                for kt in T.serial(k0, k1):
                    ring.consumer_wait()
                    da = dsl.descriptor(
                        desc_a, base + T.cast(ring.stage * a_bytes, "uint32") + a_wg
                    )
                    db = dsl.descriptor(
                        desc_b,
                        base + T.cast(stages * a_bytes + ring.stage * b_bytes, "uint32") + b_wg,
                    )
                    dsl.wgmma_fence()
                    dsl.mma_ksteps(
                        acc, da, db, a_steps, b_steps, kt > k0, WN, tdt, int(a_mn), int(b_mn)
                    )
                    dsl.wgmma_commit()
                    dsl.wgmma_wait(inflight)
                    if T.constexpr(inflight == 0):
                        _release(ring, ring.stage, lane, rank, cluster_m)
                    elif kt - k0 >= inflight:
                        _release(
                            ring,
                            T.truncmod(ring.stage + (stages - inflight), stages),
                            lane,
                            rank,
                            cluster_m,
                        )
                    ring.advance()
                if T.constexpr(inflight > 0):
                    dsl.wgmma_wait(0)
                    _release_last(
                        ring, min(inflight, ktiles // split), stages, lane, rank, cluster_m
                    )
                if T.constexpr(split == 1):
                    store_tile(C, acc, arena, base, tm, tn, wg, packed, packed4, BIAS, alpha, beta)
                else:
                    _split_reduce(acc, WS, LOCK, t, part, tid - 128, last, tmp, split, WN)
                    if last[0] == 1:
                        store_tile(
                            C, acc, arena, base, tm, tn, wg, packed, packed4, BIAS, alpha, beta
                        )
            if T.constexpr(epilogue == "tma"):
                if T.cuda.thread_in_warpgroup() == 0:
                    dsl.bulk_wait(0)  # staging smem must outlive the stores that read it

    # the parameter types of every variant: A, B, C, then the split-K workspace and locks
    a_type = T.Tensor(a_shape, tdt, align=16)
    b_type = T.Tensor(b_shape, tdt, align=16)
    c_type = T.Tensor((M, N), tdt, align=16)
    if split == 1 and not ops:

        @T.function
        def gemm(A: a_type, B: b_type, C: c_type):
            body(A, B, C, None, None, None, None, None)

        return gemm
    ws_len, lock_len = T.dynamic("ws_len"), T.dynamic("lock_len")
    ws_type = T.Tensor((ws_len,), "float32", align=16)
    lock_type = T.Tensor((lock_len,), "int32", align=16)
    if ops:
        bias_len = T.dynamic("bias_len")

        @T.function
        def gemm_ops(
            A: a_type,
            B: b_type,
            C: c_type,
            WS: ws_type,
            LOCK: lock_type,
            BIAS: T.Tensor((bias_len,), tdt, align=16),
            alpha: T.float32,
            beta: T.float32,
        ):
            body(A, B, C, WS, LOCK, BIAS, alpha, beta)

        return gemm_ops

    @T.function
    def gemm_split(A: a_type, B: b_type, C: c_type, WS: ws_type, LOCK: lock_type):
        body(A, B, C, WS, LOCK, None, None, None)

    return gemm_split


@T.inline
def _apply_ops(acc, C, BIAS, alpha, beta, row0, col0, n, rows, cols, with_bias):
    """acc = alpha * acc (+ bias[col]) (+ beta * C[row, col]) on a warpgroup's 64 x n
    fragment at (row0, col0) (:func:`.wgmma.acc_coord`: register 4j + 2h + e is row
    r + 8h, column c + 8j + e); C and bias are read only inside the M x N bounds."""
    t = T.cuda.thread_in_warpgroup()
    r = row0 + 16 * (t // 32) + (t % 32) // 4
    c = col0 + 2 * (t % 4)
    for j in T.unroll(n // 8):
        for h in T.unroll(2):
            for e in T.unroll(2):
                acc[4 * j + 2 * h + e] = acc[4 * j + 2 * h + e] * alpha
                if c + 8 * j + e < cols:
                    if T.constexpr(with_bias):
                        acc[4 * j + 2 * h + e] = acc[4 * j + 2 * h + e] + T.cast(
                            BIAS[c + 8 * j + e], "float32"
                        )
                    if (beta != T.float32(0)) & (r + 8 * h < rows):
                        acc[4 * j + 2 * h + e] = acc[4 * j + 2 * h + e] + beta * T.cast(
                            C[r + 8 * h, c + 8 * j + e], "float32"
                        )


def _operand(mn_major, rows, mode):
    """(descriptor base, k16-step byte offsets) of a stage tile of ``rows`` M or N rows:
    K-major ``[rows, BK]``, or MN-major ``[BK, rows]`` (read with the transpose bit)."""
    if mn_major:
        steps = [mnmajor_kstep_offset(k, mode=mode) for k in range(BK // 16)]
        return mnmajor_descriptor_base(mode, BK), steps
    steps = [kstep_offset(k, rows=rows, elem_bytes=2, mode=mode) for k in range(BK // 16)]
    return kmajor_descriptor_base(mode, rows), steps


def _tile_of(u, total, split):
    """Tile of work unit ``u``: without split-K, ``u`` itself (``u < total``), sparing each
    tile a division by the run-time tile count on the way to its first load."""
    return u if split == 1 else T.truncmod(u, total)


def _split_of(u, total, split):
    """Split-K slice of work unit ``u`` (units are split-major)."""
    return 0 if split == 1 else T.truncdiv(u, total)


def _k_range(s, ktiles, split):
    """K-blocks [k0, k1) of split ``s``: an even cut, each non-empty when split <= ktiles."""
    if split == 1:
        return 0, ktiles
    return T.truncdiv(s * ktiles, split), T.truncdiv((s + 1) * ktiles, split)


@T.inline
def _split_reduce(acc, WS, LOCK, t, s, ctid, last, tmp, split, wn):
    """Split-K: publish this unit's fp32 partial tile in the workspace (fragment order,
    coalesced over the 256 consumer threads), count it on the tile's lock; the unit that
    arrives last sums every split's partial in split order (deterministic), resets the lock
    for the next launch and leaves ``last[0] == 1`` so it stores the tile."""
    nreg = wn // 2
    for r in T.unroll(nreg):
        WS[((t * split + s) * nreg + r) * 256 + ctid] = acc[r]
    T.cuda.thread_fence()  # the partial is visible GPU-wide before the lock counts it
    T.ptx.bar.sync(T.uint32(3), T.uint32(256))  # both consumer warpgroups (ids 1, 2: each)
    if ctid == 0:
        old = T.cuda.atomic_add(LOCK.ptr_to([t]), 1)
        last[0] = T.if_then_else(old == split - 1, 1, 0)
        if old == split - 1:
            LOCK[t] = 0
    T.ptx.bar.sync(T.uint32(3), T.uint32(256))
    if last[0] == 1:
        T.cuda.thread_fence()
        for r in T.unroll(nreg):
            acc[r] = T.float32(0)
            for q in T.unroll(split):
                # L2 (.cg): other SMs wrote these; this SM's L1 may hold stale lines
                at = ((t * split + q) * nreg + r) * 256 + ctid
                T.ptx["ld.global.cg.f32"](tmp, WS.ptr_to([at]))
                acc[r] = acc[r] + tmp


@T.inline
def _guarded_load(view, src, mbar, row, col, cond):
    if cond:
        dsl.tma_load_tile(view, src, mbar, (row, col), Swizzle.B128)


def _release_last(ring, count, stages, lane, rank, cluster_m):
    """Free the ``count`` slots before the current one, oldest first (Python-unrolled)."""
    for i in range(count, 0, -1):
        _release(ring, T.truncmod(ring.stage + (stages - i), stages), lane, rank, cluster_m)


@T.inline
def _release(ring, stage, lane, rank, cluster_m):
    """One elected lane per consumer warp frees ``stage`` in every CTA that wrote it."""
    if lane == 0:
        ring.consumer_release(stage)
        if T.constexpr(cluster_m > 1):
            ring.consumer_release_remote(stage, rank ^ 1)
