# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``hello_add``: ``c = a + b`` elementwise; exact in every dtype (one rounding, as torch).

Domain: contiguous 1D CUDA tensors of any length, bfloat16, float16 or float32.
"""

from __future__ import annotations

from tirx_kernels.core import testing

from .. import _add_tirx
from ..elementwise import add

KERNEL_META = {
    "name": "hello_add",
    "category": "hello",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "elementwise add (the example family)",
    "dtypes": ["bfloat16", "float16", "float32"],
}

CONFIGS = [
    {"label": "bf16_n1", "dtype": "bfloat16", "n": 1},
    {"label": "fp16_n1000003", "dtype": "float16", "n": 1000003},
    {"label": "fp32_n4096", "dtype": "float32", "n": 4096},
]
BENCH_CONFIGS = [{"label": "bf16_n268435456", "dtype": "bfloat16", "n": 1 << 28}]

PUBLIC_OPS = ("hello_add",)


def get_kernel(dtype, **_):
    return _add_tirx.make_add(dtype)


def prepare_data(dtype, n):
    return {"a": testing.randn((n,), dtype, seed=n), "b": testing.randn((n,), dtype, seed=n + 1)}


def run_test(dtype, n):
    testing.skip_unless_gpu(KERNEL_META)
    data = prepare_data(dtype, n)
    want = data["a"] + data["b"]
    testing.assert_close("hello_add vs torch", add(**data), want, atol=0, rtol=0)


def run_bench(dtype, n, **options):
    data = prepare_data(dtype, n)
    out = data["a"].clone()

    def build_torch():
        return lambda: data["a"] + data["b"]

    return testing.bench(lambda: add(data["a"], data["b"], out), {"torch": build_torch}, **options)


def public_calls(batch):
    """Our op and torch's on ``batch`` elements, for the per-call cost benchmark."""
    data = prepare_data("bfloat16", batch)
    return {"tirx": lambda: add(data["a"], data["b"]), "torch": lambda: data["a"] + data["b"]}
