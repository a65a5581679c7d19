# This file is a TIRx port of code from FlashAttention
# (https://github.com/Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced),
# Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file.
# SPDX-License-Identifier: Apache-2.0 AND BSD-3-Clause
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Attention forward (``flash_attn_fwd``): the kernel contract.

Port of FlashAttention-3's Hopper forward (FlashAttention @ 0251105a:
``hopper/flash_fwd_kernel_sm90.h``, ``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``,
``hopper/softmax.h``, ``hopper/mask.h``, ``hopper/flash_attn_interface.py``).
``out = softmax(q k^T * scale) v`` and ``lse`` per (batch, head), bf16/fp16 in and out, fp32
softmax and accumulation; MHA/GQA/MQA; causal bottom-right aligned. The public op and its
domain are in :mod:`tirx_kernels.flashattention.attention`, the kernel in
``_attention_tirx``, tile sizes in ``_attention_schedule``; design notes in
docs/flash_attn_fwd.md.

run_test checks out against a torch fp32 reference with FlashAttention's rule (the error is at
most twice that of the same reference computed in the input dtype, plus a small atol) and lse
against an fp32 logsumexp. run_bench times our op beside torch SDPA (cuDNN and FLASH
backends) and, when installed, FlashInfer's FA3 prefill.
"""

from __future__ import annotations

import contextlib
import math

import torch

from tirx_kernels.core.testing import available, bench, randn, skip_unless_gpu

from .._attention_schedule import pick_schedule
from .._attention_tirx import make_flash_fwd, needs_counter
from ..attention import flash_attn_func, launch_args

KERNEL_META = {
    "name": "flash_attn_fwd",
    "category": "flashattention",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "attention forward with lse, MHA/GQA/MQA, causal (FlashAttention-3 port)",
}

PUBLIC_OPS = ("flashattention_fwd",)


# (dtype, d, dv) -> rows (label, batch, seqlen_q, seqlen_k, heads_q, heads_kv, masks); a
# row with masks (False, True) is two configs, the causal one labelled ``<label>_causal``
_TESTS = {
    ("bfloat16", 128, 128): [
        ("bf16_b1_h2_s128_d128", 1, 128, 128, 2, 2, (False, True)),
        ("bf16_b2_h8_hk2_sq333_sk517_d128", 2, 333, 517, 8, 2, (False, True)),
        ("bf16_b1_h4_sq517_sk333_d128", 1, 517, 333, 4, 4, (True,)),
    ],
    ("float16", 128, 128): [("fp16_b3_h4_s257_d128", 3, 257, 257, 4, 4, (True,))],
    ("bfloat16", 64, 64): [
        ("bf16_b1_h4_hk1_sq1_sk1_d64", 1, 1, 1, 4, 1, (False,)),
        ("bf16_b1_h4_hk1_sq1_sk777_d64", 1, 1, 777, 4, 1, (True,)),
    ],
    ("float16", 64, 64): [
        ("fp16_b2_h4_s1000_d64", 2, 1000, 1000, 4, 4, (True,)),
        ("fp16_b2_h6_hk3_sq129_sk255_d64", 2, 129, 255, 6, 3, (False,)),
    ],
    ("bfloat16", 256, 256): [("bf16_b1_h2_s200_d256", 1, 200, 200, 2, 2, (True,))],
    ("bfloat16", 192, 128): [("bf16_b1_h2_s200_d192_dv128", 1, 200, 200, 2, 2, (False,))],
}
_BENCHES = {
    ("bfloat16", 128, 128): [
        ("bf16_b1_h32_s8192_d128", 1, 8192, 8192, 32, 32, (False, True)),
        ("bf16_b16_h32_s1024_d128", 16, 1024, 1024, 32, 32, (False, True)),
        ("bf16_b4_h32_s4096_d128", 4, 4096, 4096, 32, 32, (False, True)),
        ("bf16_b4_h32_hk8_s4096_d128", 4, 4096, 4096, 32, 8, (False, True)),
    ],
    ("bfloat16", 64, 64): [("bf16_b1_h32_s8192_d64", 1, 8192, 8192, 32, 32, (False, True))],
    ("bfloat16", 256, 256): [("bf16_b1_h16_s8192_d256", 1, 8192, 8192, 16, 16, (False, True))],
    ("bfloat16", 192, 128): [
        ("bf16_b4_h16_s4096_d192_dv128", 4, 4096, 4096, 16, 16, (False, True))
    ],
}
_MATRIX = [
    (
        kind,
        dict(
            label=f"{name}_causal" if causal else name,
            dtype=dtype,
            batch=b,
            seqlen_q=sq,
            seqlen_k=sk,
            heads_q=hq,
            heads_kv=hk,
            d=d,
            dv=dv,
            causal=causal,
        ),
    )
    for kind, table in (("test", _TESTS), ("bench", _BENCHES))
    for dtype, d, dv in table
    for name, b, sq, sk, hq, hk, masks in table[dtype, d, dv]
    for causal in masks
]
CONFIGS = [config for kind, config in _MATRIX if kind == "test"]
BENCH_CONFIGS = [config for kind, config in _MATRIX if kind == "bench"]


def get_kernel(dtype, heads_q, heads_kv, d, dv, causal, **_):
    """The kernel of every batch and sequence length of these heads (sizes are launch
    arguments)."""
    return make_flash_fwd(heads_q, heads_kv, d, dv, dtype, causal, pick_schedule(d, dv, causal))


def prepare_data(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv, **_):
    seed = batch * 1000003 + seqlen_q * 1009 + seqlen_k * 17 + d
    return {
        "q": randn((batch, seqlen_q, heads_q, d), dtype, seed=seed),
        "k": randn((batch, seqlen_k, heads_kv, d), dtype, seed=seed + 1),
        "v": randn((batch, seqlen_k, heads_kv, dv), dtype, seed=seed + 2),
    }


def reference(q, k, v, softmax_scale, causal, upcast=True):
    """(out, lse) of softmax(q k^T * scale) v; in fp32 (``upcast``) or in q's dtype (the
    products and P V rounded as a 16-bit implementation would, softmax in fp32), the way
    FlashAttention's tests build the tolerance. Rows that see no key: out 0, lse -inf."""
    dt = torch.float32 if upcast else q.dtype
    hq, hk = q.shape[2], k.shape[2]
    qt = q.to(dt).transpose(1, 2)  # (b, h, sq, d)
    kt = k.to(dt).repeat_interleave(hq // hk, dim=2).transpose(1, 2)
    vt = v.to(dt).repeat_interleave(hq // hk, dim=2).transpose(1, 2)
    scores = (qt @ kt.transpose(-1, -2)).float() * softmax_scale
    sq, sk = q.shape[1], k.shape[1]
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        scores = scores.masked_fill(j > i + (sk - sq), -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = (p.to(dt) @ vt).float().transpose(1, 2)
    return out, lse


def run_test(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv, causal):
    skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv)
    scale = d**-0.5
    out, lse = flash_attn_func(**data, softmax_scale=scale, causal=causal)
    torch.cuda.synchronize()
    check(out, lse, data, scale, causal)


def check(out, lse, data, softmax_scale, causal, reference=reference):
    """out and lse of the op on ``data`` against ``reference``'s: out by :func:`check_out`
    (fp32 and input-dtype references), lse by :func:`check_lse`."""
    want, want_lse = reference(**data, softmax_scale=softmax_scale, causal=causal)
    low, _ = reference(**data, softmax_scale=softmax_scale, causal=causal, upcast=False)
    check_out(out, want, low)
    check_lse(lse, want_lse)


def check_out(out, want, low):
    """FlashAttention's rule: max error <= 2 x that of the reference in the input dtype, plus
    twice the rounding of the output dtype at the reference's values."""
    err = (out.float() - want).abs().max().item()
    low_err = (low - want).abs().max().item()
    rounding = (want.to(out.dtype).float() - want).abs().max().item()
    bound = 2 * low_err + 2 * rounding + 1e-5
    if not err <= bound:
        raise AssertionError(
            f"flash_attn_fwd out: max error {err:.3e} > {bound:.3e} "
            f"(2 x input-dtype reference error {low_err:.3e} + rounding {rounding:.3e})"
        )


def check_lse(lse, want):
    """lse vs an fp32 logsumexp: -inf exactly where no key is seen, else within 1e-3."""
    if not torch.equal(torch.isneginf(lse), torch.isneginf(want)):
        raise AssertionError("flash_attn_fwd lse: -inf (rows without keys) in the wrong places")
    fin = torch.isfinite(want)
    if not torch.isfinite(lse[fin]).all():
        raise AssertionError("flash_attn_fwd lse: non-finite value where fp32 is finite")
    err = (lse[fin] - want[fin]).abs()
    tol = 1e-3 + 1e-4 * want[fin].abs()
    if (err > tol).any():
        raise AssertionError(f"flash_attn_fwd lse: max error {err.max().item():.3e} > 1e-3")


def run_bench(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv, causal, **options):
    data = prepare_data(dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, dv)
    q, k, v = data["q"], data["k"], data["v"]
    scale = d**-0.5
    flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)  # compile outside timing

    def ours():
        flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)

    refs = {
        "torch_sdpa_cudnn": lambda: _sdpa(q, k, v, causal, scale, "CUDNN_ATTENTION"),
        "torch_sdpa_flash": lambda: _sdpa(q, k, v, causal, scale, "FLASH_ATTENTION"),
    }
    if available("flashinfer"):
        from .. import _references

        refs["flashinfer_fa3"] = lambda: _references.batched(q, k, v, causal, scale)
    # the other tile walk beside the default: one CTA per SM walking the tiles (upstream's
    # persistent schedulers), or one CTA per tile where the walk is the default
    walks = pick_schedule(d, dv, causal, {}).persistent
    refs["tirx_tile_per_cta" if walks else "tirx_persistent"] = lambda: _launch_with(
        data, scale, causal, {"persistent": not walks}
    )
    refs["tirx_early_rescale"] = lambda: _launch_with(data, scale, causal, {"early_rescale": True})
    if d == 64:  # upstream's d 64 tiles (three consumer warpgroups), timed beside the default
        refs["tirx_bm192"] = lambda: _launch_with(data, scale, causal, {"bm": 192, "bn": 128})
        if not causal:  # 192 x 192 with P through shared memory, as upstream's non-causal
            tile = {"bm": 192, "bn": 192, "pv_smem": True}
            refs["tirx_bm192_pv_smem"] = lambda: _launch_with(data, scale, causal, tile)
    return bench(ours, refs, **options)


def _sdpa(q, k, v, causal, scale, backend=None):
    """A launch of torch SDPA on our layout's q, k, v (transposed views; it returns out
    ``(batch, heads, seqlen_q, dv)``), warmed up: with ``backend`` (an ``SDPBackend`` name)
    forced, else torch's own pick, as a user calls it."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    gqa = q.shape[2] != k.shape[2]
    chosen = getattr(SDPBackend, backend) if backend else None

    def launch():  # a context manager per call: sdpa_kernel's is single-use
        with sdpa_kernel(chosen) if chosen is not None else contextlib.nullcontext():
            return F.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal, scale=scale, enable_gqa=gqa
            )

    launch()
    return launch


def _launch_with(data, scale, causal, override):
    """A launch of our kernel on ``data`` with the schedule ``override`` (outputs discarded)."""
    q, k, v = data["q"], data["k"], data["v"]
    batch, seqlen_q, heads_q, d = q.shape
    out = q.new_empty(batch, seqlen_q, heads_q, v.shape[3])
    lse = torch.empty(batch, heads_q, seqlen_q, dtype=torch.float32, device=q.device)
    schedule = pick_schedule(d, v.shape[3], causal, override)
    kernel, tensors = launch_args(False, q, k, v, out, lse, causal, schedule)
    args = (*tensors, batch, seqlen_q, k.shape[1], scale)
    kernel(*args)  # load outside timing
    if needs_counter(schedule, causal):  # the tile counter starts at 0, as the op's does

        def launch():
            tensors[-1].zero_()
            kernel(*args)

        return launch
    return lambda: kernel(*args)


def public_calls(batch):
    """Our op on ``batch`` sequences of 128 tokens (32 heads, d128), for the per-call cost,
    beside torch SDPA (its own backend pick) and FlashInfer's FA3 where it is installed."""
    data = prepare_data("bfloat16", batch, 128, 128, 32, 32, 128, 128)
    q, k, v = data["q"], data["k"], data["v"]
    scale = 128**-0.5  # flash_attn_func's default for d 128
    calls = {
        "tirx": lambda: flash_attn_func(**data),
        "torch_sdpa": _sdpa(q, k, v, False, scale),
    }
    if available("flashinfer"):
        from .. import _references

        calls["flashinfer_fa3"] = _references.batched(q, k, v, False, scale)
    return calls
