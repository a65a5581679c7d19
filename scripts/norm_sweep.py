# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Sweep the FlashInfer norm ports' schedules on the H200 (how _norm_schedule was picked).

    python scripts/norm_sweep.py OUT.json [--full] [--kinds rmsnorm,layernorm] [--budget-s 230]
        [--shapes 16384x2048,4113x11008] [--rounds 2] [--variant NAME=JSON ...]

For each (kernel, shape) it times, with the proton timer (cold L2, no cooldown, one round
unless --rounds):
the one-row kernel at plan()'s vectors-per-thread ``k`` (``--full``: every valid k in
1/2/4/8) and, for RMSNorm and LayerNorm, at 2 and 4 rows per CTA (``--full``: 2, 4 and 8 at
every k, and lean one-row kernels ``lean_k{k}`` / ``lean_k{k}_c{n}`` at every k; and
where a row fits one warp, ``warp_w{W}[_lean]``: W warps per CTA, a row each); fused
add's late-weight kernel at k = 2, 4 and the host's k; LayerNorm's variants at plan()'s k
also with gamma/beta loaded ``L1::evict_last`` (``_keep``, the ``keep_gamma_beta``
keyword); for RMSNorm and LayerNorm the host's schedule with ``lean=True`` (``host_lean``)
and then ``min_ctas_per_sm=n`` (``host_lean_cn``, every n whose register cap stays >= 40);
FlashInfer's op when ``import flashinfer`` works; and ``neg``, ``torch.neg(x, out=y)``: an
elementwise kernel moving the same activation bytes (RMSNorm, LayerNorm), the bandwidth
ceiling at that size (a plain ``copy_`` is a memcpy, which proton does not time). ``*``
marks the host's schedule. ``--variant NAME=JSON`` (repeatable; JSON: make_* keywords, e.g.
``r2_lean='{"vecs_per_thread": 4, "rows_per_cta": 2, "lean": true}'``, or ``+JSON``: laid
over each shape's host schedule) times only the host's schedule and those variants: a probe
of new schedules. ``--rounds N`` times N rounds and reports their mean. Before timing,
every variant's output is compared with ``torch.equal`` to the one-row kernel's at plan()'s
k: a different k sums in a different order, so only same-k variants must match bit for bit
(``must_match``; a miss there is reported as MISMATCH).
TB/s counts activations only: rmsnorm and layernorm 2*M*H*2 bytes, fused_add_rmsnorm
4*M*H*2 (weights excluded).

Compiles run here too (2-5 s each): ``--budget-s`` stops starting new shapes past it.
Prints one line per (kernel, shape, variant) and writes every result to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

# in order of interest (the shapes below target): a --budget-s cut drops the tail
SHAPES = {
    "rmsnorm": [(16384, 2048), (16384, 4096), (16384, 8192), (4113, 11008), (1024, 4096)],
    "layernorm": [(16384, 2048), (16384, 4096), (16384, 11008), (16384, 16384), (1024, 4096)],
    "fused_add_rmsnorm": [(16384, 16384), (16384, 4096), (4113, 11008)],
}
ACT_BYTES = {"rmsnorm": 2 * 2, "fused_add_rmsnorm": 4 * 2, "layernorm": 2 * 2}  # per element
KS = (1, 2, 4, 8)
DTYPE = "bfloat16"
EPS = 1e-6


def valid_ks(norm_schedule, hidden):
    """k in KS with 32 <= ceil(hidden / 8 / k) threads (before warp rounding) <= 1024."""
    nvec = hidden // norm_schedule.VEC
    ks = []
    for k in KS:
        raw = -(-nvec // k)
        if 32 <= raw and -(-raw // 32) * 32 <= 1024:
            ks.append(k)
    return ks


def make_data(randn, kind, tokens, hidden):
    x = randn((tokens, hidden), DTYPE, seed=tokens * 7 + hidden, shift=0.5)
    if kind == "layernorm":
        g = randn((hidden,), "float32", seed=hidden + 1, scale=0.5, shift=1.0)
        b = randn((hidden,), "float32", seed=hidden + 2, scale=0.5)
        return {"x": x, "gamma": g, "beta": b}
    w = randn((hidden,), DTYPE, seed=hidden + 1, scale=0.5, shift=1.0)
    if kind == "rmsnorm":
        return {"x": x, "w": w}
    r = randn((tokens, hidden), DTYPE, seed=tokens * 11 + hidden + 3)
    return {"x": x, "residual": r, "w": w}


def runner(torch, kind, d, launch):
    """(run once -> outputs to compare, no-arg timed callable) for one launch function."""
    x = d["x"]
    if kind == "fused_add_rmsnorm":  # in place: each variant owns its state, as run_bench

        def once():
            xi, ri = x.clone(), d["residual"].clone()
            launch(xi, ri, d["w"], EPS)
            return xi, ri

        xs, rs = x.clone(), d["residual"].clone()
        return once, lambda: launch(xs, rs, d["w"], EPS)
    out = torch.empty_like(x)
    args = (x, d["gamma"], d["beta"]) if kind == "layernorm" else (x, d["w"])

    def once():
        o = torch.empty_like(x)
        launch(*args, o, EPS)
        return (o,)

    return once, lambda: launch(*args, out, EPS)


def flashinfer_builder(torch, kind, d):
    def build():
        import flashinfer

        x = d["x"]
        if kind == "rmsnorm":
            o = torch.empty_like(x)
            flashinfer.norm.rmsnorm(x, d["w"], eps=EPS, out=o)  # JIT outside timing
            return lambda: flashinfer.norm.rmsnorm(x, d["w"], eps=EPS, out=o)
        if kind == "fused_add_rmsnorm":
            x1, r1 = x.clone(), d["residual"].clone()
            flashinfer.norm.fused_add_rmsnorm(x1, r1, d["w"], eps=EPS)
            return lambda: flashinfer.norm.fused_add_rmsnorm(x1, r1, d["w"], eps=EPS)
        flashinfer.norm.layernorm(x, d["gamma"], d["beta"], eps=EPS)
        return lambda: flashinfer.norm.layernorm(x, d["gamma"], d["beta"], eps=EPS)

    return build


def parse_variant(spec: str) -> tuple[str, dict, bool]:
    """``NAME=JSON`` (a JSON object of make_* keywords) -> (NAME, keywords, False);
    ``NAME=+JSON`` -> (NAME, keywords, True): keywords laid over each shape's host schedule."""
    name, sep, text = spec.partition("=")
    on_host = text.startswith("+")
    try:
        sched = json.loads(text.removeprefix("+")) if sep and name else None
    except json.JSONDecodeError:
        sched = None
    if not isinstance(sched, dict):
        raise ValueError(
            f"--variant {spec!r}: expected NAME=JSON with a JSON object of make_* keywords, "
            'e.g. r2=\'{"vecs_per_thread": 4, "rows_per_cta": 2}\' or, over the host\'s '
            "schedule, lean='+{\"lean\": true}'"
        )
    return name, sched, on_host


def variants_of(norm_schedule, kind, hidden, k0, full, host, probes=()):
    """(name, make_* keywords) of every schedule worth timing for one shape; with
    ``probes`` ((name, keywords, on_host), ...), the host's schedule and those only."""
    if probes:
        return [("host", host)] + [
            (name, {**host, **sched} if on_host else sched) for name, sched, on_host in probes
        ]
    ks = [k for k in valid_ks(norm_schedule, hidden) if full or k == k0]
    out = [(f"row_k{k}", {"vecs_per_thread": k}) for k in ks]
    if kind in ("rmsnorm", "layernorm"):  # R rows per CTA
        rows = (2, 4, 8) if full else (2, 4)
        out += [
            (f"row_k{k}_r{r}", {"vecs_per_thread": k, "rows_per_cta": r}) for k in ks for r in rows
        ]
    if kind == "fused_add_rmsnorm":
        late = [k for k in ks if k in (2, 4, k0)]
        out += [(f"late_w_k{k}", {"vecs_per_thread": k, "late_weight": True}) for k in late]
    if kind == "layernorm":
        out += [
            (f"{name}_keep", {**s, "keep_gamma_beta": True})
            for name, s in out
            if s["vecs_per_thread"] == k0
        ]
    if kind in ("rmsnorm", "layernorm"):  # lean rows, at each CTAs-per-SM bound to 40 registers
        threads = norm_schedule.plan(hidden, None, kind, host["vecs_per_thread"])[1]
        lean = {**host, "lean": True, "min_ctas_per_sm": 1}
        out += [("host_lean", lean)]
        row = norm_schedule.WARP_ROW
        if hidden % row == 0 and hidden // row in KS:  # a row per warp
            one_warp = {**host, "vecs_per_thread": hidden // row, "rows_per_cta": 1}
            for w in (2, 4, 8):
                out += [(f"warp_w{w}", {**one_warp, "warp_rows": w})]
                out += [(f"warp_w{w}_lean", {**one_warp, "warp_rows": w, "lean": True})]
        if full:  # one-row lean kernels at every k, unbounded and at lean_ctas_per_sm()
            for k in ks:
                n = norm_schedule.lean_ctas_per_sm(norm_schedule.plan(hidden, None, kind, k)[1])
                one = {**host, "vecs_per_thread": k, "rows_per_cta": 1, "lean": True}
                out += [(f"lean_k{k}", {**one, "min_ctas_per_sm": 1})]
                out += [(f"lean_k{k}_c{n}", {**one, "min_ctas_per_sm": n})] if n > 1 else []
        out += [
            (f"host_lean_c{n}", {**lean, "min_ctas_per_sm": n})
            for n in (2, 3, 4, 5, 6, 8, 10, 12)
            if threads * n <= norm_schedule.THREADS_PER_SM
            and norm_schedule.REGISTERS_PER_SM // (threads * n) >= norm_schedule.LEAN_MIN_REGISTERS
        ]
    return out


def sweep_shape(
    torch,
    toolchain,
    norm_schedule,
    norm,
    kind,
    tokens,
    hidden,
    full,
    print_line,
    probes=(),
    rounds=1,
):
    """``norm_schedule``: the plans and host schedules; ``norm``: the op module (launcher)."""
    from tirx_kernels.core import testing

    d = make_data(testing.randn, kind, tokens, hidden)
    k0 = norm_schedule.plan(hidden, tokens, kind)[0]
    host = norm_schedule.schedule(kind, hidden, tokens)
    variants = variants_of(norm_schedule, kind, hidden, k0, full, host, probes)
    ref_once, _ = runner(
        torch, kind, d, norm.launcher(kind, DTYPE, hidden, tokens, sched={"vecs_per_thread": k0})
    )
    want = ref_once()
    funcs, info = {}, {}
    for name, sched in variants:
        t0 = time.time()
        k = norm_schedule.plan(hidden, None, kind, sched.get("vecs_per_thread"))[0]
        once, timed = runner(
            torch, kind, d, norm.launcher(kind, DTYPE, hidden, tokens, sched=sched)
        )
        got = once()
        torch.cuda.synchronize()
        equal = all(torch.equal(g, w) for g, w in zip(got, want))
        diff = max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want))
        info[name] = {
            "k": k,
            "sched": sched,
            "threads": norm_schedule.plan(hidden, None, kind, k)[1],
            "equal": equal,
            "must_match": k == k0,
            "max_abs_diff": diff,
            "compile_s": round(time.time() - t0, 2),
            "host_default": sched == host,
        }
        funcs[name] = timed
    with_flashinfer = testing.available("flashinfer.norm")
    refs = {"flashinfer": flashinfer_builder(torch, kind, d)} if with_flashinfer else {}
    if kind != "fused_add_rmsnorm":  # the same bytes, elementwise: the ceiling
        copy_out = torch.empty_like(d["x"])
        refs["neg"] = lambda: lambda: torch.neg(d["x"], out=copy_out)
    res = toolchain.bench(funcs, references=refs, timer="proton", rounds=rounds, cooldown_s=0)
    nbytes = ACT_BYTES[kind] * tokens * hidden
    rows = []
    for name, us in sorted(res.get("impls", {}).items(), key=lambda kv: kv[1] or 1e30):
        row = {"kernel": kind, "tokens": tokens, "hidden": hidden, "variant": name, "us": us}
        row["tbps"] = nbytes / (us * 1e-6) / 1e12 if us else None
        row.update(info.get(name, {}))
        rows.append(row)
        flag = ""
        if name in info and not info[name]["equal"]:
            flag = "  MISMATCH" if info[name]["must_match"] else "  (differs: other k)"
        tb = f"{row['tbps']:.2f} TB/s" if row["tbps"] else "-"
        star = " *" if row.get("host_default") else ""
        print_line(f"{kind:18s} {tokens:6d}x{hidden:<6d} {name:16s} {us:9.2f} us {tb}{star}{flag}")
    for name, err in (res.get("errors") or {}).items():
        rows.append(
            {"kernel": kind, "tokens": tokens, "hidden": hidden, "variant": name, "error": str(err)}
        )
        print_line(f"{kind:18s} {tokens:6d}x{hidden:<6d} {name:16s} ERROR {str(err)[:200]}")
    for name, why in (res.get("skipped") or {}).items():
        print_line(f"{kind:18s} {tokens:6d}x{hidden:<6d} {name:16s} skipped: {str(why)[:200]}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="path of the JSON results")
    ap.add_argument("--full", action="store_true", help="also time one-row kernels at every k")
    ap.add_argument("--kinds", default=",".join(SHAPES), help="comma-separated subset")
    ap.add_argument("--budget-s", type=float, default=230.0, help="start no shape after this")
    ap.add_argument("--shapes", default="", help="TOKENSxHIDDEN,... instead of the built-in list")
    ap.add_argument("--rounds", type=int, default=1, help="timing rounds, mean reported")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="time only the host schedule and these make_* keyword sets (repeatable)",
    )
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(SHAPES)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; choose from {list(SHAPES)}")
    try:  # before any GPU setup: a typo fails at once
        custom = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
        if any(len(shape) != 2 for shape in custom):
            raise ValueError
    except ValueError:
        ap.error(f"--shapes {args.shapes!r}: expected TOKENSxHIDDEN,... e.g. 16384x2048")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: must be >= 1")
    try:
        probes = [parse_variant(v) for v in args.variant]
    except ValueError as e:
        ap.error(str(e))
    names = [name for name, _, _ in probes]
    if "host" in names or len(set(names)) != len(names):
        ap.error("--variant names must be unique and not 'host'")

    try:
        import torch
    except ImportError:
        print("norm_sweep: torch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("norm_sweep: no CUDA GPU visible; run this on the H200", file=sys.stderr)
        return 2
    from tirx_kernels.core import testing, toolchain
    from tirx_kernels.flashinfer import _norm_schedule, norm

    if toolchain.gpu_arch() != "sm_90a":
        print(f"norm_sweep: needs an sm_90a GPU, found {toolchain.gpu_arch()}", file=sys.stderr)
        return 2

    start = time.time()
    results = {
        "device": torch.cuda.get_device_name(),
        "sm_count": toolchain.sm_count(torch.cuda.current_device()),
        "flashinfer": testing.available("flashinfer.norm"),
        "rows": [],
        "failures": [],
        "skipped": [],
    }

    def print_line(s):
        print(s, flush=True)

    for kind in kinds:
        for tokens, hidden in custom or SHAPES[kind]:
            if time.time() - start > args.budget_s:
                results["skipped"].append({"kernel": kind, "tokens": tokens, "hidden": hidden})
                print_line(f"{kind:18s} {tokens:6d}x{hidden:<6d} skipped: past --budget-s")
                continue
            try:
                rows = sweep_shape(
                    torch,
                    toolchain,
                    _norm_schedule,
                    norm,
                    kind,
                    tokens,
                    hidden,
                    args.full,
                    print_line,
                    probes=probes,
                    rounds=args.rounds,
                )
                results["rows"].extend(rows)
            except Exception as e:  # one shape failing must not end the sweep
                tb = traceback.format_exc(limit=3)
                results["failures"].append(
                    {
                        "kernel": kind,
                        "tokens": tokens,
                        "hidden": hidden,
                        "error": repr(e),
                        "traceback": tb,
                    }
                )
                print_line(f"{kind:18s} {tokens:6d}x{hidden:<6d} FAILED {type(e).__name__}: {e}")
            with open(args.out, "w") as f:  # written after every shape: a kill keeps the rest
                json.dump(results, f, indent=1)
    results["wall_s"] = round(time.time() - start, 1)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    bad = [r for r in results["rows"] if r.get("must_match") and r.get("equal") is False]
    print(
        f"norm_sweep: {len(results['rows'])} rows, {len(results['failures'])} failed shapes, "
        f"{len(bad)} same-k mismatches, {results['wall_s']} s -> {args.out}"
    )
    return 1 if results["failures"] or bad else 0


if __name__ == "__main__":
    sys.exit(main())
