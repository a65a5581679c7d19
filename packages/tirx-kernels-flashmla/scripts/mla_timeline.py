# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Where the split-KV decode kernel's time goes, request by request (needs an sm_90a GPU).

    python packages/tirx-kernels-flashmla/scripts/mla_timeline.py [--rows 128x1024 64x8192]
        [--variant v7] [--heads 128] [--json OUT.json]

Runs the op's launch (``decode.launch``) with the timeline build of the variant's kernel
(``split_kv_kernel(timeline=True)``: thread 0 of each warpgroup marks each request, its
start, each block step, what precedes its epilogue, and the epilogue) for each row
(batch x s_k, bf16, s_q 1) and prints, per row, the median µs of each phase over all CTAs,
the first block step of a request against the later ones, and how much of the kernel's span
the CTAs spend outside any request (waiting at start or finished early). The marks cost a
little each (a fenced store): compare phases, not the total, with the plain kernel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from tirx_kernels.core.sm90 import timeline


def breakdown(spans, names) -> dict:
    """Per-phase medians (µs) of a run's spans (``core.sm90.timeline.Span``): each event's,
    plus ``first_step`` and ``later_steps`` (the block steps inside each request, split by
    order) and :func:`~tirx_kernels.core.sm90.timeline.occupancy` over the requests."""
    by_name = timeline.by_event(spans, names)
    out = {name: statistics.median(s.us for s in group) for name, group in by_name.items()}
    requests = by_name["request"]
    first, later = [], []
    for _, steps in timeline.nested(requests, by_name["step"]):
        first += [s.us for s in steps[:1]]
        later += [s.us for s in steps[1:]]
    out["first_step"] = statistics.median(first) if first else None
    out["later_steps"] = statistics.median(later) if later else None
    out.update(timeline.occupancy(spans, requests))
    return out


def run_row(batch, s_k, heads, variant):
    import torch

    from tirx_kernels.core import toolchain
    from tirx_kernels.flashmla import _mla_decode_tirx, decode
    from tirx_kernels.flashmla.kernels.flash_mla_decode import prepare_data

    q, k_cache, table, seqlens = prepare_data("bfloat16", heads, 1, batch, s_k, on_device=True)
    meta, splits = decode.get_mla_metadata(seqlens, heads, 1)
    # the op's factory of the variant (v5's make_decode with its options), timeline on
    kernel = decode.DECODE_FACTORIES[variant]("bfloat16", heads, 1, False, timeline=True)
    marked = toolchain.compile(kernel)
    _, combine = decode.compiled_kernels(variant, q, False)
    ctas = meta.shape[0] * -(-heads // _mla_decode_tirx.BM)
    # a CTA group's records: 8 per request, 2 per block step (at most one per block)
    blocks = sum(-(-int(n) // _mla_decode_tirx.PAGE) for n in seqlens.tolist())
    words = timeline.buffer_words(ctas, 2, records=8 * batch + 2 * blocks)
    # int64 storage (torch's uint64 has few CUDA kernels), passed as the kernel's uint64
    buffer = torch.zeros(words, dtype=torch.int64, device=q.device)
    inputs = (q, k_cache, table, seqlens, meta, splits)

    def decode_marked(*args):
        buffer.zero_()
        marked(*args, buffer.view(torch.uint64))

    for _ in range(3):  # the last run's marks are read
        outputs = decode.op_outputs(q, meta.shape[0])
        decode.launch(variant, outputs, inputs, 576**-0.5, False, (decode_marked, combine))
    torch.cuda.synchronize()
    spans = timeline.decode(buffer.cpu().tolist())
    return breakdown(spans, _mla_decode_tirx.EVENTS), timeline.summarize(
        spans, _mla_decode_tirx.EVENTS
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=["128x1024", "64x8192", "16x1024"])
    # the variants built by v5's make_decode, which has the timeline build
    parser.add_argument("--variant", default="v9", choices=["v5", "v7", "v9", "v10"])
    parser.add_argument("--heads", type=int, default=128, choices=[16, 32, 64, 128])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    rows = []
    for row in args.rows:
        try:
            batch, s_k = (int(x) for x in row.split("x"))
        except ValueError:
            parser.error(f"--rows: {row!r} is not BATCHxS_K, e.g. 128x1024")
        print(f"# b{batch} s_k {s_k}", file=sys.stderr, flush=True)
        phases, events = run_row(batch, s_k, args.heads, args.variant)
        rows.append({"batch": batch, "s_k": s_k, "phases_us": phases, "events": events})
        shown = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if v is not None)
        print(f"b{batch} s_k {s_k} ({args.variant}, h_q {args.heads}): {shown}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"variant": args.variant, "heads": args.heads, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
