# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""RMSNorm, ``y = x * rsqrt(mean(x^2) + eps) * w`` over the last dim: the kernel module.

The public op is ``tirx_kernels.basic.norm.rmsnorm``, registered as
``torch.ops.tirx_kernels.basic_rmsnorm``; the kernel, its numerics and domain are in
``_rmsnorm_tirx``, the schedule in ``_rmsnorm_schedule``, measurements in docs/rmsnorm.md.
run_test checks the op against fp32 torch (and FlashInfer when installed); run_bench times
the compiled kernel beside torch ``F.rms_norm`` and FlashInfer.
"""

from __future__ import annotations

import torch

from tirx_kernels.basic._rmsnorm_tirx import make_rmsnorm
from tirx_kernels.basic.norm import compiled_rmsnorm, rmsnorm
from tirx_kernels.core import testing

KERNEL_META = {
    "name": "rmsnorm",
    "category": "basic",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "RMSNorm over the last dim, bf16/fp16 in/out, fp32 accumulation",
    "dtypes": ["bfloat16", "float16"],
}

PUBLIC_OPS = ("basic_rmsnorm",)

CONFIGS = [
    {"label": "bf16_t4113_h128", "dtype": "bfloat16", "batch": 4113, "hidden": 128},
    {"label": "bf16_t4113_h1000", "dtype": "bfloat16", "batch": 4113, "hidden": 1000},
    {"label": "bf16_t7_h2048", "dtype": "bfloat16", "batch": 7, "hidden": 2048},
    {"label": "bf16_t1_h4096", "dtype": "bfloat16", "batch": 1, "hidden": 4096},
    {"label": "bf16_t4113_h4096", "dtype": "bfloat16", "batch": 4113, "hidden": 4096},
    {"label": "bf16_t4113_h5120", "dtype": "bfloat16", "batch": 4113, "hidden": 5120},
    {"label": "bf16_t4096_h8192", "dtype": "bfloat16", "batch": 4096, "hidden": 8192},
    {"label": "bf16_t1_h16384", "dtype": "bfloat16", "batch": 1, "hidden": 16384},
    {"label": "fp16_t4113_h128", "dtype": "float16", "batch": 4113, "hidden": 128},
    {"label": "fp16_t1_h4096", "dtype": "float16", "batch": 1, "hidden": 4096},
    {"label": "fp16_t4096_h5120", "dtype": "float16", "batch": 4096, "hidden": 5120},
    {"label": "fp16_t4113_h8192", "dtype": "float16", "batch": 4113, "hidden": 8192},
    {"label": "fp16_t4113_h16384", "dtype": "float16", "batch": 4113, "hidden": 16384},
]

_BENCH_BATCHES = [1, 16, 128, 4113, 16384]

BENCH_CONFIGS = (
    [
        {"label": f"bf16_t{b}_h{h}", "dtype": "bfloat16", "batch": b, "hidden": h}
        for h in [4096, 8192]
        for b in _BENCH_BATCHES
    ]
    + [
        {"label": f"bf16_t{b}_h5120", "dtype": "bfloat16", "batch": b, "hidden": 5120}
        for b in [128, 16384]
    ]
    + [{"label": "bf16_t8192_h8192", "dtype": "bfloat16", "batch": 8192, "hidden": 8192}]
)


def get_kernel(hidden, dtype="bfloat16", eps=1e-6, **_):
    """The PrimFunc for ``hidden`` and ``dtype``; the batch is dynamic (ignored here)."""
    return make_rmsnorm(hidden, dtype, eps)


def prepare_data(batch, hidden, dtype="bfloat16", seed=0, **_):
    """X with a per-row scale (so a row mix-up shows), W around 1, Y pre-filled with NaN."""
    tdtype = testing.torch_dtype(dtype)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    scale = torch.exp(torch.randn(batch, 1, device="cuda", generator=gen))
    x = (torch.randn(batch, hidden, device="cuda", generator=gen) * scale).to(tdtype)
    w = (1.0 + 0.5 * torch.randn(hidden, device="cuda", generator=gen)).to(tdtype)
    y = torch.full_like(x, float("nan"))
    return x, w, y


def reference(x, w, eps=1e-6):
    """fp32 RMSNorm of the (rounded) inputs."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def tolerance(dtype):
    """One output rounding: |err| <= 1/2 ulp <= 2^-8 (bf16) / 2^-11 (fp16) relative. fp32
    sums in a different order can flip a tie, so allow one full ulp, plus an absolute floor
    for fp16 subnormals."""
    return {"rtol": 2.0**-7 if dtype == "bfloat16" else 2.0**-10, "atol": 1e-6}


def run_test(batch, hidden, dtype="bfloat16", eps=1e-6, **_):
    """The public op vs fp32 torch, and vs FlashInfer's rmsnorm when it is installed."""
    testing.skip_unless_gpu(KERNEL_META)
    x, w, y = prepare_data(batch, hidden, dtype)
    rmsnorm(x, w, eps, out=y)
    torch.cuda.synchronize()
    testing.assert_close("rmsnorm vs torch fp32", y, reference(x, w, eps), **tolerance(dtype))
    if testing.available("flashinfer.norm"):
        import flashinfer

        want = flashinfer.norm.rmsnorm(x, w, eps)
        testing.assert_close("rmsnorm vs flashinfer", y, want, **tolerance(dtype))


def run_bench(
    batch,
    hidden,
    dtype="bfloat16",
    eps=1e-6,
    *,
    warmup=None,
    repeat=None,
    timer=None,
    rounds=1,
    cooldown_s=1.0,
    **_,
):
    """Kernel time (us) of ours, torch ``F.rms_norm`` and FlashInfer.

    Without FlashInfer installed, its builder's ImportError makes the bench report that
    reference as skipped, with the reason.
    """
    launch = compiled_rmsnorm(hidden, dtype, eps)
    x, w, y = prepare_data(batch, hidden, dtype)

    def build_torch():
        return lambda: torch.nn.functional.rms_norm(x, (hidden,), w, eps)

    def build_flashinfer():
        import flashinfer

        out = torch.empty_like(x)
        flashinfer.norm.rmsnorm(x, w, eps, out=out)  # JIT outside the timing
        return lambda: flashinfer.norm.rmsnorm(x, w, eps, out=out)

    references = {"torch": build_torch, "flashinfer": build_flashinfer}
    return testing.bench(
        lambda: launch(x, w, y),
        references,
        warmup=warmup,
        repeat=repeat,
        timer=timer,
        rounds=rounds,
        cooldown_s=cooldown_s,
    )


def public_calls(batch):
    """Our rmsnorm and torch's on ``batch`` rows of 4096 (per-call cost)."""
    x, w, y = prepare_data(batch, 4096)
    return {
        "tirx": lambda: rmsnorm(x, w, out=y),
        "torch": lambda: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6),
    }
