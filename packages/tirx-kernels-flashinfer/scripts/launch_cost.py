# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Where the host time of one eager rmsnorm call goes, ours and FlashInfer's, layer by layer
(needs a GPU and FlashInfer):

    python packages/tirx-kernels-flashinfer/scripts/launch_cost.py [--tokens 1 4 16] [--json OUT]

Eager host µs per call (``tirx_kernels.core.overhead``, launches queued back to back, the
layers' rounds taken in turns) of: our public function; its plan lookup alone (the signature
key and the dict, no launch); the plan alone (tvm-ffi, the generated host function, the
launch); below the plan, TIRx's CUDA-module launcher called directly (the kernel function the
generated host function calls, with pointers made once, on the default stream; and with the
pointers and tvm-ffi's stream set on every call), a tvm-ffi no-op taking the same tensors and
``cudaSetDevice`` (ctypes); FlashInfer's public function; its JIT module's function alone,
with and without PDL. Ours minus FlashInfer's, split this way, says whether the gap is our
Python, the generated host function or the launcher beneath it (``docs/overhead.md``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re

import torch
import tvm_ffi
from tvm_ffi import core as ffi_core

from tirx_kernels.core import host, overhead, toolchain
from tirx_kernels.flashinfer import norm
from tirx_kernels.flashinfer._norm_schedule import batch_class

EPS = 1e-6


def layers(tokens: int, hidden: int = 4096) -> dict:
    import flashinfer

    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(hidden, dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(x)
    plan = norm._rmsnorm_plan(0.0, out, x, w)
    module = flashinfer.norm.get_norm_module()
    launcher, threads = _device_launcher(hidden, tokens)
    vp, raw_stream = ctypes.c_void_p, torch._C._cuda_getCurrentRawStream
    ptrs = [vp(t.data_ptr()) for t in (w, x, out)]  # the launcher's order: W, X, Y
    geometry = (tokens, 1, 1, threads, 1, 1)  # one CTA per row

    def launcher_with_stream():
        prev = ffi_core._env_set_current_stream(2, x.device.index, raw_stream(x.device.index))
        launcher(vp(w.data_ptr()), vp(x.data_ptr()), vp(out.data_ptr()), EPS, *geometry)
        ffi_core._env_set_current_stream(2, x.device.index, prev)

    plan(out, x, w, EPS)
    want = out.clone()
    out.zero_()
    launcher(*ptrs, EPS, *geometry)
    torch.cuda.synchronize()
    if not torch.equal(out, want):
        raise RuntimeError("the launcher called directly does not reproduce the plan's output")
    nop, cudart = tvm_ffi.get_global_func("testing.nop"), ctypes.CDLL("libcudart.so.13")
    return {
        "ours": lambda: norm.rmsnorm(x, w, out=out),
        "ours_plan_lookup": lambda: norm._rmsnorm_plan(0.0, out, x, w),
        "ours_plan": lambda: plan(out, x, w, EPS),
        "ours_launcher": lambda: launcher(*ptrs, EPS, *geometry),
        "ours_launcher_with_stream": launcher_with_stream,
        "tvm_ffi_nop": lambda: nop(out, x, w, EPS),
        "cudart_set_device": lambda: cudart.cudaSetDevice(x.device.index),
        "flashinfer": lambda: flashinfer.rmsnorm(x, w, out=out),
        "flashinfer_module_pdl": lambda: module.rmsnorm(out, x, w, EPS, True),
        "flashinfer_module": lambda: module.rmsnorm(out, x, w, EPS, False),
    }


def _device_launcher(hidden: int, tokens: int):
    """The CUDA-module function of the rmsnorm kernel the plan launches and its threads per
    CTA (``__launch_bounds__``)."""
    executable = norm._host_kernel("rmsnorm", "bfloat16", hidden, batch_class(tokens), 0.0)
    host.main_of(executable)  # loads the module
    threads = int(re.search(r"__launch_bounds__\((\d+)", toolchain.cuda_source(executable))[1])
    return executable.mod.imports[0]["rmsnorm_kernel"], threads


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
