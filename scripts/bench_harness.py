# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Measure the harness itself (figures quoted in the README): not a timed test.

    python scripts/bench_harness.py [--repeat 5]

1. `tirx-run list` wall time with every installed family (median of --repeat runs).
2. Per-config process overhead of `tirx-run test`: a fake family whose configs do nothing,
   so the time is child start + registry load + JSON round trip.
3. Per-config cost of the compile-only path on a real kernel (import of the compiler,
   TIRx lowering, nvcc to a cubin).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOOP_FAMILY = {
    "noopfam/__init__.py": "",
    "noopfam/plugin.py": """
from tirx_kernels.core import Family, LicensePolicy, hookimpl
@hookimpl
def tirx_kernels_family():
    return Family(name="noopfam", category="noopfam", package="noopfam",
                  license=LicensePolicy(expression="Apache-2.0"))
@hookimpl
def tirx_kernels_register_kernels(register):
    register("noopfam.noop")
@hookimpl
def tirx_kernels_run_test(config):
    return {"launched": True}
""",
    "noopfam/noop.py": """
KERNEL_META = {"name": "noop", "category": "noopfam", "compute_capability": 9,
               "archs": ["sm_90a"]}
CONFIGS = [{"label": f"c{i}", "i": i} for i in range(10)]
""",
    "noopfam-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: noopfam\nVersion: 1.0\n",
    "noopfam-1.0.dist-info/entry_points.txt": "[tirx_kernels]\nnoopfam = noopfam.plugin\n",
}


def wall(cmd, env=None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kernel", default="rmsnorm")
    args = ap.parse_args()
    cli = [sys.executable, "-m", "tirx_kernels.core.cli"]
    out = {}
    out["list_s"] = statistics.median(wall(cli + ["list"]) for _ in range(args.repeat))

    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in NOOP_FAMILY.items():
            path = Path(tmp, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = dict(
            os.environ,
            TIRX_KERNELS_FAMILIES="noopfam",
            PYTHONPATH=tmp + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )
        total = wall(cli + ["test", "--kernel", "noop"], env=env)
        out["test_overhead_per_config_s"] = total / 10

    listing = json.loads(
        subprocess.run(
            cli + ["list", "--format", "json"], check=True, capture_output=True, text=True
        ).stdout
    )
    kernel = next(k for k in listing if k["name"] == args.kernel)
    label = kernel["configs"][0]
    out["compile_only_config_s"] = wall(cli + ["test", "--kernel", args.kernel, "--config", label])
    out["compile_only_config"] = f"{args.kernel} {label}"
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
