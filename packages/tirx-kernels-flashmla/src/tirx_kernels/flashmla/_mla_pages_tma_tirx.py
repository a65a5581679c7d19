# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""KV pages by TMA for the split-KV decode (v5 and after): what replaces v1's cp.async loads.

Port of the page loads of FlashMLA's sm90 dense decode
(``csrc/sm90/decode/dense/splitkv_mla.cuh``: ``launch_kv_tiles_copy_tma``, one TMA box per
64-column tile of a page completing on an mbarrier, and ``fill_oob_V``, which zeroes the V
rows of tokens past the sequence end: stale cache rows may hold NaN, and ``0 * NaN`` would
reach O). Here
one thread issues the nine ``[64, 64]`` 128B-swizzled boxes of a page (the tile format of
:mod:`._mla_decode_tirx`) on the stage's mbarrier; every thread waits on it. A block-table
entry outside the cache loads from row ``NT`` (past the tensor: TMA zero-fills the whole
page, so nothing is read out of bounds; its tokens are masked as before).
"""

from __future__ import annotations

from tirx_kernels.core.sm90 import dsl
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.toolchain import T

from ._mla_decode_tirx import BM, D_QK, PAGE, STAGES, TILE_BYTES, _swz, page_ok

_CHUNKS_V = 512 * 2 // 16  # 16-byte chunks of a token's V (dims 0..511): 64
TILES = tuple((j, j + 1) for j in range(D_QK // 64))  # a part (and a barrier) per tile


class TmaPages:
    """The full mbarriers of the KV stages, one per part (``parts``: tile ranges of a page)
    of each stage, and this thread's wait phase of each (one bit per barrier, carried across
    requests: a barrier completes once per page part it receives)."""

    def __init__(self, arena, dtype: str, parts):
        self.arena = arena
        self.dtype = dtype
        self.parts = parts
        self.full = T.bind_(T.alloc_shared((STAGES * len(parts),), "uint64", align=8))
        self.phases = T.bind_(T.local_scalar("uint32"))

    @T.inline
    def init(self, tid):
        """Thread 0 initializes the barriers; every thread waits for that (CTA barrier)."""
        if tid == 0:
            for s in T.unroll(STAGES * len(self.parts)):
                T.ptx.mbarrier.init.shared.b64(self.full.ptr_to([s]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()  # visible to TMA's complete_tx
        self.phases = T.uint32(0)
        T.cuda.cta_sync()

    def issue(self, KC, BT, NT, req, blk, stage, parts=(0,)):
        """(One thread.) Parts ``parts`` of page ``BT[req, blk]`` into KV stage ``stage``:
        each part's boxes (one per tile) on its barrier, the part's bytes expected
        (out-of-bounds rows count as transferred)."""
        entry = BT[req, blk]
        row = T.if_then_else(page_ok(entry, NT), T.cast(entry, "int64") * PAGE, NT)
        offset = TILE_BYTES * (1 + stage)
        for part in parts:
            first, last = self.parts[part]
            bar = self.full.ptr_to([stage * len(self.parts) + part])
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar, T.uint32((last - first) * BM * 128))
            for j in range(first, last):
                view = dsl.smem_view(
                    self.arena, offset + j * BM * 128, (PAGE, 64), self.dtype, Swizzle.B128
                )
                dsl.tma_load_tile(view, KC, bar, (T.cast(row, "int32"), 64 * j), Swizzle.B128)

    @T.inline
    def wait(self, stage, part=0):
        """Wait until part ``part`` of the page of ``stage`` has landed (then readable by
        every proxy)."""
        bit = T.cast(stage * len(self.parts) + part, "uint32")
        T.cuda.mbarrier_wait(
            self.full.ptr_to([stage * len(self.parts) + part]), (self.phases >> bit) & T.uint32(1)
        )
        self.phases = self.phases ^ (T.uint32(1) << bit)

    @T.inline
    def zero_tail_half(self, stage, half, valid, t, bar):
        """Zero V dims ``256 half .. 256 half + 255`` of rows ``valid..63`` of ``stage`` (the
        V a warpgroup reads alone), by the 128 threads ``t`` of that warpgroup, then make the
        stores visible to its wgmma (named barrier ``bar`` of 128 threads)."""
        for it in T.unroll(PAGE * (_CHUNKS_V // 2) // 128):
            idx = it * 128 + t
            row = idx // (_CHUNKS_V // 2)
            if row >= valid:
                chunk = half * (_CHUNKS_V // 2) + idx % (_CHUNKS_V // 2)
                word = (TILE_BYTES * (1 + stage) + _swz(row, chunk)) // 4
                for w in T.unroll(4):
                    self.arena[word + w] = T.uint32(0)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(T.uint32(bar), T.uint32(128))
