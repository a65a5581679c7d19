# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The sm90 blocks on an sm_90a GPU: single-tile kernels for every swizzle mode, and the
GEMM built from all of them on shapes with tails. Skips without such a GPU.

Each case runs in a child process: a wrong descriptor is an illegal address, which would
poison the CUDA context of the test process.
"""

import json
import subprocess
import sys

import pytest

from tirx_kernels.core import toolchain

pytestmark = pytest.mark.skipif(toolchain.gpu_arch() != "sm_90a", reason="needs an sm_90a GPU")

TILE = """
import json, torch
from tirx_kernels.core import toolchain
from tirx_kernels.core.sm90.layouts import Swizzle
from tirx_kernels.core.sm90.selftest import make_tile_kernel
n, k, mode, dtype = {n}, {k}, Swizzle[{mode!r}], {dtype!r}
tdt = getattr(torch, dtype)
ex = toolchain.compile(make_tile_kernel(n, k, mode, dtype))
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn(64, k, device="cuda", generator=g).to(tdt)
b = torch.randn(n, k, device="cuda", generator=g).to(tdt)
c = torch.full((64, n), float("nan"), device="cuda", dtype=tdt)
ex(a, b, c)
err = (c.float() - a.float() @ b.float().t()).abs().nan_to_num(1e9).max().item()
print(json.dumps({{"err": err}}))
"""


def _child(code, timeout=300):
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


ROW_COPY = """
import json, torch
from tirx_kernels.core import toolchain
from tirx_kernels.core.sm90.selftest import make_row_copy_kernel
rows, cols = {rows}, {cols}
ex = toolchain.compile(make_row_copy_kernel(rows, cols))
x = torch.randn(rows, cols, device="cuda")
y = torch.full_like(x, float("nan"))
ex(x, y)
print(json.dumps({{"equal": bool(torch.equal(x, y))}}))
"""


@pytest.mark.parametrize("rows, cols", [(64, 520), (128, 512), (1, 4), (37, 100)])
def test_row_copy_by_bulk_stores(rows, cols):
    assert _child(ROW_COPY.format(rows=rows, cols=cols))["equal"]


@pytest.mark.parametrize("mode", ["B128", "B64", "B32", "NONE"])
@pytest.mark.parametrize("n, k, dtype", [(128, 64, "bfloat16"), (256, 128, "float16")])
def test_tile_kernel(mode, n, k, dtype):
    err = _child(TILE.format(n=n, k=k, mode=mode, dtype=dtype))["err"]
    # output rounding only: |C| <~ 4 sqrt(k), half an ulp of bf16 (2^-8) or fp16 (2^-11)
    assert err <= 4 * k**0.5 * (2**-8 if dtype == "bfloat16" else 2**-11) + 1e-3


@pytest.mark.parametrize(
    "label",
    [
        "bf16_m333_n520_k264",
        "bf16_m1000_n1000_k1000",
        "fp16_m64_n4096_k8192",
        "bf16_m4096_n4096_k4096",
    ],
)
def test_gemm_through_blocks(label):
    code = f"""
import json
from tirx_kernels.basic.kernels import gemm
cfg = {{k: v for k, v in next(c for c in gemm.CONFIGS if c["label"] == {label!r}).items()
       if k != "label"}}
print(json.dumps(gemm.run_test(**cfg)))
"""
    pytest.importorskip("tirx_kernels.basic.kernels.gemm")
    res = _child(code)
    assert res["max_abs_err"] <= res["tol"]
