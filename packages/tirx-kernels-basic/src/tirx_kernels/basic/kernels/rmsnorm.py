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
}

PUBLIC_OPS = ("basic_rmsnorm",)

_SHORT = {"bfloat16": "bf16", "float16": "fp16"}

# (dtype, batch, hiddens): ragged hiddens, a row count not a multiple of the CTA rows, one row
_CONFIG_ROWS = [
    ("bfloat16", 4113, [128, 1000, 4096, 5120]),
    ("bfloat16", 7, [2048]),
    ("bfloat16", 1, [4096, 16384]),
    ("bfloat16", 4096, [8192]),
    ("float16", 4113, [128, 8192, 16384]),
    ("float16", 1, [4096]),
    ("float16", 4096, [5120]),
]

CONFIGS = [
    {"label": f"{_SHORT[d]}_t{b}_h{h}", "dtype": d, "batch": b, "hidden": h}
    for d, b, hiddens in _CONFIG_ROWS
    for h in hiddens
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


def run_bench(batch, hidden, dtype="bfloat16", eps=1e-6, **options):
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
    return testing.bench(lambda: launch(x, w, y), references, **options)


def public_calls(batch):
    """Our rmsnorm and torch's on ``batch`` rows of 4096 (per-call cost)."""
    x, w, y = prepare_data(batch, 4096)
    return {
        "tirx": lambda: rmsnorm(x, w, out=y),
        "torch": lambda: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6),
    }
