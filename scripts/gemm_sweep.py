# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Sweep the basic GEMM's tile configs against cuBLAS on the H200 (refits _gemm_schedule).

    python scripts/gemm_sweep.py OUT.json [--shapes 256x8192x8192,1024x1024x1024]
        [--configs 128x256,64x128] [--dtype bfloat16] [--layout NT] [--timer proton]
        [--budget-s 500]
    python scripts/gemm_sweep.py OUT.json --grid [--grid-nk 4096x4096,1024x1024]
        [--grid-m 1,16,3000] [--dtype bfloat16] [--layout NT] [--budget-s 420]
    python scripts/gemm_sweep.py --grid --list-configs [--grid-nk ...]   # no GPU needed

``--grid``: the op's own dispatch (``gemm_config``, the config the op would run) against
cuBLAS on every M of ``GRID_M`` x (N, K) of ``GRID_NK``: one bench call per point (cold L2,
no cooldown, one round) after checking the output against cuBLAS's. Writes
``{"kind": "gemm_grid", "dtype", "layout", "timer", "device", "rows": [{"M", "N", "K",
"config": [bm, bn, split], "us", "cublas_us", "ratio", "tflops", "cublas_tflops",
"max_abs_err"} or {..., "error"}]}``, rewritten after every point, and a line per point.
It compiles one kernel per (N, K, config) the dispatch picks on the grid (``--list-configs``
prints them: 25 for the whole bf16 grid at 132 SMs), each 5-20 s, so run it in chunks of
(N, K) pairs (``--grid-nk``) that each fit a device call; ``--budget-s`` stops starting new
(N, K) pairs past it. ``scripts/gemm_grid_plot.py`` renders the JSON files as a heat map.

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
GRID_M = (1, 16, 64, 128, 256, 512, 1024, 3000, 4096, 8192)
# (N, K): Llama-3 8B / 70B projections (qkv/o, up/gate, down) and a small square
GRID_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 8192), (1024, 1024))


def _triple(text):
    m, n, k = (int(v) for v in text.lower().split("x"))
    return m, n, k


def _pairs(text):
    return [tuple(int(v) for v in p.lower().split("x")) for p in text.split(",")]


def grid_configs(nks, ms, num_sms=132):
    """{(N, K): [configs the op's dispatch picks over ``ms``, first use order]}; no GPU."""
    from tirx_kernels.basic._gemm_schedule import pick_config

    out = {}
    for N, K in nks:
        picks = [pick_config(M, N, K, num_sms) for M in ms]
        out[(N, K)] = sorted(set(picks), key=picks.index)
    return out


def run_grid(args, nks, ms):
    """Time the op's dispatch against cuBLAS on ``ms`` x ``nks`` (module docstring)."""
    import torch

    from tirx_kernels.basic.gemm import compiled_gemm, gemm_config, launch_gemm
    from tirx_kernels.basic.kernels import gemm as kernel
    from tirx_kernels.core import toolchain

    rows = []
    doc = {
        "kind": "gemm_grid",
        "dtype": args.dtype,
        "layout": args.layout,
        "timer": args.timer,
        "device": torch.cuda.get_device_name(0),
        "sms": toolchain.sm_count(0),
        "rows": rows,
    }
    start = time.monotonic()
    for N, K in nks:
        if time.monotonic() - start > args.budget_s:
            print(f"budget: stopped before N={N} K={K}", flush=True)
            doc["stopped_before"] = [N, K]
            break
        for M in ms:
            row = {"M": M, "N": N, "K": K}
            rows.append(row)
            if args.layout[0] == "T" and M % 8:
                row["error"] = f"layout {args.layout} stores a as (K, M): needs M % 8 == 0"
                continue
            try:
                cfg = gemm_config(M, N, K)
                row["config"] = list(cfg)
                t0 = time.monotonic()
                compiled_gemm(N, K, args.dtype, cfg, "", args.layout)
                row["compile_s"] = round(time.monotonic() - t0, 2)  # ~0 once cached
                a, b, c = kernel.prepare_data(M, N, K, args.dtype, layout=args.layout)
                ref = torch.matmul(a, b.t())
                launch_gemm(a, b, c, cfg)
                torch.cuda.synchronize()
                row["max_abs_err"] = float((c.float() - ref.float()).abs().max())
                if not row["max_abs_err"] <= 2 * kernel.tolerance(K, args.dtype):
                    raise RuntimeError("mismatch vs cuBLAS")

                def build_cublas(a=a, b=b, ref=ref):
                    out, bt = torch.empty_like(ref), b.t()
                    return lambda: torch.matmul(a, bt, out=out)

                res = toolchain.bench(
                    {"tirx": lambda a=a, b=b, c=c, cfg=cfg: launch_gemm(a, b, c, cfg)},
                    references={"cublas": build_cublas},
                    timer=args.timer,
                    cooldown_s=0.0,
                )
                ours, cublas = res["impls"].get("tirx"), res["impls"].get("cublas")
                if res.get("errors"):
                    row["bench_errors"] = {k: str(v)[:300] for k, v in res["errors"].items()}
                if ours and cublas:
                    flops = 2.0 * M * N * K
                    row.update(
                        us=ours,
                        cublas_us=cublas,
                        ratio=cublas / ours,
                        tflops=flops / ours / 1e6,
                        cublas_tflops=flops / cublas / 1e6,
                    )
            except Exception as exc:  # one bad point must not hide the rest
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                a = b = c = ref = None
            if "ratio" in row:
                print(
                    f"{M}x{N}x{K} {args.layout} bm{cfg.bm}_bn{cfg.bn}_s{cfg.split}: "
                    f"{row['us']:9.2f} us {row['tflops']:7.1f} TFLOP/s  cuBLAS "
                    f"{row['cublas_us']:9.2f} us  cuBLAS/ours {row['ratio']:.3f}",
                    flush=True,
                )
            else:
                print(f"{M}x{N}x{K}: ERROR {row.get('error', row.get('bench_errors'))}", flush=True)
            with open(args.out, "w") as f:  # rewritten per point: a timeout keeps what finished
                json.dump(doc, f, indent=1)
        torch.cuda.empty_cache()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--shapes", help="comma-separated MxNxK")
    ap.add_argument(
        "--configs", help="comma-separated bmxbn or bmxbnxsplit (default: every candidate)"
    )
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--layout", default="NT", choices=("NT", "NN", "TN", "TT"))
    ap.add_argument("--timer", default="proton")
    ap.add_argument("--budget-s", type=float, default=500.0)
    ap.add_argument("--grid", action="store_true", help="the dispatch vs cuBLAS M x (N, K) grid")
    ap.add_argument("--grid-nk", help="comma-separated NxK pairs (default: all of GRID_NK)")
    ap.add_argument("--grid-m", help="comma-separated M values (default: GRID_M)")
    ap.add_argument(
        "--list-configs", action="store_true", help="print the grid's compiles and exit"
    )
    args = ap.parse_args(argv)
    if args.grid or args.list_configs:
        nks = _pairs(args.grid_nk) if args.grid_nk else list(GRID_NK)
        ms = [int(m) for m in args.grid_m.split(",")] if args.grid_m else list(GRID_M)
        if args.list_configs:
            plan = grid_configs(nks, ms)
            for (N, K), configs in plan.items():
                names = " ".join(f"{c.bm}x{c.bn}x{c.split}" for c in configs)
                print(f"N={N} K={K}: {len(configs)} compiles: {names}")
            print(f"total: {sum(len(c) for c in plan.values())} compiles ({args.dtype})")
            return 0
        if not args.out:
            ap.error("the grid needs OUT.json")
        return run_grid(args, nks, ms)
    if not args.out:
        ap.error("the sweep needs OUT.json")

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
        a, b, _ = kernel.prepare_data(M, N, K, args.dtype, layout=args.layout)
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
                compiled_gemm(N, K, args.dtype, cfg, "", args.layout)
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
            json.dump(
                {
                    "dtype": args.dtype,
                    "layout": args.layout,
                    "timer": args.timer,
                    "shapes": results,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
