# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Where the host time of one eager rmsnorm call goes, ours and FlashInfer's, layer by layer
(needs a GPU and FlashInfer):

    python packages/tirx-kernels-flashinfer/scripts/launch_cost.py [--tokens 1 4 16] [--json OUT]

Eager host µs per call (``tirx_kernels.core.overhead``, launches queued back to back, the
layers' rounds taken in turns) of: our public function; its plan lookup alone (the signature
key and the dict, no launch); the plan alone (tvm-ffi, the generated host function, the
launch); FlashInfer's public function; its JIT module's function alone, with and without PDL.
Ours minus FlashInfer's, split this way, says whether the gap is our Python or the launch path
(``docs/overhead.md``).
"""

from __future__ import annotations

import argparse
import json

import torch

from tirx_kernels.core import overhead
from tirx_kernels.flashinfer import norm

EPS = 1e-6


def layers(tokens: int, hidden: int = 4096) -> dict:
    import flashinfer

    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(hidden, dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(x)
    plan = norm._rmsnorm_plan(0.0, out, x, w)
    module = flashinfer.norm.get_norm_module()
    return {
        "ours": lambda: norm.rmsnorm(x, w, out=out),
        "ours_plan_lookup": lambda: norm._rmsnorm_plan(0.0, out, x, w),
        "ours_plan": lambda: plan(out, x, w, EPS),
        "flashinfer": lambda: flashinfer.rmsnorm(x, w, out=out),
        "flashinfer_module_pdl": lambda: module.rmsnorm(out, x, w, EPS, True),
        "flashinfer_module": lambda: module.rmsnorm(out, x, w, EPS, False),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args(argv)
    rows = []
    print("| tokens | layer | eager host µs |\n|---|---|---|")
    for tokens in args.tokens:
        for name, result in overhead.measure(layers(tokens), graphs=False).items():
            rows.append({"tokens": tokens, "layer": name, **result})
            us = result["eager_host_us"]
            print(f"| {tokens} | {name} | {result['error'] or f'{us:.2f}'} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
