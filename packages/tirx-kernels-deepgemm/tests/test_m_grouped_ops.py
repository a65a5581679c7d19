# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The m-grouped ops (contiguous, masked): registration, argument checks, the scale layout
and the test data (CPU), the kernels' codegen."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core.ops import is_registered
from tirx_kernels.deepgemm.kernels import m_grouped_fp8_gemm_nt_contiguous as contiguous
from tirx_kernels.deepgemm.kernels import m_grouped_fp8_gemm_nt_masked as masked
from tirx_kernels.deepgemm.m_grouped import (
    _check_contiguous,
    _check_masked,
    get_mk_alignment_for_contiguous_layout,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
    sfa_rows,
)

E4M3, F32, BF16, I32 = torch.float8_e4m3fn, torch.float32, torch.bfloat16, torch.int32


def test_ops_are_registered_and_named_by_their_kernel_modules():
    for module in (contiguous, masked):
        (name,) = module.PUBLIC_OPS
        assert name == module.KERNEL_META["name"]
        assert is_registered(name)
    assert get_mk_alignment_for_contiguous_layout() == 128


def _contiguous_args(M=256, G=2, N=256, K=384, **over):
    args = {
        "d": torch.empty(M, N, dtype=BF16),
        "a": torch.zeros(M, K, dtype=E4M3),
        "sfa": torch.ones(M, K // 128, dtype=F32),
        "b": torch.zeros(G, N, K, dtype=E4M3),
        "sfb": torch.ones(G, N // 128, K // 128, dtype=F32),
        "m_indices": torch.zeros(M, dtype=I32),
    }
    args.update(over)
    return args


CONTIGUOUS_BAD = {
    "a_dtype": ({"a": torch.zeros(256, 384, dtype=BF16)}, "a must be torch.float8_e4m3fn"),
    "idx_dtype": (
        {"m_indices": torch.zeros(256, dtype=torch.int64)},
        "m_indices must be torch.int32",
    ),
    "a_rank": ({"a": torch.zeros(2, 128, 384, dtype=E4M3)}, "a must be 2-D"),
    "b_rank": ({"b": torch.zeros(256, 384, dtype=E4M3)}, r"b must be 3-D \(G, N, K\)"),
    "n_align": (
        {"b": torch.zeros(2, 200, 384, dtype=E4M3), "d": torch.empty(256, 200, dtype=BF16)},
        "N = b.shape.1. must be a positive multiple of 128",
    ),
    "m_align": (
        {
            "a": torch.zeros(200, 384, dtype=E4M3),
            "sfa": torch.ones(200, 3, dtype=F32),
            "d": torch.empty(200, 256, dtype=BF16),
            "m_indices": torch.zeros(200, dtype=I32),
        },
        "M = a.shape.0. must be a multiple of 128",
    ),
    "sfb_shape": ({"sfb": torch.ones(2, 3, 2, dtype=F32)}, r"sfb must be \(G, N/128, K/128\)"),
    "idx_shape": ({"m_indices": torch.zeros(128, dtype=I32)}, r"m_indices must be \(M,\)"),
    "d_shape": ({"d": torch.empty(256, 128, dtype=BF16)}, r"d must be \(M, N\)"),
    "cpu": ({}, "a must be a CUDA tensor"),
}


def _masked_args(G=2, Mg=64, N=256, K=384, **over):
    args = {
        "d": torch.empty(G, Mg, N, dtype=BF16),
        "a": torch.zeros(G, Mg, K, dtype=E4M3),
        "sfa": torch.ones(G, Mg, K // 128, dtype=F32),
        "b": torch.zeros(G, N, K, dtype=E4M3),
        "sfb": torch.ones(G, N // 128, K // 128, dtype=F32),
        "masked_m": torch.zeros(G, dtype=I32),
        "expected_m": 32,
    }
    args.update(over)
    return args


MASKED_BAD = {
    "a_rank": ({"a": torch.zeros(128, 384, dtype=E4M3)}, r"a must be 3-D \(G, M, K\)"),
    "a_groups": ({"a": torch.zeros(3, 64, 384, dtype=E4M3)}, "a must hold b's 2 groups"),
    "mask_dtype": ({"masked_m": torch.zeros(2, dtype=torch.int64)}, "masked_m must be torch.int32"),
    "mask_shape": ({"masked_m": torch.zeros(3, dtype=I32)}, r"masked_m must be \(G,\)"),
    "expected_m": ({"expected_m": 0}, "expected_m must be a positive int"),
    "sfa_shape": ({"sfa": torch.ones(2, 64, 2, dtype=F32)}, r"sfa must be \(G, M, K/128\)"),
    "d_shape": ({"d": torch.empty(2, 64, 128, dtype=BF16)}, r"d must be \(G, M, N\)"),
    "k_align": (
        {
            "a": torch.zeros(2, 64, 200, dtype=E4M3),
            "b": torch.zeros(2, 256, 200, dtype=E4M3),
        },
        "K = a.shape.-1. must be a positive multiple of 128",
    ),
    "cpu": ({}, "a must be a CUDA tensor"),
}


# (layout, the layout's argument check, its valid arguments, the bad cases)
LAYOUTS = [
    ("contiguous", _check_contiguous, _contiguous_args, CONTIGUOUS_BAD),
    ("masked", _check_masked, _masked_args, MASKED_BAD),
]


@pytest.mark.parametrize(
    "check, valid_args, case",
    [
        pytest.param(check, valid_args, bad[case], id=f"{layout}-{case}")
        for layout, check, valid_args, bad in LAYOUTS
        for case in sorted(bad)
    ],
)
def test_bad_arguments_raise_value_error_naming_them(check, valid_args, case):
    over, message = case
    with pytest.raises(ValueError, match=message):
        check(**valid_args(**over))


def test_wrappers_check_recipe_and_pairs_before_launching():
    c = _contiguous_args()
    with pytest.raises(ValueError, match="recipe must be None or"):
        m_grouped_fp8_gemm_nt_contiguous(
            (c["a"], c["sfa"]), (c["b"], c["sfb"]), c["d"], c["m_indices"], recipe=(1, 1, 128)
        )
    with pytest.raises(ValueError, match="b must be a pair"):
        m_grouped_fp8_gemm_nt_contiguous((c["a"], c["sfa"]), c["b"], c["d"], c["m_indices"])
    m = _masked_args()
    with pytest.raises(ValueError, match="a must be a pair"):
        m_grouped_fp8_gemm_nt_masked(m["a"], (m["b"], m["sfb"]), m["d"], m["masked_m"], 32)
    with pytest.raises(ValueError, match="m_indices must be torch.int32"):
        torch.ops.tirx_kernels.deepgemm_m_grouped_fp8_gemm_nt_contiguous(
            *_contiguous_args(m_indices=torch.zeros(256, dtype=torch.int64)).values()
        )


def test_grouped_sfa_becomes_the_kernels_kb_by_mp_matrix():
    sfa = torch.arange(2 * 5 * 3, dtype=F32).view(2, 5, 3)
    rows = sfa_rows(sfa)
    assert rows.shape == (6, 8)  # (G * KB, M rounded up to 4)
    assert torch.equal(rows.view(2, 3, 8)[..., :5], sfa.transpose(1, 2))
    flat = sfa_rows(sfa[0])
    assert flat.shape == (3, 8) and torch.equal(flat[:, :5], sfa[0].t())


def test_contiguous_layout_pads_each_group_to_128_rows():
    rows, M = contiguous.group_rows(4, 200, seed=0)
    assert M % 128 == 0 and M == sum(-(-r // 128) * 128 for r in rows)
    assert all(140 <= r <= 260 for r in rows)


def test_masked_rows_stay_within_the_group_and_cover_an_empty_group():
    rows = masked.group_rows(3, 96, 40)
    assert rows[1] == 0 and all(0 <= r <= 96 for r in rows)


def test_grouped_kernels_walk_groups_on_the_device():
    from tirx_kernels.core import toolchain
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d

    src = toolchain.cuda_source(toolchain.compile(make_gemm_1d2d("masked", 256, 384, 64, 32, 3)))
    assert "IDX_ptr[" in src and "while" in src  # masked_m read in the kernel, no host sync
    assert "m64n16k32_f32_e4m3_e4m3" in src
    src = toolchain.cuda_source(
        toolchain.compile(make_gemm_1d2d("contiguous", 256, 384, 128, 64, 2))
    )
    assert "IDX_ptr[" in src and "m64n64k32_f32_e4m3_e4m3" in src
    with pytest.raises(ValueError, match="contiguous layout takes bm = 128"):
        make_gemm_1d2d("contiguous", 256, 384, 64, 64, 2)


@pytest.mark.parametrize(
    ("kind", "groups", "bm", "sfa_rows"),
    [
        ("normal", 1, 128, 3),
        ("contiguous", 2, 128, 3),  # one (M, K) A: its scales are one (K/128, MP) matrix
        ("masked", 3, 64, 9),  # per-group A blocks: (G*K/128, MP)
    ],
)
def test_kernel_sfa_shape_is_what_the_op_passes(kind, groups, bm, sfa_rows):
    from tirx_kernels.deepgemm._gemm_1d2d_tirx import make_gemm_1d2d

    sfa = make_gemm_1d2d(kind, 256, 384, bm, 64, groups).params[2]
    assert sfa.name == "SFA" and int(sfa.shape[0]) == sfa_rows
