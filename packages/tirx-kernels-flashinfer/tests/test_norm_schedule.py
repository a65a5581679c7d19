# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The norm ports' host dispatch on the CPU: which kernel a shape gets, and its grid."""

import pytest

from tirx_kernels.core import toolchain
from tirx_kernels.flashinfer import _norm


@pytest.mark.parametrize("tokens", [1, 16, _norm.SMALL_BATCH])
@pytest.mark.parametrize("kind", ["rmsnorm", "fused_add_rmsnorm", "layernorm"])
def test_small_batches_keep_the_one_row_kernels(kind, tokens):
    sched = _norm.schedule(kind, 2048, tokens)
    assert set(sched) == {"vecs_per_thread"}
    assert sched["vecs_per_thread"] == _norm.plan(2048, tokens, kind)[0]


@pytest.mark.parametrize("tokens", [_norm.SMALL_BATCH + 1, 16384, None])
def test_large_batches(tokens):
    assert _norm.schedule("layernorm", 2048, tokens) == {"vecs_per_thread": 2, "persistent": True}
    assert _norm.schedule("layernorm", 1000, tokens)["persistent"] is True
    assert _norm.schedule("layernorm", 4096, tokens) == {"vecs_per_thread": 4}
    assert _norm.schedule("fused_add_rmsnorm", 16384, tokens) == {
        "vecs_per_thread": 2,
        "late_weight": True,
    }
    assert _norm.schedule("fused_add_rmsnorm", 4096, tokens) == {
        "vecs_per_thread": 4,
        "late_weight": True,
    }
    assert _norm.schedule("rmsnorm", 4096, tokens) == {"vecs_per_thread": 4}


# every (hidden, k) the kernel can be built for: at most 1024 threads
BUILDABLE = [
    (h, k)
    for h in range(8, _norm.MAX_HIDDEN + 1, 8 * 37)
    for k in (1, 2, 4, 8)
    if -(-h // _norm.VEC // k) <= 1024
]


@pytest.mark.parametrize("hidden,k", BUILDABLE)
def test_resident_ctas_fit_an_sm(hidden, k):
    _, threads = _norm.plan(hidden, None, "layernorm", k)
    n = _norm.rows_ctas_per_sm(hidden, k)
    a, b = _norm._ROWS_REGS
    regs = -(-(a + b * k) // 8) * 8
    assert 1 <= n <= _norm.MAX_CTAS_PER_SM
    assert n * threads <= _norm.THREADS_PER_SM
    assert n == 1 or n * threads * regs <= _norm.REGS_PER_SM


def test_launcher_appends_the_persistent_grid(monkeypatch):
    calls = []
    monkeypatch.setattr(_norm, "_compiled", lambda *key: lambda *args: calls.append((key, args)))
    monkeypatch.setattr(toolchain, "sm_count", lambda device_index=0: 132)
    per_sm = _norm.rows_ctas_per_sm(2048, 2)
    assert per_sm == 8  # 128 threads at <= 64 registers
    _norm.launcher("layernorm", "bfloat16", 2048, 300)("x", "eps")
    _norm.launcher("layernorm", "bfloat16", 2048, 16384)("x", "eps")
    _norm.launcher("layernorm", "bfloat16", 4096, 16384)("x", "eps")
    assert [args for _, args in calls] == [
        ("x", "eps", 300),  # never more CTAs than rows
        ("x", "eps", 132 * per_sm),
        ("x", "eps"),  # one-row kernel: grid = rows
    ]
    assert calls[0][0] == (
        "layernorm",
        "bfloat16",
        2048,
        0.0,
        (("persistent", True), ("vecs_per_thread", 2)),
    )
