# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The wheel audit on hostile wheels: a huge member is a finding read within a bound, and a
corrupt wheel is one line naming the wheel and the problem, never a traceback."""

import subprocess
import sys
import tracemalloc
import zipfile

from tirx_kernels.core.license import selftest as st
from tirx_kernels.core.license.discover import Repo, walk
from tirx_kernels.core.license.wheel import MAX_MEMBER_BYTES, audit_wheel

HUGE = "tirx_kernels/demo/huge.py"


def _wheel(selftest_tree, tmp_path):
    out = tmp_path / "dist"
    out.mkdir(exist_ok=True)
    return st.build_wheel(selftest_tree, out)


def test_a_member_over_the_bound_is_a_finding_and_is_not_read(selftest_tree, tmp_path):
    wheel = _wheel(selftest_tree, tmp_path)
    size = 4 * MAX_MEMBER_BYTES
    with zipfile.ZipFile(wheel, "a", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(HUGE, "w", force_zip64=True) as f:  # zeros: tiny on disk
            chunk = b"#" * (1 << 20)
            for _ in range(size // len(chunk)):
                f.write(chunk)
    tracemalloc.start()
    try:
        found = audit_wheel(
            wheel, st.distributions(selftest_tree), Repo(selftest_tree, walk(selftest_tree))
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    hits = [f for f in found if f.path.endswith("!" + HUGE)]
    assert [f.rule for f in hits] == ["wheel-member-too-large"]
    assert str(size) in hits[0].found
    assert peak < MAX_MEMBER_BYTES  # the member was never read into memory


def _corrupt(wheel, member):
    """Overwrite the compressed bytes of ``member`` with garbage (zlib cannot inflate it)."""
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
    data = bytearray(wheel.read_bytes())
    # local header: 30 bytes + name + extra, then the compressed data
    name_len = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    data[start : start + info.compress_size] = b"\xff" * info.compress_size
    wheel.write_bytes(bytes(data))


def _deflated_wheel(selftest_tree, tmp_path):
    plain = _wheel(selftest_tree, tmp_path)
    wheel = tmp_path / "dist" / ("z" + plain.name)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for item in src.namelist():
            zf.writestr(item, src.read(item))
    return wheel


def test_a_corrupt_member_is_a_finding_naming_wheel_and_member(selftest_tree, tmp_path):
    wheel = _deflated_wheel(selftest_tree, tmp_path)
    _corrupt(wheel, "tirx_kernels/demo/gemm.py")
    found = audit_wheel(
        wheel, st.distributions(selftest_tree), Repo(selftest_tree, walk(selftest_tree))
    )
    [f] = [f for f in found if f.rule == "wheel-corrupt"]
    assert f.path == f"{wheel.name}!tirx_kernels/demo/gemm.py"
    assert "\n" not in str(f)


def test_cli_on_a_corrupt_wheel_prints_one_line_and_no_traceback(selftest_tree, tmp_path):
    wheel = _deflated_wheel(selftest_tree, tmp_path)
    _corrupt(wheel, "tirx_kernels_demo-0.1.0.dist-info/METADATA")
    proc = subprocess.run(
        [sys.executable, "-m", "tirx_kernels.core.license", "audit", "--wheel", str(wheel)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode in (1, 2)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if wheel.name in line]
    assert lines and "METADATA" in lines[0]
