# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""TIRx emitters of the sm_90a building blocks (imports the compiler through toolchain).

Use inside ``@T.function`` bodies. Each emitter follows the pure model of the same name in
:mod:`.layouts`, :mod:`.wgmma`, :mod:`.pipeline` and :mod:`.scheduler`.
"""

from __future__ import annotations

from tvm_tirx.ir import PtrType

from ..toolchain import T
from .layouts import Swizzle, smem_layout
from .wgmma import acc_regs

TMA_LOAD_2D = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE_2D = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
TMA_LOAD_2D_MULTICAST = (
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".multicast::cluster"
)

_AB = {"bfloat16": "bf16", "float16": "f16"}
_F8 = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}  # k32 wgmma, K-major only
_CVT = {"bfloat16": "bf16x2", "float16": "f16x2"}


# --------------------------------------------------------------------------- shared memory


def smem_view(base, byte_offset, shape, dtype, mode: Swizzle = Swizzle.B128, align=1024):
    """A typed, swizzled view of ``shape`` at ``base`` + ``byte_offset`` (run-time offset ok).

    ``base`` is a shared buffer (e.g. the dynamic-smem arena); the view carries the
    :func:`.layouts.smem_layout` so ``T.cuda.tile.apply`` TMA can check it.
    """
    scope = str(base.ty.scope) if hasattr(base.ty, "scope") else "shared.dyn"
    return T.bind_(
        T.decl_tensor(
            T.ptr_byte_offset(base.data, byte_offset, ty=PtrType(dtype, scope)),
            ty_args=[
                T.Tensor(
                    tuple(shape),
                    dtype,
                    scope=scope,
                    align=align,
                    layout=smem_layout(dtype, mode, shape),
                )
            ],
        )
    )


def tma_load_tile(dst, src, mbar, coords, mode, elem_bytes=2, cta_mask=None, l2_promotion=0):
    """TMA-load the K-major tile ``dst`` ([rows, cols] view from :func:`smem_view`) from
    global ``src`` at ``coords`` = (row, col): one box of one atom width per column block.

    Out-of-bounds rows/cols are zero-filled and still count as transferred bytes, so the
    expected tx of a tile is always ``rows * cols * elem_bytes``. With ``cta_mask`` the
    boxes are multicast to the same shared offset (and the same mbarrier offset) of every
    CTA of the cluster in the mask (launch with a cluster). ``l2_promotion``: the tensor
    map's ``CUtensorMapL2promotion`` (0 none, 1 64 B, 2 128 B, 3 256 B).
    """
    rows, cols = int(dst.shape[0]), int(dst.shape[1])
    step = Swizzle(mode).atom_cols(elem_bytes)
    for j in range(cols // step):
        _tma_box(
            dst,
            src,
            mbar,
            coords[0],
            coords[1] + j * step,
            j * step,
            rows,
            step,
            mode,
            cta_mask,
            l2_promotion,
        )


def _tma_box(dst, src, mbar, row, col, c0, rows, width, mode, cta_mask, l2_promotion=0):
    """One TMA box of ``rows`` x ``width`` into ``dst[:, c0:c0 + width]`` from global ``src``
    at (row, col); with ``cta_mask``, multicast to every CTA of the cluster in the mask."""
    extra = {} if cta_mask is None else {"cta_mask": cta_mask}
    if l2_promotion:  # (the default tensor map unchanged otherwise)
        extra["l2_promotion"] = l2_promotion
    T.cuda.tile.apply(
        T.ptx[TMA_LOAD_2D if cta_mask is None else TMA_LOAD_2D_MULTICAST],
        dst[0:rows, c0 : c0 + width],
        src[0 : src.shape[0], 0 : src.shape[1]],
        mbar=mbar,
        box=(rows, width),
        coords=(row, col),
        swizzle=int(mode),
        **extra,
    )


def smem_addr(buf):
    """32-bit shared-window address of a shared buffer's first element."""
    return T.cuda.cvta_generic_to_shared(buf.ptr_to([0] * len(buf.shape)))


# --------------------------------------------------------------------------- wgmma


def descriptor(base: int, addr):
    """Descriptor value: a constant ``base`` (:func:`.wgmma.kmajor_descriptor_base`) with the
    32-bit shared address ``addr`` (16-byte aligned) in its address field."""
    return T.uint64(base) | T.cast(addr >> T.uint32(4), "uint64")


def mma_op(n: int, ab_dtype: str):
    """The ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}`` instruction (SS form);
    for an fp8 ``ab_dtype`` the ``m64n{n}k32`` one (same 32-byte K step)."""
    acc_regs(n)
    k = 32 if ab_dtype in _F8 else 16
    chain = getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{n}k{k}").f32
    ab = _F8[ab_dtype] if ab_dtype in _F8 else _AB[ab_dtype]
    return getattr(getattr(chain, ab), ab)


@T.inline
def mma_ss(acc, da, db, scale_d, n, ab_dtype, trans_a=0, trans_b=0):
    """acc[64 x n] (+)= A(desc da)[64 x 16] @ B(desc db)[n x 16]^T; scale_d=False overwrites.

    Both operands K-major in shared memory by default; ``trans_a``/``trans_b`` 1 reads that
    operand MN-major (``imm-trans-a``/``imm-trans-b``; descriptor from
    :func:`.wgmma.mnmajor_descriptor_base`). fp8 has no transpose bits (K-major, 64 x 32).
    """
    if T.constexpr(ab_dtype in _F8):
        mma_op(n, ab_dtype)(*[acc[i] for i in range(n // 2)], da, db, T.ptx.pred(scale_d), 1, 1)
    else:
        mma_op(n, ab_dtype)(
            *[acc[i] for i in range(n // 2)], da, db, T.ptx.pred(scale_d), 1, 1, trans_a, trans_b
        )


def mma_ksteps(acc, da, db, a_steps, b_steps, accumulate, n, ab_dtype, trans_a=0, trans_b=0):
    """Issue ``len(a_steps)`` k16 wgmmas over one shared tile pair (Python-unrolled).

    ``da``/``db``: descriptors of the tile bases; ``a_steps``/``b_steps``: byte offsets of
    the k16 slices (:func:`.wgmma.kstep_offset`, or :func:`.wgmma.mnmajor_kstep_offset` for
    an MN-major operand), added to the descriptors' address field.
    ``accumulate`` (bool expression) applies to the first step; later steps accumulate.
    ``trans_a``/``trans_b``: :func:`mma_ss`.
    """
    for i, (oa, ob) in enumerate(zip(a_steps, b_steps)):
        mma_ss(
            acc,
            da + T.uint64(oa >> 4),
            db + T.uint64(ob >> 4),
            accumulate if i == 0 else T.bool(True),
            n,
            ab_dtype,
            trans_a,
            trans_b,
        )


@T.inline
def persistent_entry(clusters, cluster, smem, threads=384):
    """Enter a warp-specialized persistent kernel: ``clusters`` clusters of ``cluster`` CTAs
    (along x; 1: no cluster launch) of ``threads`` threads (384: a producer and two consumer
    warpgroups; 256: one consumer), ``smem`` bytes of dynamic shared memory each, one CTA
    per SM."""
    if T.constexpr(cluster == 1):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=clusters, block=threads, dynamic_smem_bytes=smem),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )
    else:
        T.device_entry(
            launch=T.cuda.LaunchConfig(
                grid=clusters * cluster,
                block=threads,
                cluster=(cluster, 1, 1),
                dynamic_smem_bytes=smem,
            ),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )


@T.inline
def wgmma_fence():
    T.ptx.wgmma.fence.sync.aligned()


@T.inline
def wgmma_commit():
    T.ptx.wgmma.commit_group.sync.aligned()


@T.inline
def wgmma_wait(pending):
    T.ptx.wgmma.wait_group.sync.aligned(pending)


_FENCE_WIDTH = 32  # registers per fence statement
_FENCE_CONSTRAINT = {"float32": ("float", "f"), "uint32": ("uint32_t", "r")}


def fence_registers(regs, count):
    """A compiler fence on ``regs[0:count]`` (fp32 or u32 locals), as CUTLASS's
    ``warpgroup_fence_operand``: an empty ``asm volatile`` that reads and redefines them, so
    nvcc keeps their computations on the side of a ``wgmma.fence`` / ``wait_group`` where the
    program puts them (ptxas serializes every wgmma when one moves into the pipeline)."""
    c_type, letter = _FENCE_CONSTRAINT[str(regs.dtype)]
    for first in range(0, count, _FENCE_WIDTH):
        width = min(_FENCE_WIDTH, count - first)
        name = f"tirx_kernels_fence_{letter}{width}"
        params = ", ".join(f"{c_type}& r{i}" for i in range(width))
        operands = ", ".join(f'"+{letter}"(r{i})' for i in range(width))
        source = (
            f"\n__forceinline__ __device__ void {name}({params}) {{\n"
            f'  asm volatile("" : {operands} :: "memory");\n}}\n'
        )
        T.cuda.func_call(name, *[regs[first + i] for i in range(width)], source)


def bulk_load(dst, src, nbytes, mbar):
    """A 1-D TMA bulk copy of ``nbytes`` (a multiple of 16) from global ``src`` (a pointer,
    16-byte aligned) to shared ``dst`` (a 32-bit shared address, 16-byte aligned), completing
    on the mbarrier at shared address ``mbar``: for small contiguous rows, such as a tile's
    scales, that need no tensor map."""
    source = (
        "\n__forceinline__ __device__ void tirx_kernels_bulk_load(unsigned dst, const void* src, "
        "unsigned nbytes, unsigned mbar) {\n"
        '  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes '
        '[%0], [%1], %2, [%3];" :: "r"(dst), "l"(src), "r"(nbytes), "r"(mbar) : "memory");\n}\n'
    )
    T.cuda.func_call("tirx_kernels_bulk_load", dst, src, nbytes, mbar, source)


def bulk_store(dst, src, nbytes):
    """A 1-D bulk copy of ``nbytes`` (a multiple of 16) from shared ``src`` (a 32-bit shared
    address, 16-byte aligned) to global ``dst`` (a pointer, 16-byte aligned), in this
    thread's bulk group: for whole rows staged in shared memory, no tensor map needed.
    Completes asynchronously: ``bulk_commit`` then ``bulk_wait``/``bulk_wait_read``."""
    source = (
        "\n__forceinline__ __device__ void tirx_kernels_bulk_store(void* dst, unsigned src, "
        "unsigned nbytes) {\n"
        '  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" '
        ':: "l"(dst), "r"(src), "r"(nbytes) : "memory");\n}\n'
    )
    T.cuda.func_call("tirx_kernels_bulk_store", dst, src, nbytes, source)


@T.inline
def store_acc(acc, out, row0, col0, n, rows, cols, check_rows, check_cols, packed):
    """Store a warpgroup's 64 x n f32 accumulator to ``out`` at (row0, col0), converted to
    ``out``'s 16-bit dtype, one 32-bit store per column pair (:func:`.wgmma.acc_coord`).

    ``rows``/``cols`` clip the store (tails) when ``check_rows``/``check_cols`` are set;
    ``cols`` must be even. ``packed`` is a local uint32 scratch scalar.
    """
    t = T.cuda.thread_in_warpgroup()
    r = row0 + 16 * (t // 32) + (t % 32) // 4
    c = col0 + 2 * (t % 4)
    cvt = getattr(T.ptx.cvt.rn, _CVT[str(out.ty.dtype.dtype)]).f32
    for j in T.unroll(n // 8):
        for h in T.unroll(2):
            if T.constexpr(check_rows and check_cols):
                if (r + 8 * h < rows) & (c + 8 * j < cols):
                    cvt(packed, acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                    T.ptx["st.global.b32"](out.ptr_to([r + 8 * h, c + 8 * j]), packed)
            elif T.constexpr(check_rows):
                if r + 8 * h < rows:
                    cvt(packed, acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                    T.ptx["st.global.b32"](out.ptr_to([r + 8 * h, c + 8 * j]), packed)
            elif T.constexpr(check_cols):
                if c + 8 * j < cols:
                    cvt(packed, acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                    T.ptx["st.global.b32"](out.ptr_to([r + 8 * h, c + 8 * j]), packed)
            else:
                cvt(packed, acc[4 * j + 2 * h + 1], acc[4 * j + 2 * h])
                T.ptx["st.global.b32"](out.ptr_to([r + 8 * h, c + 8 * j]), packed)


@T.inline
def tma_store_box(dst, src, coords, mode):
    """One TMA box: the whole swizzled shared view ``src`` ([rows, atom width]) to global
    ``dst`` at ``coords`` = (row, col); out-of-bounds rows/cols are not written.
    Completes asynchronously: ``bulk_commit`` then ``bulk_wait``/``bulk_wait_read``."""
    T.cuda.tile.apply(
        T.ptx[TMA_STORE_2D],
        dst[0 : dst.shape[0], 0 : dst.shape[1]],
        src[0 : src.shape[0], 0 : src.shape[1]],
        box=(src.shape[0], src.shape[1]),
        coords=coords,
        swizzle=int(mode),
    )


@T.inline
def bulk_commit():
    T.ptx.cp.async_.bulk.commit_group()


@T.inline
def bulk_wait_read(pending):
    """Until at most ``pending`` of this thread's bulk stores still read shared memory."""
    T.ptx.cp.async_.bulk.wait_group.read(pending)


@T.inline
def bulk_wait(pending):
    """Until at most ``pending`` of this thread's bulk stores are incomplete."""
    T.ptx.cp.async_.bulk.wait_group(pending)


@T.inline
def stmatrix_acc_chunk(acc, buf_addr, chunk, packed4, dtype):
    """Write accumulator columns [64 chunk, 64 chunk + 64) of a warpgroup's 64 x N tile,
    converted to 16 bits, into a 64 x 64 shared tile at ``buf_addr`` (128B-swizzled, the
    :mod:`.layouts` format): 4 ``stmatrix.x4`` per thread, each two 8-column blocks of the
    warp's 16 rows (its registers are exactly the stmatrix fragments, :func:`.wgmma.acc_coord`).
    ``packed4``: local uint32[4] scratch; ``dtype``: "bfloat16" or "float16".
    """
    cvt = getattr(T.ptx.cvt.rn, _CVT[dtype]).f32
    t = T.cuda.thread_in_warpgroup()
    m = (t % 32) // 8  # the 8x8 matrix this lane addresses: (row half, block) = (m % 2, m // 2)
    row = 16 * (t // 32) + 8 * (m % 2) + t % 8
    for q in T.unroll(4):
        for i in T.unroll(4):
            cvt(
                packed4[i],
                acc[4 * (8 * chunk + 2 * q + i // 2) + 2 * (i % 2) + 1],
                acc[4 * (8 * chunk + 2 * q + i // 2) + 2 * (i % 2)],
            )
        T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
            buf_addr + T.cast(row * 128 + T.bitwise_xor(2 * q + m // 2, row % 8) * 16, "uint32"),
            packed4[0],
            packed4[1],
            packed4[2],
            packed4[3],
        )


STAGING_BYTES = 64 * 64 * 2  # one 64 x 64 16-bit staging tile of the TMA epilogue


def store_acc_tma(acc, out, arena, base, staging, chunks, barrier, packed4, dtype):
    """TMA epilogue of one warpgroup's accumulator: for each ``(chunk, row, col)`` of
    ``chunks`` (Python-unrolled), :func:`stmatrix_acc_chunk` the chunk's 64 columns into one
    of the warpgroup's two staging tiles (byte offsets ``staging`` and ``staging +
    STAGING_BYTES`` of ``arena``, at shared address ``base``) and let one thread store it to
    ``out`` at (row, col) by TMA, clipped at ``out``'s bounds. The stores complete
    asynchronously, so the warpgroup goes on while they drain; before exit one thread must
    ``bulk_wait(0)`` (the staging tiles must outlive the stores reading them). ``barrier``:
    a named barrier of this warpgroup's 128 threads only."""
    # a tile's first staging tile is the one its predecessor's last store did not use when
    # the count is even: that store may still be reading the other
    pending = 1 if len(chunks) % 2 == 0 else 0
    for j, (chunk, row, col) in enumerate(chunks):
        buf = staging + (j % 2) * STAGING_BYTES
        _staging_acquire(barrier, pending)
        stmatrix_acc_chunk(acc, base + T.uint32(buf), chunk, packed4, dtype)
        _staging_store(out, smem_view(arena, buf, (64, 64), dtype, Swizzle.B128), row, col, barrier)


@T.inline
def _staging_acquire(barrier, pending):
    if T.cuda.thread_in_warpgroup() == 0:
        bulk_wait_read(pending)
    T.cuda.warpgroup_sync(barrier)


@T.inline
def _staging_store(out, view, row, col, barrier):
    T.ptx.fence.proxy.async_.shared__cta()  # generic-proxy smem writes -> TMA reads
    T.cuda.warpgroup_sync(barrier)
    if T.cuda.thread_in_warpgroup() == 0:
        tma_store_box(out, view, (row, col), Swizzle.B128)
        bulk_commit()


@T.inline
def mbarrier_wait_at(addr, phase):
    """Spin until the mbarrier at 32-bit shared address ``addr`` completes phase ``phase``
    (``try_wait.parity`` with the same suspend-time hint as ``T.cuda.mbarrier_wait``, which
    takes a generic pointer and converts it at each call)."""
    source = (
        "\n__forceinline__ __device__ void tirx_kernels_mbarrier_wait_at(unsigned addr, "
        "int phase) {\n"
        '  asm volatile("{\\n.reg .pred P1;\\nLAB_WAIT:\\n"\n'
        '    "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%0], %1, %2;\\n"\n'
        '    "@P1 bra.uni DONE;\\nbra.uni LAB_WAIT;\\nDONE:\\n}\\n"\n'
        '    :: "r"(addr), "r"(phase), "r"(0x989680) : "memory");\n}\n'
    )
    T.cuda.func_call("tirx_kernels_mbarrier_wait_at", addr, phase, source)


@T.inline
def mbarrier_arrive_at(addr):
    """One arrival on the mbarrier at 32-bit shared address ``addr``."""
    source = (
        "\n__forceinline__ __device__ void tirx_kernels_mbarrier_arrive_at(unsigned addr) {\n"
        '  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(addr) : "memory");\n}\n'
    )
    T.cuda.func_call("tirx_kernels_mbarrier_arrive_at", addr, source)


# --------------------------------------------------------------------------- mbarrier ring


@T.meta_class
class Ring:
    """Full/empty mbarrier pairs of a ``stages``-slot ring plus this thread's (stage, phase).

    Protocol in :mod:`.pipeline`. ``init`` must run on one thread, followed by a CTA barrier
    (``fence_init`` then ``T.cuda.cta_sync()``) before any other use. ``by_address``: the
    waits and local arrivals address the barriers through their 32-bit shared addresses,
    taken once at :meth:`reset`, instead of converting a generic pointer at each call (the
    conversion re-read the CTA id in deepgemm's K loop; ptxas may still rematerialize the
    address there, as it did in deepgemm's lean loop).
    """

    def __init__(self, stages: int, by_address: bool = False):
        self.stages = stages
        self.by_address = by_address
        self.full = T.bind_(T.alloc_shared((stages,), "uint64", align=8))
        self.empty = T.bind_(T.alloc_shared((stages,), "uint64", align=8))
        self.stage = T.bind_(T.local_scalar("int32"))
        self.phase = T.bind_(T.local_scalar("int32"))
        if by_address:
            self.full_addr = T.bind_(T.local_scalar("uint32"))
            self.empty_addr = T.bind_(T.local_scalar("uint32"))

    @T.inline
    def init(self, consumer_arrivals):
        for s in T.unroll(self.stages):
            T.ptx.mbarrier.init.shared.b64(self.full.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(self.empty.ptr_to([s]), T.uint32(consumer_arrivals))

    @T.inline
    def fence_init(self, cluster=False):
        if T.constexpr(cluster):
            # visible to the other CTAs of the cluster (remote arrive, multicast complete_tx)
            T.ptx.fence.mbarrier_init.release.cluster()
        else:
            # visible to the async proxy (TMA complete_tx)
            T.ptx.fence.proxy.async_.shared__cta()

    @T.inline
    def reset(self):
        self.stage = 0
        self.phase = 0
        if T.constexpr(self.by_address):
            self.full_addr = T.cuda.cvta_generic_to_shared(self.full.ptr_to([0]))
            self.empty_addr = T.cuda.cvta_generic_to_shared(self.empty.ptr_to([0]))

    @T.inline
    def setup(self, tid, cluster=1, consumer_warps=8):
        """The warp-specialized GEMMs' start: thread ``tid == 0`` initializes the barriers
        (one elected lane per consumer warp of the ``cluster`` CTAs, ``consumer_warps`` per
        CTA) and fences them, every thread of the cluster waits for that, then all
        :meth:`reset`."""
        if tid == 0:
            self.init(consumer_warps * cluster)
            self.fence_init(cluster > 1)
        if T.constexpr(cluster == 1):
            T.cuda.cta_sync()
        else:
            cluster_sync()
        self.reset()

    @T.inline
    def advance(self):
        self.stage = self.stage + 1
        if self.stage == self.stages:
            self.stage = 0
            self.phase = self.phase ^ 1

    def full_bar(self):
        return self.full.ptr_to([self.stage])

    @T.inline
    def producer_acquire(self):
        if T.constexpr(self.by_address):
            mbarrier_wait_at(self.empty_addr + T.cast(8 * self.stage, "uint32"), self.phase ^ 1)
        else:
            T.cuda.mbarrier_wait(self.empty.ptr_to([self.stage]), self.phase ^ 1)

    @T.inline
    def producer_expect(self, nbytes):
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(self.full.ptr_to([self.stage]), T.uint32(nbytes))

    @T.inline
    def consumer_wait(self):
        if T.constexpr(self.by_address):
            mbarrier_wait_at(self.full_addr + T.cast(8 * self.stage, "uint32"), self.phase)
        else:
            T.cuda.mbarrier_wait(self.full.ptr_to([self.stage]), self.phase)

    @T.inline
    def consumer_release(self, stage):
        if T.constexpr(self.by_address):
            mbarrier_arrive_at(self.empty_addr + T.cast(8 * stage, "uint32"))
        else:
            T.ptx.mbarrier.arrive.shared.b64(self.empty.ptr_to([stage]), T.uint32(1))

    @T.inline
    def consumer_release_remote(self, stage, rank):
        """Arrive on ``empty[stage]`` of cluster CTA ``rank`` (its slot got our multicast)."""
        remote = T.local_scalar("uint32")
        T.ptx.mapa.shared__cluster.u32(
            remote, T.cuda.cvta_generic_to_shared(self.empty.ptr_to([stage])), T.uint32(rank)
        )
        T.ptx.mbarrier.arrive.shared__cluster.b64(remote)

    @T.inline
    def producer_tail(self):
        """Wait until every slot was released once more: a CTA whose barriers receive remote
        arrivals must not exit before they land."""
        for _ in T.unroll(self.stages):
            self.producer_acquire()
            self.advance()


@T.inline
def cluster_sync():
    """All threads of all CTAs of the cluster (release/acquire)."""
    T.ptx.barrier.cluster.arrive.release.aligned()
    T.ptx.barrier.cluster.wait.acquire.aligned()


# --------------------------------------------------------------------------- scheduler


def grouped_tile(t, num_m, num_n, group_m):
    """(m tile, n tile) expressions of linear tile ``t`` (>= 0): :func:`.scheduler.grouped_tile`.

    ``num_m``/``num_n`` may be run-time expressions; uses truncating division (t >= 0).
    """
    span = group_m * num_n
    first_m = T.truncdiv(t, span) * group_m
    rows = T.min(num_m - first_m, group_m)
    within = T.truncmod(t, span)
    return first_m + T.truncmod(within, rows), T.truncdiv(within, rows)


@T.inline
def mma_rs(acc, a, a0, db, scale_d, n, ab_dtype, trans_b):
    """acc[64 x n] (+)= A(registers a[a0:a0 + 4], the :func:`.wgmma.a_coord` fragment)[64 x 16]
    @ B(desc db)[16 x n]; ``trans_b`` 1 reads B MN-major (e.g. V ``[kv, d]`` in P @ V)."""
    mma_op(n, ab_dtype)(
        *[acc[i] for i in range(n // 2)],
        a[a0],
        a[a0 + 1],
        a[a0 + 2],
        a[a0 + 3],
        db,
        T.ptx.pred(scale_d),
        1,
        1,
        trans_b,
    )
