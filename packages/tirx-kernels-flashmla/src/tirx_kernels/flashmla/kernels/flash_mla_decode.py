# This file is a TIRx port of code from FlashMLA
# (https://github.com/deepseek-ai/FlashMLA @ 9241ae3ef9bac614dd25e45e507e089f888280e0),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Dense MLA decode over a paged KV cache (``flash_mla_decode``): the kernel contract.

Port of FlashMLA's sm90 dense decode (FlashMLA @ 9241ae3e: ``csrc/sm90/decode/dense/``,
``csrc/smxx/decode/``, ``csrc/api/dense_decode.h``, ``flash_mla/flash_mla_interface.py``).
q ``(batch, s_q, h_q, 576)``, k_cache ``(num_blocks, 64, 1, 576)`` with V = its first 512
dims, block_table and cache_seqlens int32; out ``(batch, s_q, h_q, 512)``, lse
``(batch, h_q, s_q)`` fp32. The public API, numerics and dispatch domain are in
:mod:`tirx_kernels.flashmla.decode`, the kernels in ``_mla_decode_tirx``, the tile scheduler
in ``_mla_decode_schedule``; design notes in docs/mla_decode.md.

Configs: ``s_k`` is the length of every request, or with ``varlen`` the mean of ragged
lengths that include 1, 63, 64, 65 and non-multiples of 64 (and are >= s_q with causal);
block tables are shuffled, unused entries hold an out-of-range index and unused cache rows
NaN (as FlashMLA's test), which the kernels must never read. ``badpages`` configs also put
out-of-range entries (negative, ``num_blocks``, huge) among the used ones, give one request
a table row of bad entries only and make request 0 longer than its table row: the kernels
guard these on the device (a token is attended only if its block is inside the table and
its entry inside the cache), and the reference applies the same rule. run_test goes through the
public API and compares out and lse with a torch fp32 reference that gathers the pages, at
FlashMLA's tolerances (out: abs 8e-4 + rel 2.01/128 against the reference rounded to the
dtype; lse: abs 1e-6 + rel 8.01/65536). run_bench times the op (metadata precomputed, no
argument checks) with the selected variant as ``tirx`` and every other variant as
``tirx_<variant>`` (``$TIRX_FLASHMLA_VARIANT``, docs/mla_decode.md) beside FlashMLA's
(``sgl-flash-mla``) and FlashInfer's MLA where installed, with each one's KV-cache GB/s;
run_test checks every variant.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import warnings

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.protocol import BENCH_OPTIONS
from tirx_kernels.core.testing import (
    assert_close,
    available,
    bench_calls,
    skip_unless_gpu,
)

from .._mla_combine_tirx import make_combine, make_combine_warp_rows
from .._mla_decode_schedule import COMBINES, variants_to_check
from .._mla_decode_tirx import D_QK, D_V, PAGE
from ..decode import (
    DECODE_FACTORIES,
    compiled_kernels,
    flash_mla_with_kvcache,
    get_mla_metadata,
    launch,
    op_outputs,
    switches,
)

KERNEL_META = {
    "name": "flash_mla_decode",
    "category": "flashmla",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "Dense MLA decode over a paged KV cache, split-KV + combine (FlashMLA port)",
}

PUBLIC_OPS = ("flash_mla_with_kvcache",)

CONFIGS = [
    {
        "label": "bf16_h128_sq1_b4_sk1024",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 1,
        "batch": 4,
        "s_k": 1024,
        "varlen": False,
        "causal": False,
    },
    {
        "label": "bf16_h128_sq1_b9_sk700_var",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 1,
        "batch": 9,
        "s_k": 700,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "fp16_h128_sq1_b5_sk1000_var",
        "dtype": "float16",
        "h_q": 128,
        "s_q": 1,
        "batch": 5,
        "s_k": 1000,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "bf16_h64_sq1_b6_sk500_var",
        "dtype": "bfloat16",
        "h_q": 64,
        "s_q": 1,
        "batch": 6,
        "s_k": 500,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "fp16_h64_sq1_b3_sk129",
        "dtype": "float16",
        "h_q": 64,
        "s_q": 1,
        "batch": 3,
        "s_k": 129,
        "varlen": False,
        "causal": False,
    },
    {
        "label": "bf16_h16_sq1_b7_sk300_var",
        "dtype": "bfloat16",
        "h_q": 16,
        "s_q": 1,
        "batch": 7,
        "s_k": 300,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "fp16_h16_sq1_b2_sk1",
        "dtype": "float16",
        "h_q": 16,
        "s_q": 1,
        "batch": 2,
        "s_k": 1,
        "varlen": False,
        "causal": False,
    },
    {
        "label": "bf16_h16_sq2_b5_sk400_var_causal",
        "dtype": "bfloat16",
        "h_q": 16,
        "s_q": 2,
        "batch": 5,
        "s_k": 400,
        "varlen": True,
        "causal": True,
    },
    {
        "label": "bf16_h16_sq2_b3_sk200_var",
        "dtype": "bfloat16",
        "h_q": 16,
        "s_q": 2,
        "batch": 3,
        "s_k": 200,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "fp16_h64_sq2_b4_sk600_var_causal",
        "dtype": "float16",
        "h_q": 64,
        "s_q": 2,
        "batch": 4,
        "s_k": 600,
        "varlen": True,
        "causal": True,
    },
    {
        "label": "bf16_h128_sq2_b3_sk777_var_causal",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 2,
        "batch": 3,
        "s_k": 777,
        "varlen": True,
        "causal": True,
    },
    {
        "label": "fp16_h128_sq2_b2_sk65",
        "dtype": "float16",
        "h_q": 128,
        "s_q": 2,
        "batch": 2,
        "s_k": 65,
        "varlen": False,
        "causal": False,
    },
    {
        "label": "bf16_h128_sq1_b64_sk4096_var",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 1,
        "batch": 64,
        "s_k": 4096,
        "varlen": True,
        "causal": False,
    },
    {
        "label": "bf16_h128_sq1_b2_sk8191",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 1,
        "batch": 2,
        "s_k": 8191,
        "varlen": False,
        "causal": False,
    },
    {
        "label": "bf16_h128_sq1_b8_sk600_var_badpages",
        "dtype": "bfloat16",
        "h_q": 128,
        "s_q": 1,
        "batch": 8,
        "s_k": 600,
        "varlen": True,
        "causal": False,
        "badpages": True,
    },
    {
        "label": "fp16_h16_sq2_b6_sk300_var_causal_badpages",
        "dtype": "float16",
        "h_q": 16,
        "s_q": 2,
        "batch": 6,
        "s_k": 300,
        "varlen": True,
        "causal": True,
        "badpages": True,
    },
    {
        "label": "bf16_h64_sq1_b5_sk2000_badpages",
        "dtype": "bfloat16",
        "h_q": 64,
        "s_q": 1,
        "batch": 5,
        "s_k": 2000,
        "varlen": False,
        "causal": False,
        "badpages": True,
    },
]


# (h_q, s_q, batch, s_k, causal) of the bf16 bench rows: the grid at h_q 128
# (DeepSeek-V3 at TP 1), then TP 8 (h_q 16, memory-bound) and MTP (s_q 2, causal)
_BENCH_ROWS = [
    *((128, 1, b, s_k, False) for b in (16, 64, 128) for s_k in (1024, 4096, 8192)),
    (16, 1, 64, 8192, False),
    (16, 1, 128, 8192, False),
    (128, 2, 64, 4096, True),
]

BENCH_CONFIGS = [
    {
        "label": f"bf16_h{h_q}_sq{s_q}_b{batch}_sk{s_k}" + ("_causal" if causal else ""),
        "dtype": "bfloat16",
        "h_q": h_q,
        "s_q": s_q,
        "batch": batch,
        "s_k": s_k,
        "varlen": False,
        "causal": causal,
    }
    for h_q, s_q, batch, s_k, causal in _BENCH_ROWS
] + [  # what a user's call costs (public_calls' shape), eager and replayed from a CUDA graph
    {"label": f"op_b{batch}_{mode}", "batch": batch, "mode": mode}
    for batch in (1, 16)
    for mode in ("eager", "graph")
]

OUT_TOLS = {"atol": 8e-4, "rtol": 2.01 / 128}  # FlashMLA's tests/test_flash_mla_dense_decoding.py
LSE_TOLS = {"atol": 1e-6, "rtol": 8.01 / 65536}
_UNUSED_BLOCK = 2147480000  # what FlashMLA's test writes into unused block-table entries


def get_kernel(dtype="bfloat16", h_q=128, s_q=1, causal=False, **_):
    """The split-KV decode kernel of every variant (``VARIANTS``: each compiles for every
    config; only the one ``$TIRX_FLASHMLA_VARIANT`` names, as run_test and run_bench then
    launch only it) and both combine kernels of this (dtype, h_q, s_q, causal)."""
    causal = causal and s_q > 1
    decode = [DECODE_FACTORIES[v](dtype, h_q, s_q, causal) for v in variants_to_check()]
    return [*decode, make_combine(dtype, h_q, s_q), make_combine_warp_rows(dtype, h_q, s_q)]


def seqlens_of(batch, s_k, varlen, s_q=1, causal=False, seed=0):
    """Request lengths: all ``s_k``, or ragged around ``s_k`` with the edge cases first."""
    if not varlen:
        return [s_k] * batch
    rng = random.Random(seed + batch * 7919 + s_k)
    edges = [1, 63, 64, 65, 2 * s_k + 3]
    out = [
        edges[i] if i < len(edges) else max(int(rng.normalvariate(s_k, s_k / 2)), 1)
        for i in range(batch)
    ]
    return [max(s, s_q) if causal else s for s in out]


def prepare_data(
    dtype="bfloat16",
    h_q=128,
    s_q=1,
    batch=4,
    s_k=1024,
    varlen=False,
    causal=False,
    badpages=False,
    on_device=False,
    **_,
):
    """(q, k_cache, block_table, cache_seqlens) on the GPU, deterministic: generated by a CPU
    generator (the same data on every machine), or with ``on_device`` by a CUDA generator
    (the same on every GPU of a kind; for benchmarks of big caches)."""
    seqlens = seqlens_of(batch, s_k, varlen, s_q, causal)
    seed = 1234 + batch + s_k + h_q + s_q
    g = torch.Generator().manual_seed(seed)
    dev = "cuda" if on_device else "cpu"
    gk = torch.Generator(device="cuda").manual_seed(seed) if on_device else g
    tdt = getattr(torch, dtype)
    max_blocks = -(-max(seqlens) // 256) * 256 // PAGE
    if badpages:
        seqlens[0] = PAGE * max_blocks + 37  # longer than its table row
    q = (torch.randn(batch, s_q, h_q, D_QK, generator=g) / 10).clamp_(-1, 1)
    n = batch * max_blocks
    table = torch.randperm(n, generator=g).to(torch.int32).view(batch, max_blocks)
    k = (torch.randn(n, PAGE, 1, D_QK, generator=gk, device=dev) / 10).clamp_(-1, 1).to(tdt)
    for b, s in enumerate(seqlens):
        s = min(s, PAGE * max_blocks)
        used = -(-s // PAGE)
        k[table[b, used:].long()] = float("nan")
        if s % PAGE:
            k[int(table[b, used - 1]), s % PAGE :] = float("nan")
        table[b, used:] = _UNUSED_BLOCK
    if badpages:
        bad = [-1, n, n + 5, _UNUSED_BLOCK, -(2**31)]
        for b, s in enumerate(seqlens):
            used = min(-(-s // PAGE), max_blocks)
            if b == 3:
                table[b, :used] = -3  # nothing of this request is in the cache
            elif used:
                table[b, (7 * b) % used] = bad[b % len(bad)]
    cache_seqlens = torch.tensor(seqlens, dtype=torch.int32)
    return q.to(tdt).cuda(), k.cuda(), table.cuda(), cache_seqlens.cuda()


def attended(block_table_row, num_blocks, s_k):
    """(clamped page of each block, token mask) of one request: token t < s_k is attended iff
    its block is inside the table row and its entry in ``[0, num_blocks)``."""
    nblk = min(-(-s_k // PAGE), block_table_row.shape[0])
    entries = block_table_row[:nblk].long()
    ok = (entries >= 0) & (entries < num_blocks)
    tok_ok = ok.repeat_interleave(PAGE)[:s_k]
    return torch.where(ok, entries, 0), tok_ok


def reference(q, k_cache, block_table, cache_seqlens, causal=False, softmax_scale=None):
    """torch fp32: per request gather its pages, softmax(scale q k^T) v over the attended
    tokens (:func:`attended`); a row with nothing to attend gets out 0 and lse +inf.
    Returns (out fp32 (b, s_q, h_q, 512), lse (b, h_q, s_q))."""
    b, s_q, h_q, d = q.shape
    scale = softmax_scale if softmax_scale is not None else d**-0.5
    out = torch.zeros(b, s_q, h_q, D_V, dtype=torch.float32, device=q.device)
    lse = torch.full((b, h_q, s_q), math.inf, dtype=torch.float32, device=q.device)
    for i, s_len in enumerate(cache_seqlens.tolist()):
        pages, tok_ok = attended(block_table[i], k_cache.shape[0], s_len)
        s_k = tok_ok.shape[0]  # s_len cut at the end of the table row
        kv = k_cache[pages].reshape(-1, d)[:s_k].float()  # (s_k, 576)
        kv = torch.where(tok_ok[:, None], kv, 0.0)
        qi = q[i].float().transpose(0, 1)  # (h_q, s_q, 576)
        w = qi @ kv.T * scale  # (h_q, s_q, s_k)
        w = w.masked_fill(~tok_ok, -math.inf)
        if causal and s_q > 1:
            tok = torch.arange(s_k, device=q.device)
            lim = s_len - s_q + torch.arange(s_q, device=q.device)
            w = w.masked_fill(tok[None, :] > lim[:, None], -math.inf)
        li = torch.logsumexp(w, dim=-1)  # (h_q, s_q)
        oi = torch.softmax(w, dim=-1) @ kv[:, :D_V]
        lonely = torch.isneginf(li)
        oi[lonely] = 0.0
        li[lonely] = math.inf
        out[i] = oi.transpose(0, 1)
        lse[i] = li
    return out, lse


def compare(out, lse, want_out, want_lse):
    """assert_close of out (against the reference rounded to out's dtype) and lse at
    FlashMLA's tolerances; an lse of +inf (nothing attended) must match exactly."""
    both = torch.isposinf(lse) & torch.isposinf(want_lse)
    return {
        "max_err_out": assert_close("out", out, want_out.to(out.dtype), **OUT_TOLS),
        "max_err_lse": assert_close(
            "lse", lse.masked_fill(both, 0.0), want_lse.masked_fill(both, 0.0), **LSE_TOLS
        ),
    }


def run_test(**config):
    """The selected variant through the public API, then every other variant (``VARIANTS``;
    none when ``$TIRX_FLASHMLA_VARIANT`` names one) through the op's launch; each against the
    reference (a failure names its variant). ``config``: :func:`prepare_data`'s keywords."""
    skip_unless_gpu(KERNEL_META)
    q, k_cache, table, seqlens = prepare_data(**config)
    _, s_q, h_q, _ = q.shape
    causal = config.get("causal", False)
    badpages = config.get("badpages", False)
    meta, splits = get_mla_metadata(seqlens, s_q * h_q, 1)
    want_out, want_lse = reference(q, k_cache, table, seqlens, causal)
    chosen = switches()[0]
    report = {"splits": int(splits[-1]), "parts": int(meta.shape[0]), "variant": chosen}
    for variant in variants_to_check():
        if variant == chosen:
            out, lse = flash_mla_with_kvcache(
                q, k_cache, table, seqlens, D_V, meta, splits, causal=causal
            )
        else:
            outputs = op_outputs(q, meta.shape[0])
            inputs = (q, k_cache, table, seqlens, meta, splits)
            launch(variant, outputs, inputs, D_QK**-0.5, causal)
            out, lse = outputs[0], outputs[1].transpose(1, 2)
        torch.cuda.synchronize()
        try:
            errs = compare(out, lse, want_out, want_lse)
        except AssertionError as e:
            raise AssertionError(f"variant {variant}: {e}") from e
        report.update({f"{k}_{variant}": v for k, v in errs.items()})
        if variant == chosen:
            report.update(errs)
    # the other combine kernel behind the chosen split-KV kernel
    for combine in (c for c in COMBINES if c != switches()[1]):
        outputs = op_outputs(q, meta.shape[0])
        inputs = (q, k_cache, table, seqlens, meta, splits)
        launchers = compiled_kernels(chosen, q, causal, combine)
        launch(chosen, outputs, inputs, D_QK**-0.5, causal, launchers)
        torch.cuda.synchronize()
        try:
            errs = compare(outputs[0], outputs[1].transpose(1, 2), want_out, want_lse)
        except AssertionError as e:
            raise AssertionError(f"combine {combine}: {e}") from e
        report.update({f"{k}_{combine}_combine": v for k, v in errs.items()})
    # FlashMLA's own result, reported (the check is the reference); it has no page guards
    if not badpages and available("flash_mla"):
        import flash_mla

        try:
            ref_meta, _ = flash_mla.get_mla_metadata()
            fo, fl = flash_mla.flash_mla_with_kvcache(
                q, k_cache, table, seqlens, D_V, ref_meta, None, causal=causal, use_legacy=True
            )
            report["max_err_out_flashmla"] = float((out.float() - fo.float()).abs().max())
            report["max_err_lse_flashmla"] = float((lse - fl).abs().nan_to_num(0.0).max())
        except Exception as e:  # a reference that fails is reported, never our failure
            report["flashmla_error"] = f"{type(e).__name__}: {e}"[:200]
    return report


def public_calls(batch):
    """Our public op and FlashMLA's (``use_legacy=True``) on ``batch`` requests of 1024
    tokens (bf16, h_q 128, s_q 1), each with its scheduler metadata made once, as a serving
    step makes it once for all its layers."""
    q, k_cache, table, seqlens = prepare_data("bfloat16", 128, 1, batch, 1024, on_device=True)
    meta, splits = get_mla_metadata(seqlens, 128, 1)
    args = (q, k_cache, table, seqlens, D_V)
    calls = {"tirx": lambda: flash_mla_with_kvcache(*args, meta, splits)}
    if available("flash_mla"):
        import flash_mla

        ref_meta, _ = flash_mla.get_mla_metadata()  # filled by the first call
        calls["flash_mla"] = lambda: flash_mla.flash_mla_with_kvcache(
            *args, ref_meta, None, use_legacy=True
        )
    return calls


def run_bench(
    dtype="bfloat16", h_q=128, s_q=1, batch=64, s_k=4096, varlen=False, causal=False, **options
):
    """Times the op with the selected variant as ``tirx`` and every other variant as
    ``tirx_<variant>`` (none when ``$TIRX_FLASHMLA_VARIANT`` names one; the op's launches;
    metadata precomputed, no argument checks), beside FlashMLA (``flash_mla``,
    ``use_legacy=True``) and FlashInfer's MLA (``BatchMLAPagedAttentionWrapper``, backend
    ``fa3``) where they are installed: one run compares them. ``result["kv_gbps"]`` is each
    one's KV-cache bytes (every request's tokens, read once) per second, in GB/s, the
    memory-bound rows' measure. The data is generated on the GPU (the big configs' caches
    take seconds on a CPU). With ``mode`` (eager | graph) it times :func:`public_calls`
    instead (core.testing.bench_calls)."""
    mode = options.pop("mode", "kernel")
    if mode != "kernel":
        return bench_calls(public_calls(batch), mode, **options)
    q, k_cache, table, seqlens = prepare_data(
        dtype, h_q, s_q, batch, s_k, varlen, causal, on_device=True
    )
    meta, splits = get_mla_metadata(seqlens, s_q * h_q, 1)
    op = torch.ops.tirx_kernels.flash_mla_with_kvcache
    scale = D_QK**-0.5
    chosen = switches()[0]

    def ours(variant):
        outputs = op_outputs(q, meta.shape[0])
        inputs = (q, k_cache, table, seqlens, meta, splits)
        if variant == chosen:
            return functools.partial(op, *outputs, *inputs, scale, causal)
        return functools.partial(launch, variant, outputs, inputs, scale, causal)

    def other_combine(combine):
        """A builder: the chosen split-KV kernel behind combine kernel ``combine``."""
        launchers = compiled_kernels(chosen, q, causal, combine)
        outputs = op_outputs(q, meta.shape[0])
        inputs = (q, k_cache, table, seqlens, meta, splits)
        return functools.partial(launch, chosen, outputs, inputs, scale, causal, launchers)

    funcs = {"tirx": ours(chosen)}
    funcs.update({f"tirx_{v}": ours(v) for v in variants_to_check()[1:]})

    def build_flashmla():
        import flash_mla

        ref_meta, _ = flash_mla.get_mla_metadata()

        def launch_ref():
            flash_mla.flash_mla_with_kvcache(
                q, k_cache, table, seqlens, D_V, ref_meta, None, causal=causal, use_legacy=True
            )

        launch_ref()  # first call builds the scheduler metadata
        return launch_ref

    refs = {"flash_mla": build_flashmla} if available("flash_mla") else {}
    for combine in (c for c in COMBINES if c != switches()[1]):  # the other combine
        refs[f"tirx_{combine}_combine"] = functools.partial(other_combine, combine)
    if available("flashinfer"):
        args = (q, k_cache, table, seqlens, scale, causal)
        refs["flashinfer_fa3"] = functools.partial(_flashinfer_mla, *args)
    chosen_opts = {key: value for key, value in options.items() if key in BENCH_OPTIONS}
    result = toolchain.bench(funcs, references=refs, **chosen_opts)
    result["variant"] = chosen
    kv_bytes = sum(seqlens.tolist()) * D_QK * k_cache.element_size()
    result["kv_gbps"] = {
        name: kv_bytes / (us * 1e3) for name, us in (result.get("impls_us") or {}).items()
    }
    return result


def _flashinfer_mla(q, k_cache, table, seqlens, scale, causal):
    """A launch of FlashInfer's MLA decode (backend ``fa3``) on the same paged cache: CSR
    page lists from the block table, q and the cache split into their 512 + 64 dims."""
    import flashinfer

    batch, s_q, h_q, _ = q.shape
    pages = [-(-n // PAGE) for n in seqlens.tolist()]
    dev = q.device
    kv_indptr = torch.tensor([0, *itertools.accumulate(pages)], dtype=torch.int32, device=dev)
    kv_indices = torch.cat([table[b, :n] for b, n in enumerate(pages)])
    qo_indptr = torch.arange(0, (batch + 1) * s_q, s_q, dtype=torch.int32, device=dev)
    workspace = torch.empty(128 << 20, dtype=torch.int8, device=dev)
    wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(workspace, backend="fa3")
    rows, cache = q.view(-1, h_q, D_QK), k_cache.view(-1, PAGE, D_QK)
    args = (rows[..., :D_V], rows[..., D_V:], cache[..., :D_V], cache[..., D_V:])
    with warnings.catch_warnings():  # its flat metadata and split tensors are deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        wrapper.plan(
            qo_indptr,
            kv_indptr,
            kv_indices,
            seqlens,
            h_q,
            D_V,
            D_QK - D_V,
            PAGE,
            causal,
            scale,
            q.dtype,
            k_cache.dtype,
        )
        wrapper.run(*args)  # builds its module and warns once, outside the timing
    return lambda: wrapper.run(*args)
