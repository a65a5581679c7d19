# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Dense GEMM ``C = A @ B^T`` (NT) for sm_90a, bf16/fp16: the kernel module.

The public op is ``tirx_kernels.basic.gemm.gemm`` (``torch.ops.tirx_kernels.basic_gemm``);
the kernel, its numerics, domain and schedule are in ``_gemm_tirx``, the tile and stage
choices in ``_gemm_schedule``. run_test checks the op against an fp32 matmul; run_bench
times the compiled kernel beside ``torch.matmul`` (cuBLAS).
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.basic._gemm_tirx import make_gemm
from tirx_kernels.basic.gemm import compiled_gemm, gemm
from tirx_kernels.core import testing, toolchain

KERNEL_META = {
    "name": "fp16_bf16_gemm",
    "category": "basic",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "C = A @ B^T (NT), bf16/fp16 in and out, fp32 accumulation; TMA + wgmma",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS = ("basic_gemm",)

CONFIGS = [
    {"label": "bf16_m256_n256_k256", "dtype": "bfloat16", "M": 256, "N": 256, "K": 256},
    {"label": "bf16_m1024_n1024_k1024", "dtype": "bfloat16", "M": 1024, "N": 1024, "K": 1024},
    {"label": "fp16_m2048_n2048_k2048", "dtype": "float16", "M": 2048, "N": 2048, "K": 2048},
    {"label": "bf16_m4096_n4096_k4096", "dtype": "bfloat16", "M": 4096, "N": 4096, "K": 4096},
    {"label": "bf16_m8192_n8192_k8192", "dtype": "bfloat16", "M": 8192, "N": 8192, "K": 8192},
    {"label": "bf16_m1000_n1000_k1000", "dtype": "bfloat16", "M": 1000, "N": 1000, "K": 1000},
    {"label": "fp16_m1000_n1000_k1000", "dtype": "float16", "M": 1000, "N": 1000, "K": 1000},
    {"label": "bf16_m333_n520_k264", "dtype": "bfloat16", "M": 333, "N": 520, "K": 264},
    {"label": "bf16_m1_n4096_k4096", "dtype": "bfloat16", "M": 1, "N": 4096, "K": 4096},
    {"label": "bf16_m16_n8192_k4096", "dtype": "bfloat16", "M": 16, "N": 8192, "K": 4096},
    {"label": "fp16_m64_n4096_k8192", "dtype": "float16", "M": 64, "N": 4096, "K": 8192},
    {"label": "bf16_m128_n8192_k8192", "dtype": "bfloat16", "M": 128, "N": 8192, "K": 8192},
]

BENCH_CONFIGS = (
    [
        {"label": f"{abbr}_m{s}_n{s}_k{s}", "dtype": dt, "M": s, "N": s, "K": s}
        for abbr, dt in [("bf16", "bfloat16"), ("fp16", "float16")]
        for s in [1024, 4096, 8192]
    ]
    + [
        {"label": f"bf16_m{m}_n8192_k8192", "dtype": "bfloat16", "M": m, "N": 8192, "K": 8192}
        for m in [1, 16, 64, 128]
    ]
    + [
        {"label": "bf16_m1000_n1000_k1000", "dtype": "bfloat16", "M": 1000, "N": 1000, "K": 1000},
    ]
)


def get_kernel(M, N, K, dtype="bfloat16", **_):
    return make_gemm(M, N, K, dtype)


def prepare_data(M, N, K, dtype="bfloat16", seed=0, **_):
    """A, B ~ N(0, 1) in the dtype; C pre-filled with NaN so unwritten outputs show."""
    tdtype = testing.torch_dtype(dtype)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=gen).to(tdtype)
    b = torch.randn(N, K, device="cuda", generator=gen).to(tdtype)
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


def run_test(M, N, K, dtype="bfloat16"):
    """The public op vs an fp32 matmul; without an sm_90a GPU, compile to a cubin and skip."""
    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        toolchain.compile_cubin(make_gemm(M, N, K, dtype))
        raise unittest.SkipTest(f"compiled to a cubin; no {KERNEL_META['archs']} GPU to run on")
    a, b, c = prepare_data(M, N, K, dtype)
    gemm(a, b, out=c)
    torch.cuda.synchronize()
    tol = tolerance(K, dtype)
    what = f"fp16_bf16_gemm {dtype} M={M} N={N} K={K} vs fp32 matmul"
    worst = testing.assert_close(what, c, reference(a, b), atol=tol, rtol=0.0)
    return {"max_abs_err": worst, "tol": tol}


def run_bench(
    M, N, K, dtype="bfloat16", *, warmup=None, repeat=None, timer=None, rounds=1, cooldown_s=1.0
):
    """Kernel time (us) of ours and of cuBLAS (``torch.matmul`` into a preallocated out)."""
    launch = compiled_gemm(M, N, K, dtype)
    a, b, c = prepare_data(M, N, K, dtype)

    def build_cublas():
        out, bt = torch.empty_like(c), b.t()
        return lambda: torch.matmul(a, bt, out=out)

    return testing.bench(
        lambda: launch(a, b, c),
        {"cublas": build_cublas},
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )


def public_calls(batch):
    """Our gemm and torch.matmul for ``batch`` x 4096 x 4096 (per-call cost)."""
    a, b, c = prepare_data(batch, 4096, 4096)
    return {"tirx": lambda: gemm(a, b, out=c), "torch": lambda: torch.matmul(a, b.t())}
