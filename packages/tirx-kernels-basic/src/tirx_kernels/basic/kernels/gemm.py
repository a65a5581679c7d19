# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Dense GEMM ``C = A @ B^T`` for sm_90a, bf16/fp16, in four layouts: the kernel module.

The public ops are ``tirx_kernels.basic.gemm.gemm`` (``torch.ops.tirx_kernels.basic_gemm``,
``a @ b.T``) and ``tirx_kernels.basic.matmul`` (``basic_matmul``, ``a @ b``); the kernel, its
numerics, domain and schedule are in ``_gemm_tirx`` (M is a run-time argument: one compile
per (N, K, dtype, layout, tile config)), the tile config chosen per M in ``_gemm_schedule``.
A config's ``layout`` (default "NT": a (M, K), b (N, K), both contiguous) says which operands
are stored transposed (``_gemm_tirx.LAYOUTS``); ``prepare_data`` makes them as views.
run_test checks the op (``gemm`` for NT, ``matmul`` for the others) against an fp32 matmul;
run_bench times the compiled kernel the op dispatches to (or a forced ``bm``/``bn``/``split``,
for sweeps) beside ``torch.matmul`` (cuBLAS) on the same views.
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.basic._gemm_schedule import TileConfig
from tirx_kernels.basic._gemm_tirx import make_gemm
from tirx_kernels.basic.gemm import compiled_gemm, gemm, gemm_config, launch_gemm
from tirx_kernels.basic.mm import matmul
from tirx_kernels.core import testing, toolchain

KERNEL_META = {
    "name": "fp16_bf16_gemm",
    "description": "C = A @ B^T (NT, NN, TN, TT), bf16/fp16, fp32 accumulation; TMA + wgmma",
    "category": "basic",
    "archs": ["sm_90a"],
    "compute_capability": 9,
}
PUBLIC_OPS = ("basic_gemm", "basic_matmul")

# (dtype abbreviation, dtype, M, N, K): every M class of the issue (decode 1..64, skinny
# 128/256, 1000-1024, 3000, large), ragged tails in M, N and K, and both bm=64 box counts
_SHAPES = [
    ("bf16", "bfloat16", 1, 4096, 4096),
    ("bf16", "bfloat16", 16, 8192, 4096),
    ("bf16", "bfloat16", 40, 1024, 512),
    ("fp16", "float16", 64, 4096, 8192),
    ("fp16", "float16", 100, 2048, 1024),
    ("bf16", "bfloat16", 128, 8192, 8192),
    ("bf16", "bfloat16", 256, 256, 256),
    ("bf16", "bfloat16", 256, 8192, 8192),
    ("bf16", "bfloat16", 333, 520, 264),
    ("bf16", "bfloat16", 1000, 1000, 1000),
    ("fp16", "float16", 1000, 1000, 1000),
    ("bf16", "bfloat16", 1024, 1024, 1024),
    ("fp16", "float16", 2048, 2048, 2048),
    ("bf16", "bfloat16", 3000, 5120, 5120),
    ("bf16", "bfloat16", 4096, 4096, 4096),
    ("bf16", "bfloat16", 8192, 8192, 8192),
]
# (dtype_layout abbreviation, dtype, layout, M, N, K) of the other layouts: decode and ragged M
# (A (M, K) takes any M; A stored (K, M) needs M % 8 == 0: 8, 40, 200, 1000 are tails of
# the 64/128-row tiles), ragged N (520, 1000) and K (264; 260 only in TN, both MN-major),
# split-K (M <= 64, M = 1000 at N = K = 1000), the bm=64 and bm=128 A boxes, fp16
_LAYOUT_SHAPES = [
    ("bf16_nn", "bfloat16", "NN", 1, 4096, 4096),
    ("bf16_nn", "bfloat16", "NN", 333, 520, 264),
    ("fp16_nn", "float16", "NN", 1000, 1000, 1000),
    ("bf16_nn", "bfloat16", "NN", 4096, 4096, 4096),
    ("bf16_tn", "bfloat16", "TN", 8, 1024, 512),
    ("bf16_tn", "bfloat16", "TN", 200, 520, 260),
    ("fp16_tn", "float16", "TN", 1000, 1000, 1000),
    ("bf16_tt", "bfloat16", "TT", 40, 1024, 512),
    ("bf16_tt", "bfloat16", "TT", 200, 520, 264),
    ("bf16_tt", "bfloat16", "TT", 3000, 5120, 5120),
    ("bf16_nt", "bfloat16", "NT", 333, 520, 264),
]
CONFIGS = [
    {"label": f"{ab}_m{m}_n{n}_k{k}", "dtype": dt, "M": m, "N": n, "K": k}
    for ab, dt, m, n, k in _SHAPES
] + [
    {
        "label": f"{ab}_m{m}_n{n}_k{k}",
        "dtype": dt,
        "layout": lay,
        "M": m,
        "N": n,
        "K": k,
    }
    for ab, dt, lay, m, n, k in _LAYOUT_SHAPES
]

# squares; N = K = 8192 over the M classes (decode, skinny 128/256 -- the 0.77
# case at 256 --, 512, 2048); and the 1000^3-like and 3000x5120x5120 shapes
BENCH_CONFIGS = (
    [
        {"label": f"{abbr}_m{s}_n{s}_k{s}", "dtype": dt, "M": s, "N": s, "K": s}
        for abbr, dt in [("bf16", "bfloat16"), ("fp16", "float16")]
        for s in [1024, 4096, 8192]
    ]
    + [
        {"label": f"bf16_m{m}_n8192_k8192", "dtype": "bfloat16", "M": m, "N": 8192, "K": 8192}
        for m in [1, 16, 64, 128, 256, 512, 2048]
    ]
    + [
        c
        for c in CONFIGS
        if c["M"] in (1000, 3000) and c["dtype"] == "bfloat16" and "layout" not in c
    ]
    # the layouts at large M: x @ w (NN) at 4096^3, both transposed (TT) at 3000 x 5120^2
    + [
        c
        for c in CONFIGS
        if c["label"] in ("bf16_nn_m4096_n4096_k4096", "bf16_tt_m3000_n5120_k5120")
    ]
)


def _tile(M, N, K, bm=None, bn=None, split=None):
    """The op's tile config for M x N x K, with any of ``bm``/``bn``/``split`` forced."""
    picked = gemm_config(M, N, K)
    return TileConfig(bm or picked.bm, bn or picked.bn, split or picked.split)


def get_kernel(M, N, K, dtype="bfloat16", bm=None, bn=None, split=None, layout=None, **_):
    return make_gemm(N, K, dtype, _tile(M, N, K, bm, bn, split), layout=layout or "NT")


def prepare_data(M, N, K, dtype="bfloat16", seed=0, layout=None, **_):
    """A (M, K), B (N, K) ~ N(0, 1) in the dtype, as ``layout`` stores them (A "T": the
    transposed view of a contiguous (K, M); B "N": of a contiguous (K, N)); C pre-filled
    with NaN so unwritten outputs show."""
    layout = layout or "NT"
    tdtype = testing.torch_dtype(dtype)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(*((M, K) if layout[0] == "N" else (K, M)), device="cuda", generator=gen)
    b = torch.randn(*((N, K) if layout[1] == "T" else (K, N)), device="cuda", generator=gen)
    a = a.to(tdtype) if layout[0] == "N" else a.to(tdtype).t()
    b = b.to(tdtype) if layout[1] == "T" else b.to(tdtype).t()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdtype)
    return a, b, c


def reference(a, b):
    """fp32 matmul of the (exact) 16-bit inputs: the value we round from."""
    return a.float() @ b.float().t()


def tolerance(K, dtype):
    """Max abs error allowed vs the fp32 reference, for N(0, 1) inputs.

    The output rounding contributes half an ulp of |C| (|C| ~ sqrt(K) * 4 at the tails:
    2^-8 relative for bf16, 2^-11 for fp16); fp32 accumulation error is ~K * 2^-24 * |C|,
    negligible. So: 8 * sqrt(K) * (2^-8 or 2^-11) + 1e-3.
    """
    ulp = 2.0**-8 if dtype == "bfloat16" else 2.0**-11
    return 8.0 * K**0.5 * ulp + 1e-3


def run_test(M, N, K, dtype="bfloat16", layout=None):
    """The public op vs an fp32 matmul: ``gemm(a, b)`` without a layout, ``matmul(a, b.t())``
    with one; without an sm_90a GPU, compile to a cubin and skip."""
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        toolchain.compile_cubin(get_kernel(M, N, K, dtype, layout=layout))
        raise unittest.SkipTest(f"compiled to a cubin; no {KERNEL_META['archs']} GPU to run on")
    a, b, c = prepare_data(M, N, K, dtype, layout=layout)
    if layout is None:
        gemm(a, b, out=c)
    else:
        matmul(a, b.t(), out=c)
    torch.cuda.synchronize()
    tol = tolerance(K, dtype)
    what = f"fp16_bf16_gemm {dtype} {layout or 'NT'} M={M} N={N} K={K} vs fp32 matmul"
    worst = testing.assert_close(what, c, reference(a, b), atol=tol, rtol=0.0)
    return {"max_abs_err": worst, "tol": tol, "config": list(gemm_config(M, N, K))}


def run_bench(M, N, K, dtype="bfloat16", bm=None, bn=None, split=None, layout=None, **options):
    """Kernel time (us) of ours and of cuBLAS (``torch.matmul`` into a preallocated out) on
    the same operand views."""
    config = _tile(M, N, K, bm, bn, split)
    compiled_gemm(N, K, dtype, config, "", layout or "NT")  # compile before timing
    a, b, c = prepare_data(M, N, K, dtype, layout=layout)

    def build_cublas():
        out, bt = torch.empty_like(c), b.t()
        return lambda: torch.matmul(a, bt, out=out)

    return testing.bench(lambda: launch_gemm(a, b, c, config), {"cublas": build_cublas}, **options)


def public_calls(batch):
    """Our gemm and torch.matmul for ``batch`` x 4096 x 4096 (per-call cost)."""
    a, b, c = prepare_data(batch, 4096, 4096)
    return {"tirx": lambda: gemm(a, b, out=c), "torch": lambda: torch.matmul(a, b.t())}
