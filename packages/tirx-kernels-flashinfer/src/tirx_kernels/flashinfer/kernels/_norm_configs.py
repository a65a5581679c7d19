# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The config matrices the four RMSNorm kernel modules share (``rmsnorm``, ``gemma_rmsnorm``,
``fused_add_rmsnorm``, ``gemma_fused_add_rmsnorm``), for the ports of upstream's
``include/flashinfer/norm.cuh`` kernels, and the public-op rows (``OP_ROWS``) every kernel of
the family benches. Literals only: the registry reads them from the
source, never importing it (``from ._norm_configs import NORM_CONFIGS`` in a kernel module).
"""

# Correctness and bench matrices of rmsnorm, gemma_rmsnorm and both fused_add variants
# (dtype, tokens, hidden): LLM hidden sizes incl. 5120/11008, odd token counts, batch 1.
_TEST_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 7, 2048),
    ("bfloat16", 16, 16384),
    ("bfloat16", 127, 5120),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 8192),
    ("float16", 33, 4096),
    ("float16", 2047, 11008),
    ("bfloat16", 1025, 16384),  # fused add: late weight at 1024 threads
    ("float16", 8195, 1000),  # tail lanes in every row, late weight at 128 threads, R = 2
    ("bfloat16", 8193, 2048),  # RMSNorm: a row per warp, the last CTA's second warp idle
    ("bfloat16", 5, 111),  # upstream's gcd vectors: 1 element
    ("float16", 9000, 500),  # 4 elements, a large batch
    ("bfloat16", 3, 16383),  # 1 element, 16 per thread
]
_BENCH_SHAPES = [
    ("bfloat16", 1, 4096),
    ("bfloat16", 16, 4096),
    ("bfloat16", 1, 16384),
    ("bfloat16", 16, 8192),
    ("bfloat16", 1024, 4096),
    ("bfloat16", 4113, 11008),
    ("bfloat16", 16384, 2048),
    ("bfloat16", 16384, 4096),
    ("bfloat16", 16384, 8192),
    ("bfloat16", 16384, 16384),
    ("float16", 16384, 5120),
]
# 3D (tokens, heads, head_dim) input, RMSNorm and Gemma RMSNorm only (QK-norm, as upstream)
_QK_SHAPES = [("bfloat16", 33, 8, 128), ("float16", 1024, 40, 64), ("bfloat16", 3, 4, 100)]
_ABBR = {"bfloat16": "bf16", "float16": "fp16"}
NORM_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _TEST_SHAPES
]
NORM_BENCH_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_h{h}", "dtype": d, "tokens": t, "hidden": h}
    for d, t, h in _BENCH_SHAPES
]
# (tokens, mode) of every kernel's public-op rows: the op at decode batches, eagerly and as a
# CUDA-graph replay (config key ``mode``, run_bench's testing.bench_calls), beside FlashInfer's
OP_ROWS = [(t, m) for t in (1, 4, 16) for m in ("eager", "graph")]
NORM_OP_CONFIGS = [
    {"label": f"bf16_t{t}_h4096_{m}", "dtype": "bfloat16", "tokens": t, "hidden": 4096, "mode": m}
    for t, m in OP_ROWS
]
QK_NORM_CONFIGS = [
    {"label": f"{_ABBR[d]}_t{t}_qk{n}_h{h}", "dtype": d, "tokens": t, "heads": n, "hidden": h}
    for d, t, n, h in _QK_SHAPES
]
