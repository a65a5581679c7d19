# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Per-call cost of every public op beside its reference op, at small batches (H200).

    python scripts/op_overhead.py [--kernel NAME ...] [--family NAME ...] [--batch 1 2 4]
        [--rounds 5] [--json OUT.json]

For each installed kernel module with ``public_calls(batch)``, times each callable it returns
(ours as "tirx", each reference by name) with :mod:`tirx_kernels.core.overhead`: eager host µs
per call and CUDA-graph replay µs, in one process. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys

from tirx_kernels.core import overhead
from tirx_kernels.core.registry import Registry, UnknownKernel


def rows(kernels, batches, rounds=overhead.ROUNDS):
    for kernel in kernels:
        module = kernel.load()
        if not hasattr(module, "public_calls"):
            continue
        for batch in batches:
            print(f"# {kernel.name} batch {batch}", file=sys.stderr, flush=True)
            calls = module.public_calls(batch)
            yield kernel.name, batch, overhead.measure(calls, rounds=rounds)


def fmt(value):
    return "-" if value is None else f"{value:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", help="repeatable; default: every kernel")
    parser.add_argument("--family", action="append", help="repeatable; default: every family")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--rounds",
        type=int,
        default=overhead.ROUNDS,
        help=f"rounds per implementation, taken in turns (default {overhead.ROUNDS}); more "
        "rounds settle sub-µs differences",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    registry = Registry.load()
    try:
        kernels = registry.select(args.kernel or (), args.family or ())
    except UnknownKernel as e:  # an unknown family too
        parser.error(f"--kernel/--family: {e}")
    results = []
    print("| kernel | batch | impl | eager host µs | graph replay µs | note |")
    print("|---|---|---|---|---|---|")
    for name, batch, measured in rows(kernels, args.batch, args.rounds):
        for impl, row in measured.items():
            results.append({"kernel": name, "batch": batch, "impl": impl, **row})
            print(
                f"| {name} | {batch} | {impl} | {fmt(row['eager_host_us'])} | "
                f"{fmt(row['graph_replay_us'])} | {row['error'] or ''} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
