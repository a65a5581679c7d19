# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The tile-scheduler metadata on the GPU: ``get_mla_metadata`` without a host sync.

Port of FlashMLA's ``get_mla_metadata_kernel``
(``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu``): one warp; the
lanes sum the requests' costs (64-token blocks plus ``FIXED_OVERHEAD_BLOCKS``), then lane 0
walks the parts exactly as :func:`._mla_decode_schedule.sched_meta`, the host version that
states the algorithm and that the GPU test compares this kernel with. The lanes' first pass
leaves ``cache_seqlens`` in L1 for lane 0's reads. Sizes (batch, parts) are launch arguments,
so one kernel serves every call.
"""

from __future__ import annotations

import functools

from tirx_kernels.core import toolchain

from ._mla_decode_schedule import BLOCK_N, FIXED_OVERHEAD_BLOCKS, META_INTS

_OV = FIXED_OVERHEAD_BLOCKS


def _blocks(seqlen):
    """64-token blocks of a request (a request of length 0 still counts one)."""
    return toolchain.T.max((seqlen + (BLOCK_N - 1)) // BLOCK_N, 1)


def _last_block(seqlen):
    return toolchain.T.max(seqlen - 1, 0) // BLOCK_N


@functools.cache
def make_sched_meta():
    """``f(cache_seqlens (batch,), tile_scheduler_metadata (parts, 8), num_splits
    (batch + 1,))``, int32: writes the metadata of ``parts`` parts for the requests."""
    T = toolchain.T
    batch, parts = T.dynamic("batch"), T.dynamic("parts")

    @T.function
    def mla_sched_meta(
        Seqlens: T.Tensor((batch,), "int32", align=4),
        Meta: T.Tensor((parts, META_INTS), "int32", align=4),
        NumSplits: T.Tensor((batch + 1,), "int32", align=4),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.thread_idx("x")
        cost = T.alloc_local((1,), "int32")
        cost[0] = 0
        for i in range(T.ceildiv(batch - lane, 32)):  # requests lane, lane + 32, ...
            cost[0] = cost[0] + _blocks(Seqlens[lane + 32 * i]) + _OV
        total = T.cuda.warp_sum(cost[0], 32)
        # the walk's state: next request, its next block and split, splits so far, and per
        # part what it has left, where it began and where it ends
        req = T.alloc_local((1,), "int32")
        block = T.alloc_local((1,), "int32")
        split = T.alloc_local((1,), "int32")
        cum = T.alloc_local((1,), "int32")
        remain = T.alloc_local((1,), "int32")
        begin = T.alloc_local((3,), "int32")  # request, block, split
        end = T.alloc_local((2,), "int32")  # request, block
        cut = T.alloc_local((2,), "int32")  # first and last request split
        if lane == 0:
            payload = (total + parts - 1) // parts + _OV
            req[0] = 0
            block[0] = 0
            split[0] = 0
            cum[0] = 0
            NumSplits[0] = 0
            for p in range(parts):
                begin[0] = req[0]
                begin[1] = block[0]
                begin[2] = split[0]
                cut[0] = T.if_then_else(block[0] != 0, 1, 0)
                remain[0] = payload
                while req[0] < batch:
                    left = _blocks(Seqlens[req[0]]) - block[0] + _OV  # to finish the request
                    if remain[0] >= left:
                        cum[0] = cum[0] + split[0] + 1
                        NumSplits[req[0] + 1] = cum[0]
                        remain[0] = remain[0] - left
                        req[0] = req[0] + 1
                        block[0] = 0
                        split[0] = 0
                    else:
                        if remain[0] > _OV:
                            block[0] = block[0] + remain[0] - _OV
                            split[0] = split[0] + 1
                        break
                if block[0] > 0:
                    end[0] = req[0]
                    end[1] = block[0]
                else:
                    end[0] = req[0] - 1
                    end[1] = 0
                    if end[0] >= 0:
                        if Seqlens[end[0]] != 0:
                            end[1] = _last_block(Seqlens[end[0]]) + 1
                cut[1] = 0
                if (end[0] >= 0) & (end[0] < batch):
                    if (end[1] != _last_block(Seqlens[end[0]]) + 1) & (Seqlens[end[0]] != 0):
                        cut[1] = 1
                if begin[0] == end[0]:
                    cut[0] = T.max(cut[0], cut[1])
                    cut[1] = cut[0]
                Meta[p, 0] = begin[0]
                Meta[p, 1] = end[0]
                Meta[p, 2] = begin[1]
                Meta[p, 3] = end[1]
                Meta[p, 4] = begin[2]
                Meta[p, 5] = cut[0]
                Meta[p, 6] = cut[1]
                Meta[p, 7] = 0

    return mla_sched_meta
