# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2023 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""RoPE with position ids, in place on q and k (``flashinfer_rope``): the kernel contract.

Port of FlashInfer's ``apply_rope_pos_ids_inplace`` path (FlashInfer @ fb28d724:
``include/flashinfer/pos_enc.cuh``, ``csrc/rope.cu``, ``flashinfer/rope.py``). The public ops,
their numerics and dispatch domain are in :mod:`tirx_kernels.flashinfer.rope`; the kernels in
``_rope_tirx``, the choice among them in ``_rope_schedule``; design notes in docs/rope.md.
run_test goes through the public ops; run_bench times the host's launch (no checks) beside
FlashInfer and a torch fp32 rotation, or (config key ``mode``) the in-place public op.
"""

from __future__ import annotations

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.testing import (
    assert_close,
    available,
    bench,
    bench_calls,
    skip_unless_gpu,
)

from .._rope_schedule import uses_walk
from .._rope_tirx import get_grid_kernel, get_walk_kernel
from ..rope import apply_rope_pos_ids, apply_rope_pos_ids_inplace, f32, launcher, rcp_f32
from ._norm_configs import OP_ROWS

KERNEL_META = {
    "name": "flashinfer_rope",
    "category": "flashinfer",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "RoPE with position ids, in place on q and k (FlashInfer port)",
}

PUBLIC_OPS = ("flashinfer_apply_rope_pos_ids_inplace", "flashinfer_apply_rope_pos_ids")

# (label, dtype, head_dim, num_q_heads, num_kv_heads, tokens, other keys): the label spells
# them (_il interleave, _i64 int64 positions, _r rotary_dim, _th rope_theta, _s rope_scale)
_BF = "bfloat16"
_FP = "float16"
_SHAPES = [
    ("bf16_d128_hq32_hk8_t1", _BF, 128, 32, 8, 1, {}),
    ("bf16_d128_hq32_hk8_t4113", _BF, 128, 32, 8, 4113, {}),
    ("bf16_d128_hq32_hk8_t4113_il", _BF, 128, 32, 8, 4113, {"interleave": True}),
    (
        "fp16_d64_hq16_hk4_t777_il_i64",
        _FP,
        64,
        16,
        4,
        777,
        {"interleave": True, "pos_dtype": "int64"},
    ),
    ("fp16_d256_hq8_hk1_t31_th1e6_s2", _FP, 256, 8, 1, 31, {"rope_theta": 1e6, "rope_scale": 2.0}),
    ("bf16_d64_hq32_hk8_t16", _BF, 64, 32, 8, 16, {}),
    ("bf16_d128_hq28_hk4_t16383_th1e6", _BF, 128, 28, 4, 16383, {"rope_theta": 1e6}),
    # 5 head steps of 8 heads: the grid kernel, its head loop (3 groups of ~14 heads)
    ("bf16_d256_hq32_hk8_t4000", _BF, 256, 32, 8, 4000, {}),
    ("bf16_d256_hq16_hk16_t1031_il", _BF, 256, 16, 16, 1031, {"interleave": True}),
    ("bf16_d512_hq8_hk2_t33", _BF, 512, 8, 2, 33, {}),
    (
        "fp16_d512_hq16_hk4_t1024_il_i64",
        _FP,
        512,
        16,
        4,
        1024,
        {"interleave": True, "pos_dtype": "int64"},
    ),
    ("bf16_d128_r64_hq32_hk8_t7", _BF, 128, 32, 8, 7, {"rotary_dim": 64}),
    # 6 threads a head: the grid kernel with idle threads, never the walk kernel
    (
        "bf16_d128_r96_hq32_hk8_t600_il",
        _BF,
        128,
        32,
        8,
        600,
        {"rotary_dim": 96, "interleave": True},
    ),
    ("fp16_d256_r16_hq8_hk8_t2048", _FP, 256, 8, 8, 2048, {"rotary_dim": 16}),
    # bench only
    ("bf16_d128_hq32_hk8_t16", _BF, 128, 32, 8, 16, {}),
    ("bf16_d128_hq32_hk8_t512", _BF, 128, 32, 8, 512, {}),
    ("bf16_d128_hq32_hk8_t16384", _BF, 128, 32, 8, 16384, {}),
    ("bf16_d128_hq32_hk8_t16384_il", _BF, 128, 32, 8, 16384, {"interleave": True}),
    ("fp16_d64_hq32_hk8_t16383", _FP, 64, 32, 8, 16383, {}),
    ("bf16_d256_hq16_hk8_t8192", _BF, 256, 16, 8, 8192, {}),
]
_BY_LABEL = {
    label: {"label": label, "dtype": dt, "head_dim": d, "num_q_heads": hq, "num_kv_heads": hk}
    | {"interleave": False, "tokens": t, **other}
    for label, dt, d, hq, hk, t, other in _SHAPES
}
CONFIGS = [_BY_LABEL[row[0]] for row in _SHAPES[:14]]
# and the in-place public op at decode batches (_norm_configs.OP_ROWS)
BENCH_CONFIGS = [_BY_LABEL[row[0]] for row in _SHAPES[:1] + _SHAPES[14:]] + [
    {"label": f"bf16_d128_hq32_hk8_t{t}_{m}", "dtype": _BF, "head_dim": 128}
    | {"num_q_heads": 32, "num_kv_heads": 8, "interleave": False, "tokens": t, "mode": m}
    for t, m in OP_ROWS
]


# Every config key and its default (run_test/run_bench/get_kernel take any subset).
DEFAULTS = {
    "dtype": "bfloat16",
    "head_dim": 128,
    "num_q_heads": 32,
    "num_kv_heads": 8,
    "interleave": False,
    "tokens": 1,
    "pos_dtype": "int32",
    "rope_scale": 1.0,
    "rope_theta": 1e4,
    "rotary_dim": None,  # None: head_dim
}


def _config(config: dict) -> tuple[dict, dict]:
    """(the config completed with DEFAULTS, the other keywords: bench options)."""
    c = {key: config.get(key, value) for key, value in DEFAULTS.items()}
    c["rotary_dim"] = c["rotary_dim"] or c["head_dim"]
    return c, {key: value for key, value in config.items() if key not in DEFAULTS}


def get_kernel(tokens=None, **config):
    """The TIRx kernel the host launches for ``tokens`` tokens (None: many)."""
    c, _ = _config(config)
    args = (c["dtype"], c["head_dim"], c["num_q_heads"], c["num_kv_heads"], c["interleave"])
    heads = c["num_q_heads"] + c["num_kv_heads"]
    make = get_walk_kernel if uses_walk(tokens, c["rotary_dim"], heads) else get_grid_kernel
    return make(*args, c["pos_dtype"], rotary_dim=c["rotary_dim"])


def prepare_data(**config):
    c, _ = _config(config)
    tokens, head_dim = c["tokens"], c["head_dim"]
    g = torch.Generator(device="cuda").manual_seed(4321 + tokens + head_dim)
    tdt = getattr(torch, c["dtype"])
    q = torch.randn(tokens, c["num_q_heads"], head_dim, generator=g, device="cuda").to(tdt)
    k = torch.randn(tokens, c["num_kv_heads"], head_dim, generator=g, device="cuda").to(tdt)
    pos = torch.randint(
        0, 4096, (tokens,), generator=g, device="cuda", dtype=getattr(torch, c["pos_dtype"])
    )
    return q, k, pos


def reference(x, pos, interleave=False, rope_scale=1.0, rope_theta=1e4, rotary_dim=None):
    """torch fp32 RoPE of x ``(nnz, H, D)`` (accurate pow / cos / sin); columns from
    ``rotary_dim`` (default D) on pass through."""
    d = rotary_dim or x.shape[-1]
    expo = torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d
    freq = torch.pow(torch.tensor(f32(1.0 / f32(rope_theta)), device=x.device), expo)
    freq = freq * f32(1.0 / f32(rope_scale))
    theta = pos.float()[:, None, None] * freq  # (nnz, 1, d/2)
    c, s = theta.cos(), theta.sin()
    xf = x.float()
    xr = xf[..., :d]
    x0, x1 = (xr[..., 0::2], xr[..., 1::2]) if interleave else xr.chunk(2, dim=-1)
    y0, y1 = x0 * c - x1 * s, x1 * c + x0 * s
    y = torch.stack((y0, y1), dim=-1).flatten(-2) if interleave else torch.cat((y0, y1), dim=-1)
    return torch.cat((y, xf[..., d:]), dim=-1)


def run_test(**config):
    skip_unless_gpu(KERNEL_META)
    c, _ = _config(config)
    q, k, pos = prepare_data(**c)
    q0, k0 = q.clone(), k.clone()
    opts = {key: c[key] for key in ("rotary_dim", "interleave", "rope_scale", "rope_theta")}
    apply_rope_pos_ids_inplace(q, k, pos, **opts)
    q_rope, k_rope = apply_rope_pos_ids(q0, k0, pos, **opts)
    torch.cuda.synchronize()
    ulp = 2**-7 if c["dtype"] == "bfloat16" else 2**-10
    # __powf's relative error (~4e-7) times positions < 4096 moves the angle by up to ~1.5e-3.
    report = {}
    for name, got, x0 in (("q", q, q0), ("k", k, k0)):
        want = reference(x0, pos, **opts)
        report[f"max_err_torch_{name}"] = assert_close(
            f"{name} vs torch fp32", got, want, atol=1.5e-2, rtol=ulp
        )
    # the out-of-place op rotates the same elements into new tensors; its inputs stay unchanged
    for name, got, want in (("q_rope", q_rope, q), ("k_rope", k_rope, k)):
        assert_close(f"{name} vs in place", got, want, atol=0.0, rtol=0.0)
    if not available("flashinfer.rope"):
        return report
    import flashinfer.rope as fr

    qf, kf = q0.clone(), k0.clone()
    fr.apply_rope_pos_ids_inplace(qf, kf, pos, **opts)
    for name, got, want in (("q", q, qf), ("k", k, kf)):  # same intrinsics: <= 1 ulp apart
        report[f"max_err_flashinfer_{name}"] = assert_close(
            f"{name} vs flashinfer", got, want, atol=1e-4, rtol=ulp
        )
    return report


def run_bench(**config):
    """The host's launch beside FlashInfer's, or (``mode`` eager | graph) the in-place public
    op (public_calls' shape: d128, 32 + 8 heads, bf16)."""
    c, options = _config(config)
    mode = options.pop("mode", "kernel")
    if mode != "kernel":
        calls = public_calls(c["tokens"])
        in_place = {name: calls[name] for name in ("tirx", "flashinfer") if name in calls}
        return bench_calls(in_place, mode, **options)
    q, k, pos = prepare_data(**c)
    opts = {key: c[key] for key in ("rotary_dim", "interleave", "rope_scale", "rope_theta")}
    sms = toolchain.sm_count(q.device.index or 0)
    shape = (c["dtype"], c["head_dim"], c["num_q_heads"], c["num_kv_heads"], c["interleave"])
    run = launcher(*shape, c["pos_dtype"], c["tokens"], sms, c["rotary_dim"])
    rs, rt = rcp_f32(c["rope_scale"]), rcp_f32(c["rope_theta"])

    def tirx():  # in place, repeated: a rotation keeps the data bounded
        run(q, k, pos, rs, rt)

    def build_flashinfer():
        import flashinfer.rope as fr

        qf, kf = q.clone(), k.clone()

        def launch():
            fr.apply_rope_pos_ids_inplace(qf, kf, pos, **opts)

        launch()  # JIT build and load outside timing
        return launch

    def build_torch():
        qt, kt = q.clone(), k.clone()

        def launch():
            for x in (qt, kt):
                x.copy_(reference(x, pos, **opts))

        return launch

    return bench(tirx, {"flashinfer": build_flashinfer, "torch": build_torch}, **options)


def public_calls(batch):
    """Our apply_rope_pos_ids_inplace and apply_rope_pos_ids, and FlashInfer's, on ``batch``
    tokens (d128, 32 + 8 heads)."""
    q, k, pos = prepare_data(tokens=batch)
    calls = {
        "tirx": lambda: apply_rope_pos_ids_inplace(q, k, pos),
        "tirx_out_of_place": lambda: apply_rope_pos_ids(q, k, pos),
    }
    if available("flashinfer.rope"):
        import flashinfer.rope as fr

        calls["flashinfer"] = lambda: fr.apply_rope_pos_ids_inplace(q, k, pos)
        calls["flashinfer_out_of_place"] = lambda: fr.apply_rope_pos_ids(q, k, pos)
    return calls
