# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The TMA-fed split-KV kernels as ptxas assembles them (no GPU needed): no spills, and
wgmmas that stay asynchronous (ptxas serializes all of them, silently but for a note, when
a register of one is touched inside its pipeline stage; v5's overlap depends on it)."""

import shutil

import pytest

from tirx_kernels.core import toolchain
from tirx_kernels.flashmla import decode

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


@pytest.mark.parametrize(
    "variant, dtype, h_q, s_q, causal",
    [
        ("v5", "bfloat16", 128, 1, False),
        ("v5", "float16", 16, 2, True),
        ("v7", "bfloat16", 128, 1, False),
        ("v7", "float16", 16, 2, True),
        ("v9", "bfloat16", 128, 1, False),
        ("v9", "float16", 16, 2, True),
        ("v10", "bfloat16", 128, 1, False),
        ("v10", "float16", 16, 2, True),
    ],
)
def test_split_kv_kernel_assembles_without_spills_or_serialized_wgmmas(
    variant, dtype, h_q, s_q, causal
):
    func = decode.DECODE_FACTORIES[variant](dtype, h_q, s_q, causal)
    _, registers, spilled, serialized = toolchain.ptxas_report(func)
    assert (spilled, serialized) == (0, False)
    assert registers <= 255


def test_v7_issues_the_next_requests_loads_before_the_epilogue_stores():
    """v7 (``prefetch``) issues the next request's Q (18 cp.async a thread) and first pages
    between the last pair step and the split's stores; v5 issues them at a request's start."""

    def q_loads_between_steps_and_stores(variant):
        func = decode.DECODE_FACTORIES[variant]("bfloat16", 128, 1, False)
        body = toolchain.cuda_source(toolchain.compile(func)).split("for (int it = 0", 1)[1]
        return body.split("OACC_ptr[", 1)[0].count("(&(Q_ptr[")

    assert q_loads_between_steps_and_stores("v7") == 18
    assert q_loads_between_steps_and_stores("v5") == 0


@pytest.mark.parametrize("dtype, h_q, s_q", [("bfloat16", 128, 1), ("float16", 16, 2)])
def test_the_warp_combine_gives_each_row_a_warp_of_16_byte_loads(dtype, h_q, s_q):
    """Eight rows per CTA, a warp each: per split four 16-byte loads per lane, and four
    8-byte stores of the row's output per lane."""
    from tirx_kernels.flashmla._mla_combine_tirx import make_combine_warp_rows

    source, _, spilled, _ = toolchain.ptxas_report(make_combine_warp_rows(dtype, h_q, s_q))
    assert not spilled
    assert "__launch_bounds__(256)" in source
    assert source.count("tvm_builtin_ptx_ld_vec_global_v4_f32(part_ptr") == 4
    assert source.count("tvm_builtin_ptx_st_vec_global_v2_b32((&(OUT_ptr") == 4
    assert "warp_reduce_max_32(" in source and "warp_reduce_sum_32(" in source


def test_v9_stages_the_epilogue_and_stores_it_by_bulk_copies():
    """v9 (``staged_stores``) writes O into shared memory (64 pairs a thread: fp32 for a
    split, the output dtype for an unsplit request), then one bulk copy a row to OACC or
    OUT, and issues the next request's Q only once the copies have read the staging; v7
    stores each of a thread's 128 elements to OACC or OUT itself."""

    def epilogue(variant):
        func = decode.DECODE_FACTORIES[variant]("bfloat16", 128, 1, False)
        return toolchain.cuda_source(toolchain.compile(func)).split("for (int it = 0", 1)[1]

    v7 = epilogue("v7")
    assert (v7.count("OACC_ptr["), v7.count("OUT_ptr[")) == (128, 128)
    body = epilogue("v9")
    assert body.count("st_vec_shared_v2_f32(") == 64 and body.count("st_shared_b32(") == 64
    assert body.count("tirx_kernels_bulk_store(") == 2
    assert (body.count("OACC_ptr["), body.count("OUT_ptr[")) == (1, 1)  # the copies' rows
    read = body.index("bulk_wait_group_read_0()")
    assert body.index("tirx_kernels_bulk_store(") < read < body.index("(&(Q_ptr[")


def test_v10_issues_the_next_q_before_the_staged_stores_and_its_pages_after():
    """v10 (``early_q``): the next request's Q (18 cp.async a thread) goes out after the
    last pair step, before the epilogue writes the staging; its first pages (TMA) after the
    bulk copies have read the staging, as v9's."""
    func = decode.DECODE_FACTORIES["v10"]("bfloat16", 128, 1, False)
    body = toolchain.cuda_source(toolchain.compile(func)).split("for (int it = 0", 1)[1]
    staging = body.index("st_vec_shared_v2_f32(")
    read = body.index("bulk_wait_group_read_0()")
    assert body[:staging].count("(&(Q_ptr[") == 18
    assert body[staging:].count("(&(Q_ptr[") == 0
    assert "cp_async_bulk_tensor" in body[read:]


def test_the_timeline_build_marks_each_phase_and_keeps_the_schedule():
    """``timeline=True`` (scripts/mla_timeline.py) adds a buffer argument and begin/end marks
    of every event (one thread a warpgroup), without spills or serialized wgmmas; the
    default build's code is the same as without the option."""
    from tirx_kernels.flashmla import _mla_decode_tirx, _mla_decode_v5_tirx

    func = _mla_decode_v5_tirx.make_decode("bfloat16", 128, 1, False, prefetch=True, timeline=True)
    assert (
        len(func.params) == len(decode.DECODE_FACTORIES["v7"]("bfloat16", 128, 1, False).params) + 1
    )
    source, registers, spilled, serialized = toolchain.ptxas_report(func)
    assert (spilled, serialized) == (0, False) and registers <= 255
    for event in _mla_decode_tirx.EVENTS:
        assert source.count(f"timer_start_cuda({event},") == 1
        assert source.count(f"timer_end_cuda({event},") == 1
    assert decode.DECODE_FACTORIES["v7"]("bfloat16", 128, 1, False).script() == (
        _mla_decode_v5_tirx.make_decode("bfloat16", 128, 1, False, prefetch=True).script()
    )
    assert "timer" not in decode.DECODE_FACTORIES["v7"]("bfloat16", 128, 1, False).script()
