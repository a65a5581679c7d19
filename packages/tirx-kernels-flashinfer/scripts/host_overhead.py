# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Host µs per call of the family's public functions, on the CPU, with no kernel launched.

    python packages/tirx-kernels-flashinfer/scripts/host_overhead.py [--calls 20000]

Every compiled kernel's ``main`` is replaced by a no-op and every tensor taken as on cuda:0
(the direct path's ``is_cuda`` test aside), so what is timed is our Python host path alone
(argument checks or the plan lookup, the wrapper, the torch dispatcher for the op path),
not tvm-ffi's launch nor the GPU. Prints a
Markdown table: the eager wrapper (the direct plan launch) and the ``torch.ops`` op, at
1, 4 and 16 tokens. The H200 counterpart, with real launches and FlashInfer beside ours, is
the root ``scripts/op_overhead.py``; results of both: ``docs/overhead.md``.
"""

from __future__ import annotations

import argparse

import torch

from tirx_kernels.core import overhead, toolchain
from tirx_kernels.flashinfer import _host, activation, norm, rope


def _noop(*args):
    return None


def stub() -> None:
    _host.cuda_index = lambda where, named: 0
    _host.main_of = lambda kernel: _noop
    norm._host_kernel = lambda *key: None
    activation._compiled = lambda *key: None
    activation._stream_ctas = lambda *a: 1
    rope._compiled = lambda *key, **options: None
    toolchain.sm_count = lambda index=0: 132
    for module in (norm, activation, rope):  # the direct path for CPU tensors (is_cuda aside)
        module._direct = lambda t: type(t) is torch.Tensor and not torch.compiler.is_compiling()


def cases(tokens: int) -> dict:
    bf = torch.bfloat16
    x, w = torch.randn(tokens, 4096, dtype=bf), torch.randn(4096, dtype=bf)
    r, out = torch.randn_like(x), torch.empty_like(x)
    g, b = torch.randn(4096), torch.randn(4096)
    a, ao = torch.randn(tokens, 2 * 4096, dtype=bf), torch.empty(tokens, 4096, dtype=bf)
    q, k = torch.randn(tokens, 32, 128, dtype=bf), torch.randn(tokens, 8, 128, dtype=bf)
    pos = torch.arange(tokens, dtype=torch.int32)
    ops = torch.ops.tirx_kernels
    return {
        "rmsnorm": (
            lambda: norm.rmsnorm(x, w, out=out),
            lambda: ops.flashinfer_rmsnorm(out, x, w, 1e-6),
        ),
        "fused_add_rmsnorm": (
            lambda: norm.fused_add_rmsnorm(x, r, w),
            lambda: ops.flashinfer_fused_add_rmsnorm(x, r, w, 1e-6),
        ),
        "layernorm": (
            lambda: norm.layernorm(x, g, b),
            lambda: ops.flashinfer_layernorm(out, x, g, b, 1e-6),
        ),
        "silu_and_mul": (
            lambda: activation.silu_and_mul(a, out=ao),
            lambda: ops.flashinfer_silu_and_mul(ao, a, None),
        ),
        "apply_rope_pos_ids_inplace": (
            lambda: rope.apply_rope_pos_ids_inplace(q, k, pos),
            lambda: ops.flashinfer_apply_rope_pos_ids_inplace(q, k, pos, 128, False, 1.0, 1e4),
        ),
        "apply_rope_pos_ids": (
            lambda: rope.apply_rope_pos_ids(q, k, pos),
            lambda: ops.flashinfer_apply_rope_pos_ids(
                q, k, torch.empty_like(q), torch.empty_like(k), pos, 128, False, 1.0, 1e4
            ),
        ),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    stub()
    print("| function | tokens | wrapper µs | torch.ops op µs |")
    print("|---|---|---|---|")
    for tokens in (1, 4, 16):
        for name, (wrapper, op) in cases(tokens).items():
            us = [overhead.eager_host_us(f, args.calls) for f in (wrapper, op)]
            print(f"| {name} | {tokens} | {us[0]:.2f} | {us[1]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
