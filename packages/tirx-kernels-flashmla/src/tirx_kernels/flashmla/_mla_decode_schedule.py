# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Tile-scheduler metadata of dense MLA decode (pure Python; no torch, no compiler).

Port of FlashMLA's ``get_mla_metadata_kernel``
(``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu``) and the part count
of ``csrc/api/dense_decode.h``, computed on the host. The decode grid has
``num_sm_parts x ceil(q_rows / 64)`` CTAs; part ``p`` processes a contiguous run of
(request, 64-token block) pairs of roughly equal cost: every request costs its block count
plus ``FIXED_OVERHEAD_BLOCKS`` (its epilogue and combine), and a part takes
``ceil(total / parts) + FIXED_OVERHEAD_BLOCKS`` of that. A request cut between parts gets one
split per part; ``num_splits`` is the prefix sum of the split counts (``num_splits[b]`` is the
index of request b's first split, ``num_splits[batch]`` their total).

Metadata row of part p (8 int32, FlashMLA's ``DecodingSchedMeta``): ``begin_req, end_req``
(inclusive), ``begin_block`` (first block of begin_req), ``end_block`` (one past the last block
of end_req), ``begin_split`` (split index of begin_req's piece within that request),
``is_first_req_splitted``, ``is_last_req_splitted``, 0. A part with no work has
``begin_req > end_req``.
"""

from __future__ import annotations

import os

BLOCK_N = 64
FIXED_OVERHEAD_BLOCKS = 5
META_INTS = 8

# Schedules of the split-KV kernel (docs/mla_decode.md): "v1" (_mla_decode_tirx, both
# warpgroups compute the whole S), "v5" (_mla_decode_v5_tirx, upstream's schedule: pages in
# pairs, one per warpgroup), "v7" (v5 with the next request's Q and first pages issued
# before a request's epilogue), "v9" (v7 whose epilogue stages O in shared memory and stores
# each row by one bulk copy), "v10" (v9 with the next request's Q issued before the stores,
# its pages after them: upstream's order); "v2", "v3", "v4", "v6" and "v8" were dropped (the
# doc says why). The environment variable overrides the default per process, e.g.
# TIRX_FLASHMLA_VARIANT=v1 falls back to the first kernel.
VARIANTS = ("v1", "v5", "v7", "v9", "v10")
DEFAULT_VARIANT = "v9"  # why: docs/mla_decode.md, "Status"
VARIANT_ENV = "TIRX_FLASHMLA_VARIANT"


def selected_variant(environ=None) -> str:
    """The schedule a call uses: ``$TIRX_FLASHMLA_VARIANT`` if set (ValueError unless one of
    ``VARIANTS``), else ``DEFAULT_VARIANT``."""
    value = (os.environ if environ is None else environ).get(VARIANT_ENV, "") or DEFAULT_VARIANT
    if value not in VARIANTS:
        raise ValueError(f"flash_mla: {VARIANT_ENV}={value!r} is not one of {list(VARIANTS)}")
    return value


# The split combine (_mla_combine_tirx): "row" (a CTA of 128 threads per query row) or
# "warp" (a warp per row, eight rows per CTA; why the default: docs/mla_decode.md, "Status").
COMBINES = ("row", "warp")
DEFAULT_COMBINE = "warp"
COMBINE_ENV = "TIRX_FLASHMLA_COMBINE"


def selected_combine(environ=None) -> str:
    """The combine kernel a call uses: ``$TIRX_FLASHMLA_COMBINE`` if set (ValueError unless
    one of ``COMBINES``), else ``DEFAULT_COMBINE``."""
    value = (os.environ if environ is None else environ).get(COMBINE_ENV, "") or DEFAULT_COMBINE
    if value not in COMBINES:
        raise ValueError(f"flash_mla: {COMBINE_ENV}={value!r} is not one of {list(COMBINES)}")
    return value


# TIRX_FLASHMLA_METADATA=host computes get_mla_metadata for CUDA tensors on the host (one
# device-to-host copy, values checked), the fallback to the GPU kernel of _mla_metadata_tirx.
METADATA_ENV = "TIRX_FLASHMLA_METADATA"


def metadata_on_device(environ=None) -> bool:
    """Whether get_mla_metadata runs its GPU kernel for CUDA tensors (ValueError unless
    ``$TIRX_FLASHMLA_METADATA`` is unset, ``device`` or ``host``)."""
    value = (os.environ if environ is None else environ).get(METADATA_ENV, "") or "device"
    if value not in ("device", "host"):
        raise ValueError(f"flash_mla: {METADATA_ENV}={value!r} is not 'device' or 'host'")
    return value == "device"


def variants_to_check(environ=None) -> list[str]:
    """The variants run_test checks and run_bench times, the selected one first: all of
    ``VARIANTS``, or only the one ``$TIRX_FLASHMLA_VARIANT`` names (a fallback run never
    launches the other schedules)."""
    chosen = selected_variant(environ)
    if (os.environ if environ is None else environ).get(VARIANT_ENV):
        return [chosen]
    return [chosen] + [v for v in VARIANTS if v != chosen]


def num_sm_parts(num_sms: int, q_rows_per_head_k: int, num_heads_k: int) -> int:
    """Parts of the grid, as upstream: SMs / h_kv / ceil(q rows per KV head / 64), at least 1."""
    return max(num_sms // num_heads_k // -(-q_rows_per_head_k // 64), 1)


def num_blocks(seqlen: int) -> int:
    """64-token blocks of a request (a request of length 0 still counts one block)."""
    return max(-(-seqlen // BLOCK_N), 1)


def sched_meta(seqlens: list[int], parts: int) -> tuple[list[list[int]], list[int]]:
    """(``parts`` metadata rows, ``num_splits`` of length batch + 1) for ``seqlens``."""
    batch = len(seqlens)
    blocks = [num_blocks(s) for s in seqlens]
    last_block = [max(s - 1, 0) // BLOCK_N for s in seqlens]
    total = sum(blocks) + FIXED_OVERHEAD_BLOCKS * batch
    payload = -(-total // parts) + FIXED_OVERHEAD_BLOCKS
    req = block = split = cum = 0
    num_splits = [0] * (batch + 1)
    rows = []
    for _ in range(parts):
        begin_req, begin_block, begin_split = req, block, split
        first_cut = int(block != 0)
        remain = payload
        while req < batch:
            left = blocks[req] - block
            if remain >= left + FIXED_OVERHEAD_BLOCKS:
                cum += split + 1
                num_splits[req + 1] = cum
                remain -= left + FIXED_OVERHEAD_BLOCKS
                req, block, split = req + 1, 0, 0
            else:
                if remain - FIXED_OVERHEAD_BLOCKS > 0:
                    block += remain - FIXED_OVERHEAD_BLOCKS
                    split += 1
                break
        if block > 0:
            end_req, end_block = req, block
        else:
            end_req = req - 1
            end_block = 0 if end_req < 0 or seqlens[end_req] == 0 else last_block[end_req] + 1
        last_cut = int(
            0 <= end_req < batch and end_block != last_block[end_req] + 1 and seqlens[end_req] != 0
        )
        if begin_req == end_req:
            first_cut = last_cut = int(first_cut or last_cut)
        rows.append(
            [begin_req, end_req, begin_block, end_block, begin_split, first_cut, last_cut, 0]
        )
    if not (req == batch and block == 0 and split == 0):
        raise AssertionError("flash_mla: scheduler left work unassigned")  # upstream asserts too
    return rows, num_splits


def covered(rows: list[list[int]], seqlens: list[int], num_splits: list[int]):
    """{(request, split index): [first block, end block)} that the metadata assigns.

    The kernel's reading of a row (used by tests): a request strictly inside a part is
    processed whole (ceil(seqlen / 64) blocks: none for an empty request); begin_req starts
    at begin_block, end_req stops at end_block; the split index is
    ``num_splits[req] + (begin_split if req == begin_req else 0)``."""
    out = {}
    for begin_req, end_req, begin_block, end_block, begin_split, *_ in rows:
        for req in range(begin_req, end_req + 1):
            lo = begin_block if req == begin_req else 0
            hi = end_block if req == end_req else -(-seqlens[req] // BLOCK_N)
            key = (req, num_splits[req] + (begin_split if req == begin_req else 0))
            if key in out:
                raise AssertionError(f"split {key} assigned twice")
            out[key] = (lo, hi)
    return out
