# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Sweep the basic GEMM's tile configs against cuBLAS on the H200 (refits _gemm_schedule).

    python scripts/gemm_sweep.py OUT.json [--shapes 256x8192x8192,1024x1024x1024]
        [--configs 128x256,64x128] [--dtype bfloat16] [--timer proton] [--budget-s 500]

For each M x N x K shape (default: the issue's table and an M grid at N = K = 8192) it times
every candidate tile config of ``_gemm_schedule.CANDIDATES`` at every split-K the model
allows there (or ``--configs`` as bm x bn or bm x bn x split) and ``torch.matmul`` into a
preallocated out (cuBLAS), in one bench call per shape (cold L2,
no cooldown, one round), after checking each config's output against cuBLAS's within twice
the kernel module's tolerance. ``*`` marks the config the op picks.
Prints one line per (shape, config) with TFLOP/s and cuBLAS/ours (> 1: ours is faster) and
writes every result to OUT.json: ``{"shapes": [{"M", "N", "K", "picked", "cublas_us",
"configs": [{"bm", "bn", "split", "us", "ratio", "max_abs_err"}]}]}``. Compiles run here (5-20 s
each, once per (N, K, config) for the whole sweep): ``--budget-s`` stops starting new shapes
past it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

SHAPES = [(256, 8192, 8192), (1024, 1024, 1024), (3000, 5120, 5120)] + [
    (m, 8192, 8192) for m in (1, 16, 64, 128, 512, 1024, 2048, 4096, 8192)
]


def _triple(text):
    m, n, k = (int(v) for v in text.lower().split("x"))
    return m, n, k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shapes", help="comma-separated MxNxK")
    ap.add_argument(
        "--configs", help="comma-separated bmxbn or bmxbnxsplit (default: every candidate)"
    )
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--timer", default="proton")
    ap.add_argument("--budget-s", type=float, default=500.0)
    args = ap.parse_args(argv)

    import torch

    from tirx_kernels.basic._gemm_schedule import CANDIDATES, TileConfig, splits
    from tirx_kernels.basic.gemm import compiled_gemm, gemm_config, launch_gemm
    from tirx_kernels.basic.kernels import gemm as kernel
    from tirx_kernels.core import toolchain

    shapes = [_triple(s) for s in args.shapes.split(",")] if args.shapes else SHAPES
    forced = (
        [TileConfig(*(int(v) for v in c.split("x"))) for c in args.configs.split(",")]
        if args.configs
        else None
    )
    start, results = time.monotonic(), []
    for M, N, K in shapes:
        if time.monotonic() - start > args.budget_s:
            print(f"budget: stopped before {M}x{N}x{K}", flush=True)
            break
        a, b, _ = kernel.prepare_data(M, N, K, args.dtype)
        ref = torch.matmul(a, b.t())
        tol = kernel.tolerance(K, args.dtype)
        picked = gemm_config(M, N, K)
        configs = forced or [
            s for c in CANDIDATES for s in splits(c, M, N, K, toolchain.sm_count(0))
        ]
        row = {"M": M, "N": N, "K": K, "picked": list(picked), "configs": []}
        flops, funcs, entries = 2.0 * M * N * K, {}, {}
        for cfg in configs:
            name = f"bm{cfg.bm}_bn{cfg.bn}_s{cfg.split}"
            entry = entries[name] = {"bm": cfg.bm, "bn": cfg.bn, "split": cfg.split}
            row["configs"].append(entry)
            try:
                compiled_gemm(N, K, args.dtype, cfg)
                c = torch.empty(M, N, dtype=a.dtype, device="cuda")
                launch_gemm(a, b, c, cfg)
                torch.cuda.synchronize()
                entry["max_abs_err"] = float((c.float() - ref.float()).abs().max())
                if not entry["max_abs_err"] <= 2 * tol:  # vs cuBLAS: both round once
                    raise RuntimeError(f"mismatch vs cuBLAS (tol {2 * tol:.3g})")
            except Exception as exc:  # one bad config must not hide the rest
                entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"{M}x{N}x{K} {name}: ERROR {entry['error']}", flush=True)
                continue
            funcs[name] = lambda cfg=cfg, c=c, a=a, b=b: launch_gemm(a, b, c, cfg)

        def build_cublas(a=a, b=b, ref=ref):
            out, bt = torch.empty_like(ref), b.t()
            return lambda: torch.matmul(a, bt, out=out)

        res = toolchain.bench(
            funcs, references={"cublas": build_cublas}, timer=args.timer, cooldown_s=0.0
        )
        cublas = row["cublas_us"] = res["impls"].get("cublas")
        for name, entry in entries.items():
            ours = res["impls"].get(name)
            if ours is None or cublas is None:
                continue
            entry.update(us=ours, ratio=cublas / ours)
            mark = "*" if (entry["bm"], entry["bn"], entry["split"]) == tuple(picked) else " "
            print(
                f"{M}x{N}x{K} {mark} {name}: {ours:9.2f} us {flops / ours / 1e6:7.1f} "
                f"TFLOP/s  cuBLAS {cublas:9.2f} us  cuBLAS/ours {cublas / ours:.3f}",
                flush=True,
            )
        if res.get("errors"):
            row["bench_errors"] = {k: str(v)[:300] for k, v in res["errors"].items()}
        results.append(row)
        with open(args.out, "w") as f:  # rewritten per shape: a timeout keeps what finished
            json.dump({"dtype": args.dtype, "timer": args.timer, "shapes": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
