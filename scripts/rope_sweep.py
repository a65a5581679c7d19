# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Schedule sweep of ``flashinfer_rope`` on a GPU: occupancy bound x head prefetch.

Times every variant beside FlashInfer (when importable) in one proton bench per shape, after
checking that each variant's output is bit-identical to the default schedule's. Usage, on the
H200 (see README "On the H200"): ``python scripts/rope_sweep.py OUT.json``.
"""

from __future__ import annotations

import json
import sys

VARIANTS = {"base_c12": (12, False), "base_c8": (8, False), "prefetch_c8": (8, True)}
SHAPES = [
    "bf16_d128_hq32_hk8_t512",
    "bf16_d128_hq32_hk8_t16384",
    "bf16_d128_hq32_hk8_t16384_il",
    "fp16_d64_hq32_hk8_t16383",
    "bf16_d256_hq16_hk8_t8192",
]


def sweep_shape(rope, toolchain, cfg):
    import torch

    q, k, pos = rope.prepare_data(**cfg)
    hq, hk, d = cfg["num_q_heads"], cfg["num_kv_heads"], cfg["head_dim"]
    il, sms = cfg["interleave"], torch.cuda.get_device_properties(0).multi_processor_count
    rs, rt = 1.0, rope._f32(1.0 / 1e4)
    launches, outputs = {}, {}
    for name, (min_ctas, prefetch) in VARIANTS.items():
        ex = rope._compiled(cfg["dtype"], d, hq, hk, il, "int32", min_ctas, prefetch)
        groups = rope.head_groups(cfg["tokens"], d, hq + hk, sms, min_ctas)
        qv, kv = q.clone(), k.clone()
        ex(qv, kv, pos, groups, rs, rt)
        outputs[name] = (qv.clone(), kv.clone())
        launches[name] = (lambda e, a, b, g: lambda: e(a, b, pos, g, rs, rt))(ex, qv, kv, groups)
    base = outputs["base_c12"]
    equal = {n: all(torch.equal(x, y) for x, y in zip(o, base)) for n, o in outputs.items()}

    def build_flashinfer():
        import flashinfer.rope as fr

        qf, kf = q.clone(), k.clone()
        fr.apply_rope_pos_ids_inplace(qf, kf, pos, interleave=il)
        return lambda: fr.apply_rope_pos_ids_inplace(qf, kf, pos, interleave=il)

    res = toolchain.bench(
        launches,
        references={"flashinfer": build_flashinfer},
        timer="proton",
        rounds=3,
        cooldown_s=0.0,
    )
    nbytes = 2 * (q.numel() + k.numel()) * q.element_size()
    return {
        "equal": equal,
        "us": res["impls"],
        "skipped": res.get("skipped", {}),
        "tbps": {n: nbytes / us / 1e6 for n, us in res["impls"].items()},
    }


def main(out_path: str) -> int:
    import torch

    if not torch.cuda.is_available():
        print("rope_sweep: needs a CUDA GPU (run it on the H200)", file=sys.stderr)
        return 2
    from tirx_kernels.core import toolchain
    from tirx_kernels.flashinfer import rope

    configs = {c["label"]: c for c in rope.BENCH_CONFIGS}
    results = {}
    for label in SHAPES:
        try:
            results[label] = r = sweep_shape(rope, toolchain, configs[label])
            for name, us in r["us"].items():
                print(
                    f"{label:32} {name:12} {us:9.2f} us {r['tbps'][name]:5.2f} TB/s "
                    f"equal={r['equal'].get(name, '-')}",
                    flush=True,
                )
        except Exception as e:  # one shape's failure must not hide the others
            results[label] = {"error": repr(e)}
            print(f"{label}: ERROR {e!r}", flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: rope_sweep.py OUT.json")
    sys.exit(main(sys.argv[1]))
