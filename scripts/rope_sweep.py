# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Time the RoPE port's two many-token schedules on the H200 (how rope's dispatch was picked).

    python scripts/rope_sweep.py OUT.json

For each shape it times, with the proton timer (cold L2, one round, no cooldown): ``grid``,
the head-group kernel at the host's ``head_groups``; ``walk_c{N}``, the token-walk kernel
at 128 threads with N resident CTAs per SM (grid ``min(tokens, SMs * N)``), and
``walk_t{T}_c{N}`` at T threads where T splits a token's heads into equal steps (the
host's ``_rope_schedule.walk_shape`` is among them); FlashInfer's
``apply_rope_pos_ids_inplace`` when it imports; and ``neg``, ``torch.neg`` of q and k into
other tensors: elementwise kernels moving the same bytes (the bandwidth ceiling at that size).
Before timing, every variant's result is compared with
``torch.equal`` to ``grid``'s: the arithmetic is the same, so any difference is a MISMATCH.
TB/s counts q and k read and written.
"""

from __future__ import annotations

import argparse
import json
import sys

# (dtype, head_dim, q heads, kv heads, interleave, tokens)
SHAPES = [
    ("bfloat16", 128, 32, 8, False, 16384),
    ("bfloat16", 128, 32, 8, True, 16384),
    ("float16", 64, 32, 8, False, 16383),
    ("bfloat16", 256, 16, 8, False, 8192),
    ("bfloat16", 128, 32, 8, False, 512),
]
WALK_CTAS = (4, 6, 8)


def walk_threads(d, heads):
    """CTA sizes (besides 128) at which a walk CTA's head slots divide a token's heads
    evenly into 1, 2 or 3 steps (no idle lanes in the last step), up to 512 threads."""
    bdx = d // 16
    sizes = set()
    for steps in (1, 2, 3):
        if heads % steps == 0:
            t = heads // steps * bdx
            if t % 32 == 0 and t <= 512 and t != 128:  # 128: THREADS, timed as walk_c
                sizes.add(t)
    return sorted(sizes)


def sweep_shape(torch, toolchain, sms, dtype, d, hq, hk, il, n):
    """Rows of one shape; prints one line per variant."""
    from tirx_kernels.flashinfer import _rope_schedule as sched
    from tirx_kernels.flashinfer import _rope_tirx as kern
    from tirx_kernels.flashinfer.kernels import rope
    from tirx_kernels.flashinfer.rope import rcp_f32

    q0, k0, pos = rope.prepare_data(dtype, d, hq, hk, n)
    rs, rt = 1.0, rcp_f32(1e4)

    def launcher(ex, grid):
        q, k = q0.clone(), k0.clone()
        return (q, k), lambda: ex(q, k, pos, grid, rs, rt)

    grid = toolchain.compile(kern.get_grid_kernel(dtype, d, hq, hk, il))
    variants = {"grid": launcher(grid, sched.head_groups(n, d, hq + hk, sms))}
    for c in WALK_CTAS:
        kernel = kern.get_walk_kernel(dtype, d, hq, hk, il, min_ctas=c, threads=sched.THREADS)
        walk = toolchain.compile(kernel)
        variants[f"walk_c{c}"] = launcher(walk, min(n, sms * c))
    for t in walk_threads(d, hq + hk):
        for c in sorted({max(1, sched.WALK_THREADS_PER_SM // t), max(1, 1536 // t)}):
            kernel = kern.get_walk_kernel(dtype, d, hq, hk, il, min_ctas=c, threads=t)
            walk = toolchain.compile(kernel)
            variants[f"walk_t{t}_c{c}"] = launcher(walk, min(n, sms * c))
    for _, launch in variants.values():
        launch()
    torch.cuda.synchronize()
    want = variants["grid"][0]
    mism = {name for name, (out, _) in variants.items() if not all(map(torch.equal, out, want))}

    def build_flashinfer():
        import flashinfer.rope as fr

        qf, kf = q0.clone(), k0.clone()
        fr.apply_rope_pos_ids_inplace(qf, kf, pos, interleave=il)  # JIT outside timing
        return lambda: fr.apply_rope_pos_ids_inplace(qf, kf, pos, interleave=il)

    def build_neg():
        qc, kc = torch.empty_like(q0), torch.empty_like(k0)
        return lambda: (torch.neg(q0, out=qc), torch.neg(k0, out=kc))

    res = toolchain.bench(
        {name: v[1] for name, v in variants.items()},
        references={"flashinfer": build_flashinfer, "neg": build_neg},
        timer="proton",
        rounds=1,
        cooldown_s=0,
    )
    nbytes = 2 * (q0.numel() + k0.numel()) * q0.element_size()
    shape = f"{dtype} d{d} hq{hq} hk{hk} il{int(il)} t{n}"
    rows = []
    for name, us in sorted(res.get("impls", {}).items(), key=lambda kv: kv[1] or 1e30):
        tb = nbytes / (us * 1e-6) / 1e12 if us else None
        flag = "  MISMATCH" if name in mism else ""
        print(f"{shape:34s} {name:10s} {us:9.2f} us {tb:.2f} TB/s{flag}", flush=True)
        rows.append({"shape": shape, "variant": name, "us": us, "tbps": tb, "mismatch": bool(flag)})
    for name, why in (res.get("skipped") or {}).items():
        print(f"{shape:34s} {name:10s} skipped: {str(why)[:200]}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="path of the JSON results")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("rope_sweep: no CUDA GPU visible; run this on the H200", file=sys.stderr)
        return 2
    from tirx_kernels.core import toolchain

    sms = toolchain.sm_count(0)
    rows = []
    for shape in SHAPES:
        rows += sweep_shape(torch, toolchain, sms, *shape)
        with open(args.out, "w") as f:  # after every shape: a kill keeps the rest
            json.dump({"sm_count": sms, "rows": rows}, f, indent=1)
    return 1 if any(r["mismatch"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
