# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Variable-length attention forward (``flash_attn_varlen_fwd``): the kernel contract.

Port of FlashAttention-3's Hopper forward on packed sequences (FlashAttention @ 0251105a:
``hopper/flash_fwd_kernel_sm90.h``, ``hopper/seqlen.h``,
``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``, ``hopper/flash_attn_interface.py``
``flash_attn_varlen_func``). Sequence ``i`` is rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]``
of q ``(total_q, heads_q, d)`` and ``cu_seqlens_k[i]:cu_seqlens_k[i + 1]`` of k, v; out
``(total_q, heads_q, dv)``, lse ``(heads_q, total_q)``. The public op is in
:mod:`tirx_kernels.flashattention.attention`, the kernel in ``_attention_tirx``.

run_test checks out and lse per sequence against the torch fp32 reference of
``flash_attn_fwd`` (FlashAttention's tolerance rule). run_bench times our op beside torch's
``varlen_attn`` (FlashAttention-2 kernels) and, when installed, FlashInfer's FA3 ragged
batch prefill. The configs mix short and long sequences, an empty query sequence, a
sequence without keys and seqlen_q > seqlen_k.
"""

from __future__ import annotations

import torch

from tirx_kernels.core.testing import available, bench, randn, skip_unless_gpu

from .._attention_schedule import pick_schedule
from .._attention_tirx import make_flash_fwd_varlen
from ..attention import flash_attn_varlen_func
from .flash_attn_fwd import check, reference

KERNEL_META = {
    "name": "flash_attn_varlen_fwd",
    "category": "flashattention",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "packed variable-length attention forward with lse (FlashAttention-3 port)",
}

PUBLIC_OPS = ("flashattention_varlen_fwd",)

_MIXED = (4096, 512, 2048, 128, 8192, 256, 1024, 64)  # 16K tokens in 8 sequences
# (dtype, d, dv) -> rows (label, seqlens_q, seqlens_k, heads_q, heads_kv, masks); a row with
# masks (False, True) is two configs, the causal one labelled ``<label>_causal``
_TESTS = {
    ("bfloat16", 128, 128): [
        ("bf16_b4_h4_hk2_mixed_d128", (1, 130, 517, 64), (1, 300, 517, 700), 4, 2, (False, True))
    ],
    ("float16", 64, 64): [("fp16_b3_h2_empty_d64", (200, 0, 33), (150, 10, 0), 2, 2, (True,))],
    ("bfloat16", 64, 64): [
        ("bf16_b3_h4_hk1_mixed_d64", (300, 17, 129), (40, 400, 129), 4, 1, (False,))
    ],
    ("bfloat16", 256, 256): [
        ("bf16_b3_h2_mixed_d256", (77, 256, 5), (77, 300, 129), 2, 2, (True,))
    ],
    ("bfloat16", 192, 128): [
        ("bf16_b2_h2_mixed_d192_dv128", (100, 300), (250, 300), 2, 2, (False,))
    ],
}
_BENCHES = {
    ("bfloat16", 128, 128): [("bf16_b8_h32_mixed16k_d128", _MIXED, _MIXED, 32, 32, (False, True))]
}
_KEYS = ("dtype", "d", "dv", "causal", "seqlens_q", "seqlens_k", "heads_q", "heads_kv")
_MATRIX = [
    (kind, dict(zip(_KEYS, (dtype, d, dv, causal, *shape)), label=name + "_causal" * causal))
    for kind, table in (("test", _TESTS), ("bench", _BENCHES))
    for dtype, d, dv in table
    for name, *shape, masks in table[dtype, d, dv]
    for causal in masks
]
CONFIGS = [config for kind, config in _MATRIX if kind == "test"]
BENCH_CONFIGS = [config for kind, config in _MATRIX if kind == "bench"]


def get_kernel(dtype, heads_q, heads_kv, d, dv, causal, **_):
    """The kernel of every packed batch of these heads (sizes are launch arguments)."""
    schedule = pick_schedule(d, dv, causal, varlen=True)
    return make_flash_fwd_varlen(heads_q, heads_kv, d, dv, dtype, causal, schedule)


def _cu(seqlens, device):
    return torch.tensor([0, *seqlens], dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)


def prepare_data(dtype, seqlens_q, seqlens_k, heads_q, heads_kv, d, dv, device="cuda", **_):
    seed = sum(seqlens_q) * 1009 + sum(seqlens_k) * 17 + d
    return {
        "q": randn((sum(seqlens_q), heads_q, d), dtype, seed=seed, device=device),
        "k": randn((sum(seqlens_k), heads_kv, d), dtype, seed=seed + 1, device=device),
        "v": randn((sum(seqlens_k), heads_kv, dv), dtype, seed=seed + 2, device=device),
        "cu_seqlens_q": _cu(seqlens_q, device),
        "cu_seqlens_k": _cu(seqlens_k, device),
        "max_seqlen_q": max(seqlens_q),
        "max_seqlen_k": max(seqlens_k),
    }


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, upcast=True, **_):
    """(out ``(total_q, heads, dv)``, lse ``(heads, total_q)``): :func:`flash_attn_fwd.reference`
    per sequence (fp32 with ``upcast``, else in q's dtype)."""
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs, lses = [], []
    for i in range(len(cq) - 1):
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        out, lse = reference(q[None, qs], k[None, ks], v[None, ks], softmax_scale, causal, upcast)
        outs.append(out[0])
        lses.append(lse[0])
    return torch.cat(outs), torch.cat(lses, dim=1)


def run_test(dtype, seqlens_q, seqlens_k, heads_q, heads_kv, d, dv, causal):
    skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, seqlens_q, seqlens_k, heads_q, heads_kv, d, dv)
    scale = d**-0.5
    out, lse = flash_attn_varlen_func(**data, softmax_scale=scale, causal=causal)
    torch.cuda.synchronize()
    check(out, lse, data, scale, causal, reference_varlen)


def run_bench(dtype, seqlens_q, seqlens_k, heads_q, heads_kv, d, dv, causal, **options):
    data = prepare_data(dtype, seqlens_q, seqlens_k, heads_q, heads_kv, d, dv)
    scale = d**-0.5
    flash_attn_varlen_func(**data, softmax_scale=scale, causal=causal)  # compile outside timing

    def ours():
        flash_attn_varlen_func(**data, softmax_scale=scale, causal=causal)

    def build_torch_varlen():
        from torch.nn.attention.varlen import varlen_attn

        args = [data[name] for name in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")]
        sizes = (data["max_seqlen_q"], data["max_seqlen_k"])
        window = (-1, 0) if causal else (-1, -1)

        def launch():
            varlen_attn(
                *args, *sizes, scale=scale, window_size=window, enable_gqa=heads_q != heads_kv
            )

        launch()
        return launch

    refs = {"torch_varlen_attn": build_torch_varlen}
    if available("flashinfer"):
        from .. import _references

        packed = [data[name] for name in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")]
        refs["flashinfer_fa3"] = lambda: _references.ragged(*packed, causal, scale)
    return bench(ours, refs, **options)
