# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Dense MLA decode with a paged KV cache: FlashMLA's Python API over TIRx kernels.

Port of FlashMLA's dense decode API (``flash_mla/flash_mla_interface.py``,
``csrc/api/dense_decode.h``) in its explicit-metadata form:

* ``get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k)`` returns
  ``(tile_scheduler_metadata, num_splits)`` (int32, on cache_seqlens' device): FlashMLA's
  balanced split of (request, 64-token block) work over ``num_sm_parts`` parts
  (:mod:`._mla_decode_schedule`), computed by a one-warp kernel for CUDA tensors, as
  upstream (no host sync; :mod:`._mla_metadata_tirx`), on the host for CPU tensors or with
  ``TIRX_FLASHMLA_METADATA=host`` (one device-to-host copy of cache_seqlens, whose values it
  checks). Reuse it across calls with the same cache_seqlens, as upstream.
* ``flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
  tile_scheduler_metadata, num_splits, softmax_scale=None, causal=False)`` returns
  ``(out, lse)``: out ``(batch, s_q, h_q, 512)`` in q's dtype, lse ``(batch, h_q, s_q)`` fp32.

Semantics: query row ``(b, s, h)`` attends to tokens ``t < cache_seqlens[b]`` of request b
(token t lives in row ``t % 64`` of page ``block_table[b, t // 64]``); with ``causal`` and
``s_q > 1`` to ``t <= cache_seqlens[b] - s_q + s`` (ignored for s_q == 1, as upstream).
K is all 576 dims of a cached token, V its first 512 (absorbed MLA, one KV head).
``out = softmax(scale * q k^T) v``, ``lse = ln(sum exp(scale * q k^T))`` (natural log). A row
with no token to attend gets out = 0 and lse = +inf (upstream's convention).

Numerics: products in fp32 (wgmma), softmax in fp32 (exp2 with the scale folded into
log2 units), P rounded to q's dtype before ``P V`` (as upstream), per-split outputs and lse in
fp32, merged with log-sum-exp weights in fp32, out rounded once to q's dtype.

Dispatch domain (checked; anything else raises ValueError naming the argument): CUDA tensors;
q ``(batch, s_q, h_q, 576)`` bfloat16 or float16 with a contiguous last dim; k_cache
``(num_blocks, 64, 1, 576)`` of q's dtype, contiguous; block_table ``(batch, max_blocks)``
int32; cache_seqlens ``(batch,)`` int32; head_dim_v 512; metadata of ``get_mla_metadata``'s
shapes. Only shapes, dtypes and devices are checked on the host: a call never copies from
the device (it can be captured in a CUDA graph). Values are guarded on the device instead:
a token is attended only if its block lies inside the block table (``t // 64 < max_blocks``:
cache_seqlens longer than the table are cut there) and its block-table entry is in
``[0, num_blocks)`` (a bad entry masks its 64 tokens; nothing outside k_cache is ever read);
request, block and split indices of the metadata are clamped to the tensors. Metadata that
does not belong to cache_seqlens gives wrong results, never an out-of-bounds access. The
kernels are compiled per (dtype, h_q, s_q, causal).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from tirx_kernels.core import host, toolchain
from tirx_kernels.core.ops import public_op

from . import _mla_decode_tirx, _mla_decode_v5_tirx
from ._mla_combine_tirx import make_combine, make_combine_warp_rows
from ._mla_decode_schedule import (
    META_INTS,
    metadata_on_device,
    num_sm_parts,
    sched_meta,
    selected_combine,
    selected_variant,
)
from ._mla_decode_tirx import D_QK, D_V, PAGE
from ._mla_metadata_tirx import make_sched_meta

_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
# variant name (_mla_decode_schedule.VARIANTS) -> split-KV kernel factory
DECODE_FACTORIES = {
    "v1": _mla_decode_tirx.make_decode,
    "v5": _mla_decode_v5_tirx.make_decode,
    "v7": functools.partial(_mla_decode_v5_tirx.make_decode, prefetch=True),
    "v9": functools.partial(_mla_decode_v5_tirx.make_decode, prefetch=True, staged_stores=True),
    "v10": functools.partial(
        _mla_decode_v5_tirx.make_decode, prefetch=True, staged_stores=True, early_q=True
    ),
}


@functools.cache
def switches() -> tuple[str, str]:
    """(variant, combine) of the op: ``selected_variant()`` and ``selected_combine()``, read
    from the environment at the first call; ``switches.cache_clear()`` reads them again.
    Once, not per call: two lookups of unset variables cost a µs or two (a KeyError each)."""
    return selected_variant(), selected_combine()


@functools.cache
def _decode_exec(variant, dtype, h_q, s_q, causal):
    return toolchain.compile(DECODE_FACTORIES[variant](dtype, h_q, s_q, causal))


# combine name (_mla_decode_schedule.COMBINES) -> combine kernel factory
COMBINE_FACTORIES = {"row": make_combine, "warp": make_combine_warp_rows}


@functools.cache
def _combine_exec(dtype, h_q, s_q, combine):
    return toolchain.compile(COMBINE_FACTORIES[combine](dtype, h_q, s_q))


@functools.cache
def _metadata_exec():
    return toolchain.compile(make_sched_meta())


@functools.cache
def _device_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def get_mla_metadata(
    cache_seqlens: torch.Tensor,
    num_q_tokens_per_head_k: int,
    num_heads_k: int,
    num_sms: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tile_scheduler_metadata ``(num_sm_parts, 8)``, num_splits ``(batch + 1,)``), int32.

    ``num_q_tokens_per_head_k`` = s_q * h_q // h_kv; ``num_heads_k`` must be 1 (MLA).
    ``num_sms`` defaults to the SM count of cache_seqlens' device (CPU tensors: 132, H200).
    """
    if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.dim() != 1:
        raise ValueError("get_mla_metadata: cache_seqlens must be a 1-d tensor (batch,)")
    if cache_seqlens.dtype != torch.int32:
        raise ValueError(
            f"get_mla_metadata: cache_seqlens must be int32, got {cache_seqlens.dtype}"
        )
    if cache_seqlens.numel() < 1:
        raise ValueError("get_mla_metadata: cache_seqlens must hold at least one request")
    if num_heads_k != 1:
        raise ValueError(f"get_mla_metadata: num_heads_k must be 1 (MLA), got {num_heads_k}")
    if not isinstance(num_q_tokens_per_head_k, int) or num_q_tokens_per_head_k < 1:
        raise ValueError(
            "get_mla_metadata: num_q_tokens_per_head_k (s_q * h_q // h_kv) must be a positive "
            f"int, got {num_q_tokens_per_head_k!r}"
        )
    dev = cache_seqlens.device
    if num_sms is None:
        num_sms = _device_sms(dev.index or 0) if dev.type == "cuda" else 132
    parts = num_sm_parts(num_sms, num_q_tokens_per_head_k, num_heads_k)
    if dev.type == "cuda" and metadata_on_device():
        return device_metadata(cache_seqlens, parts)
    seqlens = cache_seqlens.tolist()
    if min(seqlens) < 0:
        raise ValueError("get_mla_metadata: cache_seqlens must be >= 0")
    rows, splits = sched_meta(seqlens, parts)
    return (
        torch.tensor(rows, dtype=torch.int32, device=dev),
        torch.tensor(splits, dtype=torch.int32, device=dev),
    )


def device_metadata(cache_seqlens: torch.Tensor, parts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`get_mla_metadata`'s tensors for ``parts`` parts, computed on cache_seqlens'
    device with no host sync (its values are not checked here; the decode kernels guard
    them)."""
    seqlens = cache_seqlens.contiguous()
    meta = torch.empty((parts, META_INTS), dtype=torch.int32, device=seqlens.device)
    splits = torch.empty((seqlens.numel() + 1,), dtype=torch.int32, device=seqlens.device)
    _metadata_exec()(seqlens, meta, splits)
    return meta, splits


@public_op("flash_mla_with_kvcache", mutates_args=("out", "lse", "out_accum", "lse_accum"))
def _flash_mla_op(
    out: torch.Tensor,
    lse: torch.Tensor,
    out_accum: torch.Tensor,
    lse_accum: torch.Tensor,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    tile_scheduler_metadata: torch.Tensor,
    num_splits: torch.Tensor,
    softmax_scale: float,
    causal: bool,
) -> None:
    """Unchecked launch (``flash_mla_with_kvcache`` checks): out ``(batch, s_q, h_q, 512)``,
    lse ``(batch, s_q, h_q)`` fp32, out_accum ``(total splits, s_q * h_q, 512)`` and lse_accum
    ``(total splits, s_q * h_q)`` fp32 scratch (total splits >= num_splits[-1]); q
    ``(batch, s_q, h_q, 576)`` contiguous; k_cache ``(num_blocks, 64, 1, 576)`` contiguous.
    The split-KV schedule and combine are those :func:`switches` names."""
    outputs = (out, lse, out_accum, lse_accum)
    inputs = (q, k_cache, block_table, cache_seqlens, tile_scheduler_metadata, num_splits)
    launch(switches()[0], outputs, inputs, softmax_scale, causal)


def compiled_kernels(variant, q, causal, combine=None) -> tuple:
    """(decode, combine): the compiled split-KV kernel of ``variant`` and the combine kernel
    ``combine`` (default: the one :func:`switches` names) for q ``(batch, s_q, h_q, 576)``."""
    _, s_q, h_q, _ = q.shape
    dtype = _DTYPES[q.dtype]
    decode = _decode_exec(variant, dtype, h_q, s_q, bool(causal) and s_q > 1)
    return decode, _combine_exec(dtype, h_q, s_q, combine or switches()[1])


def launch(variant, outputs, inputs, softmax_scale, causal, launchers=None):
    """The op's two launches with the split-KV kernel of ``variant`` (benchmarks and tests
    time and check each variant through this; the op passes the selected one): ``outputs``
    are the op's (out, lse, out_accum, lse_accum), ``inputs`` its (q, k_cache, block_table,
    cache_seqlens, tile_scheduler_metadata, num_splits); ``launchers``: (decode, combine)
    taking the kernels' arguments (a plan's launchers), else :func:`compiled_kernels`."""
    decode, combine = launchers or compiled_kernels(variant, inputs[0], causal)
    decode_args, combine_args = kernel_args(outputs, inputs, softmax_scale)
    decode(*decode_args)
    combine(*combine_args)


def kernel_args(outputs, inputs, softmax_scale) -> tuple[tuple, tuple]:
    """The decode and combine kernels' arguments: the op's tensors viewed as the kernels'
    (batch, s_q * h_q, ...) rows. ValueError where q or k_cache cannot be viewed so (not
    contiguous), before any launch."""
    out, lse, out_accum, lse_accum = outputs
    q, k_cache, *tables = inputs
    batch, s_q, h_q, _ = q.shape
    rows = s_q * h_q
    try:
        q_rows, k_rows = q.view(batch, rows, D_QK), k_cache.view(-1, D_QK)
    except RuntimeError as e:
        raise ValueError(f"flash_mla_with_kvcache: q and k_cache must be contiguous ({e})") from e
    viewed = (out.view(batch, rows, D_V), lse.view(batch, rows), out_accum, lse_accum)
    return unviewed_args(viewed, (q_rows, k_rows, *tables), softmax_scale)


def unviewed_args(outputs, inputs, softmax_scale) -> tuple[tuple, tuple]:
    """:func:`kernel_args` with the op's tensors as they are: what launchers bound with
    them ``as_called`` (``host.direct_launcher``) take."""
    out, lse, out_accum, lse_accum = outputs
    q, k_cache, block_table, cache_seqlens, tile_scheduler_metadata, num_splits = inputs
    decode_args = (q, k_cache, block_table, cache_seqlens, tile_scheduler_metadata)
    decode_args += (num_splits, out_accum, lse_accum, out, lse, float(softmax_scale) * _LOG2E)
    return decode_args, (num_splits, out_accum, lse_accum, out, lse)


_LOG2E = 1.4426950408889634


def _fail(name: str, msg: str):
    raise ValueError(f"flash_mla_with_kvcache: {name} {msg}")


def check_args(q, k_cache, block_table, cache_seqlens, head_dim_v, meta, num_splits):
    """Validate every argument's shape, dtype and device (ValueError naming it, CUDA last so
    CPU tests reach every check); reads no tensor value (no device-to-host copy)."""
    tensors = {
        "q": q,
        "k_cache": k_cache,
        "block_table": block_table,
        "cache_seqlens": cache_seqlens,
        "tile_scheduler_metadata": meta,
        "num_splits": num_splits,
    }
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            _fail(name, f"must be a torch.Tensor, got {type(t).__name__}")
    if head_dim_v != D_V:
        _fail("head_dim_v", f"must be {D_V}, got {head_dim_v!r}")
    if q.dim() != 4 or q.shape[3] != D_QK:
        _fail("q", f"must be (batch, s_q, h_q, {D_QK}) (head dim {D_QK}), got {tuple(q.shape)}")
    if q.dtype not in _DTYPES:
        _fail("q", f"dtype must be bfloat16 or float16, got {q.dtype}")
    batch, s_q, h_q, _ = q.shape
    if batch < 1 or s_q < 1 or h_q < 1:
        _fail("q", f"must have batch, s_q, h_q >= 1, got {tuple(q.shape)}")
    if k_cache.dim() != 4 or k_cache.shape[1] != PAGE or k_cache.shape[2] != 1:
        _fail(
            "k_cache",
            f"must be (num_blocks, {PAGE}, 1, {D_QK}) (page size {PAGE}, one KV head), "
            f"got {tuple(k_cache.shape)}",
        )
    if k_cache.shape[3] != D_QK:
        _fail("k_cache", f"head dim must be {D_QK}, got {k_cache.shape[3]}")
    if k_cache.dtype != q.dtype:
        _fail("k_cache", f"dtype {k_cache.dtype} must equal q's dtype {q.dtype}")
    if k_cache.shape[0] < 1:
        _fail("k_cache", "must hold at least one block")
    if block_table.dtype != torch.int32 or block_table.dim() != 2:
        _fail(
            "block_table", f"must be an int32 (batch, max_blocks) tensor, got {block_table.dtype}"
        )
    if block_table.shape[0] != batch or block_table.shape[1] < 1:
        _fail("block_table", f"must be ({batch}, max_blocks >= 1), got {tuple(block_table.shape)}")
    if cache_seqlens.dtype != torch.int32 or tuple(cache_seqlens.shape) != (batch,):
        _fail(
            "cache_seqlens",
            f"must be int32 of shape ({batch},), got {cache_seqlens.dtype} "
            f"{tuple(cache_seqlens.shape)}",
        )
    if meta.dtype != torch.int32 or meta.dim() != 2 or meta.shape[1] != META_INTS:
        _fail("tile_scheduler_metadata", "must be the int32 (parts, 8) tensor of get_mla_metadata")
    if num_splits.dtype != torch.int32 or tuple(num_splits.shape) != (batch + 1,):
        _fail("num_splits", f"must be the int32 ({batch + 1},) tensor of get_mla_metadata")
    dev = q.device
    for name, t in tensors.items():
        if t.device != dev:
            _fail(name, f"must be on {dev}, got {t.device}")
    if not q.is_contiguous():
        _fail("q", "must be contiguous")
    if not k_cache.is_contiguous():
        _fail("k_cache", "must be contiguous")
    for name in ("block_table", "cache_seqlens", "tile_scheduler_metadata", "num_splits"):
        if not tensors[name].is_contiguous():
            _fail(name, "must be contiguous")
    num_blocks = k_cache.shape[0]
    if num_blocks * PAGE * D_QK >= 2**62:
        _fail("k_cache", "is too large")
    if max(q.numel(), block_table.numel()) >= 2**31:
        _fail("q", "and block_table must each hold fewer than 2**31 elements")
    if meta.shape[0] < 1:
        _fail("tile_scheduler_metadata", "must hold at least one part")
    if (batch + meta.shape[0]) * s_q * h_q * D_V >= 2**31:
        _fail("q", "is too large: the split accumulators would hold 2**31 elements or more")
    for name in ("q", "k_cache"):  # TMA/cp.async 16-byte copies (a FakeTensor has no address)
        t = tensors[name]
        if type(t) is torch.Tensor and t.data_ptr() % 16:
            _fail(
                name, f"must be 16-byte aligned (a view at an offset is not); pass {name}.clone()"
            )
    if dev.type != "cuda":
        _fail("q", "must be a CUDA tensor")


def op_outputs(q: torch.Tensor, parts: int) -> tuple[torch.Tensor, ...]:
    """The op's (out, lse, out_accum, lse_accum) for q and ``parts`` scheduler parts."""
    batch, s_q, h_q, _ = q.shape
    rows = s_q * h_q
    out = torch.empty((batch, s_q, h_q, D_V), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, s_q, h_q), dtype=torch.float32, device=q.device)
    # a request has at most one split per part it crosses: batch + parts bounds the total
    # (as upstream's out_accum) without reading num_splits[-1] on the host
    out_accum = torch.empty((batch + parts, rows, D_V), dtype=torch.float32, device=q.device)
    lse_accum = torch.empty((batch + parts, rows), dtype=torch.float32, device=q.device)
    return out, lse, out_accum, lse_accum


_PLANS: dict = {}  # per call signature
_FAST: dict = {}  # per (q, k_cache) shape: plans whose launchers check every tensor exactly
_sig = host.signature


def _plan(inputs: tuple, head_dim_v: int, causal: bool) -> Callable:
    """The checked launch of one call signature, ``plan(inputs, softmax_scale)``; the
    switches are part of the key (a test may read them again between calls)."""
    key = (*switches(), head_dim_v, causal, *map(_sig, inputs))
    return host.lookup(_PLANS, key, _resolve, inputs, head_dim_v, causal)


def _resolve(inputs: tuple, head_dim_v: int, causal: bool) -> Callable:
    check_args(*inputs[:4], head_dim_v, *inputs[4:])
    variant = switches()[0]
    kernels = compiled_kernels(variant, inputs[0], causal)
    # both kernels bound now to this signature's exact shapes (direct launchers), taking the
    # op's tensors unviewed; such a plan checks every tensor of a later call itself, so the
    # op may reuse it by q's shape
    outputs = op_outputs(inputs[0], inputs[4].shape[0])
    bindings = zip(kernels, kernel_args(outputs, inputs, 1.0), unviewed_args(outputs, inputs, 1.0))
    launchers = [host.direct_launcher(k, *args, as_called=called) for k, args, called in bindings]
    exact = all(launchers)
    if not exact:
        launchers = list(map(host.bound_on_first_call, kernels))

    def plan(inputs, softmax_scale):
        outputs = op_outputs(inputs[0], inputs[4].shape[0])
        if exact:  # no views: the launchers take the tensors as they are
            decode_args, combine_args = unviewed_args(outputs, inputs, softmax_scale)
            launchers[0](*decode_args)
            launchers[1](*combine_args)
        else:
            launch(variant, outputs, inputs, softmax_scale, causal, launchers)
        return outputs[:2]

    return host.kernel_checked(plan) if exact else plan


def flash_mla_with_kvcache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    head_dim_v: int,
    tile_scheduler_metadata: torch.Tensor,
    num_splits: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashMLA dense decode: ``(out (batch, s_q, h_q, 512), lse (batch, h_q, s_q) fp32)``."""
    inputs = (q, k_cache, block_table, cache_seqlens, tile_scheduler_metadata, num_splits)
    scale = float(D_QK**-0.5 if softmax_scale is None else softmax_scale)
    if host.plain_call(*inputs):
        # checked once per call signature, launched without the dispatcher (core.host)
        key = (q.shape, q.dtype, k_cache.shape, head_dim_v, bool(causal), switches())
        plan_args = (inputs, head_dim_v, bool(causal))
        out, lse = host.run(_FAST, key, (inputs, scale), _plan, *plan_args)
    else:
        check_args(*inputs[:4], head_dim_v, *inputs[4:])
        outputs = op_outputs(q, tile_scheduler_metadata.shape[0])
        torch.ops.tirx_kernels.flash_mla_with_kvcache(*outputs, *inputs, scale, bool(causal))
        out, lse = outputs[:2]
    return out, lse.transpose(1, 2).contiguous()
