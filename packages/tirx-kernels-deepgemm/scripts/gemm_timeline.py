# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Where the normal FP8 GEMM's time goes, tile by tile (needs an sm_90a GPU).

    python packages/tirx-kernels-deepgemm/scripts/gemm_timeline.py
        [--shapes 4096x4096x4096 4096x7168x7168 128x4096x4096] [--json OUT.json]

Runs the timeline build (``make_gemm_1d2d(timeline=True)``: thread 0 of each warpgroup
marks each tile, a consumer's wait for each K block's slot and its epilogue, the producer's
loads of each tile) of the layout and options the op picks for each shape, and prints the
median µs per tile of each phase, the consumers' waits summed per tile (a starved main
loop), and how much of the kernel's span the CTAs spend outside any tile. The marks cost a
little each (a fenced store): compare phases, not the total, with the plain kernel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from tirx_kernels.core.sm90 import timeline

PRODUCER = 0  # the warpgroup that loads; the others compute


def breakdown(spans, names) -> dict:
    """Per-tile medians (µs) of a run's spans: each event's, ``waits_per_tile`` (a consumer
    tile's K-block waits summed), ``main_loop`` (a consumer tile less its epilogue) and
    :func:`~tirx_kernels.core.sm90.timeline.occupancy` over the consumers' tiles."""
    by_name = timeline.by_event(spans, names)
    out = {name: statistics.median(s.us for s in group) for name, group in by_name.items()}
    tiles = [s for s in by_name["tile"] if s.group != PRODUCER]
    waits = [sum(w.us for w in inside) for _, inside in timeline.nested(tiles, by_name["wait"])]
    epilogues = {(e.cta, e.group, e.end_ns): e.us for e in by_name["epilogue"]}
    main = [t.us - epilogues.get((t.cta, t.group, t.end_ns), 0.0) for t in tiles]
    out["waits_per_tile"] = statistics.median(waits) if waits else None
    out["main_loop"] = statistics.median(main) if main else None
    out.update(timeline.occupancy(spans, tiles))
    return out


def run_shape(M, N, K):
    import torch

    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm import _gemm_1d2d_tirx, fp8_gemm
    from tirx_kernels.deepgemm._gemm_schedule import multicast, num_sms, pick_normal_layout
    from tirx_kernels.deepgemm._quant import sfa_rows
    from tirx_kernels.deepgemm.kernels.fp8_gemm_nt import prepare_data

    a, sfa, b, sfb, d = prepare_data(M, N, K)
    sms = num_sms()
    bm, bn, cluster, multicast_a = pick_normal_layout(M, N, K, sms, multicast())
    kernel = _gemm_1d2d_tirx.make_gemm_1d2d(
        "normal",
        N,
        K,
        bm,
        bn,
        cluster=cluster,
        multicast_a=multicast_a,
        timeline=True,
        **fp8_gemm.normal_options(bm, bn),
    )
    marked = toolchain.compile(kernel)
    # a warpgroup's records: a tile's 4 and 2 per K block, over its share of the tiles
    tiles = -(-M // bm) * -(-N // bn)
    records = (-(-tiles // sms) + 2) * (4 + 2 * (K // 128))
    # int64 storage (torch's uint64 has few CUDA kernels), passed as the kernel's uint64
    groups = 3  # warpgroups: the producer and the normal GEMM's two consumers
    words = timeline.buffer_words(sms, groups, records)
    buffer = torch.zeros(words, dtype=torch.int64, device=a.device)
    args = (a, b, sfa_rows(sfa), sfb.contiguous(), d, fp8_gemm.no_index(a.device))
    for _ in range(3):  # the last run's marks are read
        buffer.zero_()
        marked(*args, buffer.view(torch.uint64))
    torch.cuda.synchronize()
    spans = timeline.decode(buffer.cpu().tolist())
    layout = {"bm": bm, "bn": bn, "cluster": cluster, "multicast_a": multicast_a}
    names = _gemm_1d2d_tirx.EVENTS
    return layout, breakdown(spans, names), timeline.summarize(spans, names)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes", nargs="+", default=["4096x4096x4096", "4096x7168x7168", "128x4096x4096"]
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes:
        try:
            M, N, K = (int(x) for x in shape.split("x"))
        except ValueError:
            parser.error(f"--shapes: {shape!r} is not MxNxK, e.g. 4096x4096x4096")
        print(f"# {shape}", file=sys.stderr, flush=True)
        layout, phases, events = run_shape(M, N, K)
        rows.append(
            {"M": M, "N": N, "K": K, "layout": layout, "phases_us": phases, "events": events}
        )
        shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if v is not None)
        print(f"{shape} {layout}: {shown}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
