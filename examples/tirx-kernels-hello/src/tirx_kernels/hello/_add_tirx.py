# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The TIRx kernel: ``c = a + b`` over flat tensors of any length, 16-byte accesses."""

from __future__ import annotations

from tirx_kernels.core.toolchain import T

THREADS = 256
ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def make_add(dtype: str):
    """A PrimFunc adding two length-``n`` vectors (``n`` dynamic); a scalar loop does the tail."""
    vec = 16 // ELEMENT_BYTES[dtype]
    n = T.dynamic("n")

    @T.function
    def add(a: T.Tensor((n,), dtype), b: T.Tensor((n,), dtype), c: T.Tensor((n,), dtype)):
        T.func_attr({"tirx.noalias": True})
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, THREADS * vec), block=THREADS))
        base = (T.cuda.block_idx("x") * THREADS + T.cuda.thread_idx("x")) * vec
        if base + vec <= n:
            c[T.Ramp(base, 1, vec)] = a[T.Ramp(base, 1, vec)] + b[T.Ramp(base, 1, vec)]
        else:
            for v in range(vec):
                if base + v < n:
                    c[base + v] = a[base + v] + b[base + v]

    return add
