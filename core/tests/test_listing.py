# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Listing stays light: it imports neither torch nor the compiler."""

import json
import subprocess
import sys

PROBE = """
import contextlib, io, json, sys
from tirx_kernels.core.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["list", "--format", "json"])
heavy = sorted(m for m in ("torch", "tvm_tirx", "tvm_ffi", "triton") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy, "kernels": len(json.loads(out.getvalue()))}))
"""


def test_list_imports_neither_torch_nor_tvm_tirx():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    data = json.loads(p.stdout)
    assert data["code"] == 0
    assert data["heavy"] == []
    assert data["kernels"] >= 1
