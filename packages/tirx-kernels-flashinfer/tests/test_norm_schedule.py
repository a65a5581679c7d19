# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The norm ports' host dispatch on the CPU: which kernel a shape gets, its grid."""

import pytest

from tirx_kernels.flashinfer import norm
from tirx_kernels.flashinfer._norm_schedule import (
    LEAN_MIN_HIDDEN,
    LEAN_MIN_REGISTERS,
    MANY_ROWS,
    REGISTERS_PER_SM,
    SMALL_BATCH,
    THREADS_PER_SM,
    batch_class,
    lean_ctas_per_sm,
    plan,
    schedule,
)
from tirx_kernels.flashinfer._norm_tirx import make_layernorm, make_rmsnorm


@pytest.mark.parametrize("tokens", [1, 16, SMALL_BATCH])
@pytest.mark.parametrize("kind", ["rmsnorm", "fused_add_rmsnorm", "layernorm"])
def test_small_batches_keep_the_one_row_kernels(kind, tokens):
    sched = schedule(kind, 2048, tokens)
    sched.pop("keep_gamma_beta", None)
    assert sched == {"vecs_per_thread": plan(2048, tokens, kind)[0]}


@pytest.mark.parametrize("tokens", [SMALL_BATCH + 1, MANY_ROWS - 1])
def test_mid_batches_take_one_row_per_cta(tokens):
    assert schedule("rmsnorm", 2048, tokens) == {"vecs_per_thread": 1}
    lean = {"vecs_per_thread": 4, "lean": True}
    assert schedule("rmsnorm", 4096, tokens) == {**lean, "min_ctas_per_sm": 10}
    assert schedule("rmsnorm", 11008, tokens) == {**lean, "min_ctas_per_sm": 3}
    assert schedule("rmsnorm", 16384, tokens) == {**lean, "min_ctas_per_sm": 1}
    assert schedule("layernorm", 2048, tokens) == {
        "vecs_per_thread": 1,
        "keep_gamma_beta": True,
    }
    assert schedule("fused_add_rmsnorm", 4096, tokens)["late_weight"] is True


@pytest.mark.parametrize("tokens", [MANY_ROWS, 16384, None])
def test_large_batches(tokens):
    assert schedule("rmsnorm", 2048, tokens) == {
        "vecs_per_thread": 8,
        "warp_rows": 2,
        "lean": True,
    }
    assert schedule("rmsnorm", 1000, tokens) == {
        "vecs_per_thread": 1,
        "rows_per_cta": 2,
        "lean": True,
    }
    assert schedule("rmsnorm", 4096, tokens) == {
        "vecs_per_thread": 4,
        "rows_per_cta": 2,
        "lean": True,
    }
    assert schedule("rmsnorm", 8192, tokens) == {"vecs_per_thread": 4, "rows_per_cta": 2}
    assert schedule("rmsnorm", 11008, tokens) == {"vecs_per_thread": 4}
    keep = {"keep_gamma_beta": True}
    assert schedule("layernorm", 1000, tokens) == {
        "vecs_per_thread": 1,
        "rows_per_cta": 4,
        **keep,
    }
    assert schedule("layernorm", 2048, tokens) == {
        "vecs_per_thread": 1,
        "rows_per_cta": 4,
        **keep,
    }
    assert schedule("layernorm", 4096, tokens) == {
        "vecs_per_thread": 4,
        "rows_per_cta": 2,
        **keep,
    }
    assert schedule("layernorm", 5120, tokens) == {"vecs_per_thread": 4, **keep}
    lean = {"vecs_per_thread": 4, "lean": True}
    assert schedule("layernorm", 8192, tokens) == {**lean, "min_ctas_per_sm": 6}
    assert schedule("layernorm", 11008, tokens) == {**lean, **keep, "min_ctas_per_sm": 4}
    assert schedule("layernorm", 16384, tokens) == {**lean, "min_ctas_per_sm": 3}
    assert schedule("fused_add_rmsnorm", 16384, tokens) == {
        "vecs_per_thread": 2,
        "late_weight": True,
    }
    assert schedule("fused_add_rmsnorm", 4096, tokens) == {
        "vecs_per_thread": 4,
        "late_weight": True,
    }


@pytest.mark.parametrize("kind", ["rmsnorm", "fused_add_rmsnorm", "layernorm"])
def test_a_batch_class_has_the_schedule_of_each_of_its_token_counts(kind):
    """The public ops cache one kernel per batch_class: it must not change the schedule."""
    counts = [*range(0, 300), *range(MANY_ROWS - 100, MANY_ROWS + 100), 1024, 4113, 10**6]
    for hidden in (8, 1000, 2048, 4096, 5120, 8192, 9000, 11008, 16384):
        for tokens in counts:
            assert schedule(kind, hidden, batch_class(tokens)) == schedule(kind, hidden, tokens)


def test_launcher_compiles_the_host_schedule(monkeypatch):
    keys = []
    monkeypatch.setattr(norm, "_compiled", lambda *key: keys.append(key))
    norm.launcher("layernorm", "bfloat16", 8192, 300)
    norm.launcher("layernorm", "bfloat16", 2048, 16384)
    norm.launcher("rmsnorm", "float16", 4096, 9000, 1.0, sched={"vecs_per_thread": 2})
    assert keys == [
        (
            "layernorm",
            "bfloat16",
            8192,
            0.0,
            (("lean", True), ("min_ctas_per_sm", 6), ("vecs_per_thread", 4)),
        ),
        (
            "layernorm",
            "bfloat16",
            2048,
            0.0,
            (("keep_gamma_beta", True), ("rows_per_cta", 4), ("vecs_per_thread", 1)),
        ),
        ("rmsnorm", "float16", 4096, 1.0, (("vecs_per_thread", 2),)),
    ]


@pytest.mark.parametrize("keep", [False, True])
def test_layernorm_keeps_gamma_beta_in_l1_only_when_asked(keep):
    from tirx_kernels.core import toolchain

    func = make_layernorm(1000, None, 4, keep_gamma_beta=keep)  # tail lanes, R = 4
    src = toolchain.cuda_source(toolchain.compile(func, "sm_90a"))
    calls = src.count("ld.global.L1::evict_last.v4.f32 {")
    assert calls == (1 if keep else 0)  # the helper's one asm statement
    helper = "tvm_builtin_ptx_ld_vec_global_L1__evict_last_v4_f32("
    assert src.count(helper) == (1 + 4 if keep else 0)  # definition + gamma, beta x 2 halves


def test_lean_layernorm_starts_at_8192_and_spares_small_batches():
    assert "lean" not in schedule("layernorm", LEAN_MIN_HIDDEN - 8, None)
    assert "lean" not in schedule("layernorm", 16384, SMALL_BATCH)
    assert schedule("layernorm", 16384, SMALL_BATCH + 1)["lean"] is True


@pytest.mark.parametrize(
    "threads,ctas", [(512, 3), (352, 4), (256, 6), (160, 9), (1024, 1), (32, 32)]
)
def test_lean_ctas_per_sm_caps_threads_and_registers(threads, ctas):
    assert lean_ctas_per_sm(threads) == ctas
    cap = REGISTERS_PER_SM // (threads * ctas)
    assert threads * ctas <= THREADS_PER_SM and (ctas == 1 or cap >= LEAN_MIN_REGISTERS)


def _ptxas_usage(func):
    """(registers, bytes spilled) ptxas reports for func's sm_90a cubin."""
    from tirx_kernels.core import toolchain

    return toolchain.ptxas_usage(func)[1:]


@pytest.mark.parametrize("hidden", [11008, 16384])
def test_lean_layernorm_fits_its_launch_bound(hidden):
    sched = schedule("layernorm", hidden, None)
    full = {**sched, "lean": False, "min_ctas_per_sm": 1}
    regs, _ = _ptxas_usage(make_layernorm(hidden, **full))
    lean_regs, spills = _ptxas_usage(make_layernorm(hidden, **sched))
    threads = plan(hidden, None, "layernorm")[1]
    assert regs * threads * sched["min_ctas_per_sm"] > REGISTERS_PER_SM  # would not fit unlean
    assert lean_regs * threads * sched["min_ctas_per_sm"] <= REGISTERS_PER_SM
    assert spills <= 8  # h11008 spills two registers at 40 (measured a win all the same)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("hidden", [4096, 11008])
def test_mid_batch_lean_rmsnorm_fits_its_launch_bound(dtype, hidden):
    sched = schedule("rmsnorm", hidden, 1024)
    regs, spills = _ptxas_usage(make_rmsnorm(dtype, hidden, 0.0, **sched))
    threads = plan(hidden, 1024)[1]
    assert regs * threads * sched["min_ctas_per_sm"] <= REGISTERS_PER_SM
    assert spills == 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_lean_rmsnorm_holds_fewer_registers(dtype):
    full = make_rmsnorm(dtype, 16384, 0.0, 4)
    lean = make_rmsnorm(dtype, 16384, 0.0, 4, lean=True)
    assert _ptxas_usage(lean)[0] + 16 <= _ptxas_usage(full)[0]  # 32 elements: 16 fp32 regs


def test_warp_rows_need_a_row_that_fits_one_warp():
    with pytest.raises(ValueError, match="vecs_per_thread=hidden // 256"):
        make_layernorm(2048, vecs_per_thread=4, warp_rows=4)
    with pytest.raises(ValueError, match="not one warp"):
        make_rmsnorm("bfloat16", 4096, 0.0, 4, warp_rows=2)
