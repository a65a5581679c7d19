# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public m-grouped FP8 GEMMs (MoE experts) on sm90, DeepGEMM's API (1D2D recipe).

From ``csrc/apis/gemm.hpp`` (``m_grouped_fp8_fp4_gemm_nt_contiguous`` /
``m_grouped_fp8_fp4_gemm_nt_masked``, the sm90 fp32-scale branches; checks as there) and
``csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp``; kernel in ``_gemm_1d2d_tirx``.

``m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, m_indices)``: a (M, K) e4m3 holds
the groups' rows one after another, each group's rows padded to a multiple of
``get_mk_alignment_for_contiguous_layout()`` (128); ``m_indices`` (M,) int32 names each
row's group, -1 for padding rows; b (G, N, K) e4m3, sfa (M, K/128), sfb (G, N/128, K/128)
fp32; ``d[m] = (a[m] * sfa[m]) @ (b[g] * sfb[g]).T`` with ``g = m_indices[m]``, bf16 (M, N).
As upstream, rows marked -1 get unspecified values (zeros where a whole 64-row half of a
128-row block is padding). Op: ``torch.ops.tirx_kernels.
deepgemm_m_grouped_fp8_gemm_nt_contiguous(d, a, sfa, b, sfb, m_indices)``.

``m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, expected_m)``: a (G, Mg, K),
sfa (G, Mg, K/128), b (G, N, K), sfb (G, N/128, K/128), d (G, Mg, N); only rows
``[0, masked_m[g])`` of group g are computed and written (``masked_m`` (G,) int32 stays on
the device: fixed shapes, no host sync, CUDA-graph safe); ``expected_m`` (a host int, rows
per group expected) only picks the tile shape. Op: ``torch.ops.tirx_kernels.
deepgemm_m_grouped_fp8_gemm_nt_masked(d, a, sfa, b, sfb, masked_m, expected_m)``.

Domain (both): N % 128 == 0, K % 128 == 0, G*N*K, M*K, M*N < 2^31 (M: all rows of a);
``recipe`` None or (1, 128, 128). Anything else raises ValueError naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tirx_kernels.core import host
from tirx_kernels.core.args import check_memory
from tirx_kernels.core.ops import public_op

from ._gemm_schedule import num_sms, pick_block
from ._quant import sfa_rows
from .fp8_gemm import compiled_gemm_1d2d

__all__ = [
    "get_mk_alignment_for_contiguous_layout",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
]

_CONTIGUOUS = "m_grouped_fp8_gemm_nt_contiguous"
_MASKED = "m_grouped_fp8_gemm_nt_masked"
_ALIGNMENT = 128  # rows of a block of the contiguous layout (its BLOCK_M)


def get_mk_alignment_for_contiguous_layout() -> int:
    """Rows each group of the contiguous layout is padded to a multiple of (upstream: 128)."""
    return _ALIGNMENT


def _dtype(fn: str, name: str, t: torch.Tensor, want: torch.dtype) -> None:
    if t.dtype != want:
        raise ValueError(f"{fn}: {name} must be {want}, got {t.dtype}")


def _shape(fn: str, name: str, t: torch.Tensor, want: tuple, what: str) -> None:
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{fn}: {name} must be {what} = {tuple(want)}, got {tuple(t.shape)}")


def _check_b(fn: str, b: torch.Tensor, sfb: torch.Tensor, K: int) -> tuple[int, int]:
    """(G, N) of b (G, N, K) e4m3 with sfb (G, N/128, K/128) fp32."""
    _dtype(fn, "b", b, torch.float8_e4m3fn)
    _dtype(fn, "sfb", sfb, torch.float32)
    if b.dim() != 3 or b.shape[2] != K:
        raise ValueError(
            f"{fn}: b must be 3-D (G, N, K) with a's K = {K}, got shape {tuple(b.shape)}"
        )
    G, N = b.shape[0], b.shape[1]
    if G == 0:
        raise ValueError(f"{fn}: b must hold at least one group, got shape {tuple(b.shape)}")
    if N % 128 or N == 0:
        raise ValueError(
            f"{fn}: N = b.shape[1] must be a positive multiple of 128 (whole 128x128 scale "
            f"blocks), got {N}"
        )
    if G * N * K >= 2**31:
        raise ValueError(f"{fn}: b must have < 2^31 elements, got {G} x {N} x {K}")
    _shape(fn, "sfb", sfb, (G, N // 128, K // 128), "(G, N/128, K/128)")
    return G, N


def _check_k(fn: str, K: int) -> None:
    if K % 128 or K == 0:
        raise ValueError(
            f"{fn}: K = a.shape[-1] must be a positive multiple of 128 (whole 1x128 scale "
            f"blocks), got {K}"
        )


def _check_dtypes(fn: str, a, sfa, d, index_name: str, index) -> None:
    """a e4m3, sfa fp32, d bf16 and the int32 group index ``index_name`` (m_indices or
    masked_m)."""
    _dtype(fn, "a", a, torch.float8_e4m3fn)
    _dtype(fn, "sfa", sfa, torch.float32)
    _dtype(fn, "d", d, torch.bfloat16)
    _dtype(fn, index_name, index, torch.int32)


def _check_memories(fn: str, a, sfa, b, sfb, d, index_name: str, index) -> None:
    """Every tensor on a's device; all but the scales (read through their strides)
    contiguous."""
    device = a.get_device()
    for name, t in (("a", a), ("b", b), ("d", d), (index_name, index)):
        check_memory(fn, name, t, device)
    check_memory(fn, "sfa", sfa, device, contiguous=False)
    check_memory(fn, "sfb", sfb, device, contiguous=False)


def _check_contiguous(d, a, sfa, b, sfb, m_indices) -> tuple[int, int, int, int]:
    """(M, N, K, G) of valid contiguous-layout arguments; ValueError naming the argument."""
    fn = _CONTIGUOUS
    _check_dtypes(fn, a, sfa, d, "m_indices", m_indices)
    if a.dim() != 2:
        raise ValueError(f"{fn}: a must be 2-D (M, K), got shape {tuple(a.shape)}")
    M, K = a.shape
    _check_k(fn, K)
    G, N = _check_b(fn, b, sfb, K)
    if M % _ALIGNMENT:
        raise ValueError(
            f"{fn}: M = a.shape[0] must be a multiple of {_ALIGNMENT}: pad each group's rows "
            f"to get_mk_alignment_for_contiguous_layout() (m_indices -1), got {M}"
        )
    if max(M * K, M * N) >= 2**31:
        raise ValueError(f"{fn}: a and d must have < 2^31 elements, got M={M}")
    _shape(fn, "sfa", sfa, (M, K // 128), "(M, K/128)")
    _shape(fn, "m_indices", m_indices, (M,), "(M,)")
    _shape(fn, "d", d, (M, N), "(M, N)")
    _check_memories(fn, a, sfa, b, sfb, d, "m_indices", m_indices)
    return M, N, K, G


def _check_masked(d, a, sfa, b, sfb, masked_m, expected_m) -> tuple[int, int, int, int]:
    """(G, Mg, N, K) of valid masked-layout arguments; ValueError naming the argument."""
    fn = _MASKED
    _check_dtypes(fn, a, sfa, d, "masked_m", masked_m)
    if a.dim() != 3:
        raise ValueError(f"{fn}: a must be 3-D (G, M, K), got shape {tuple(a.shape)}")
    _, Mg, K = a.shape
    _check_k(fn, K)
    G, N = _check_b(fn, b, sfb, K)
    if a.shape[0] != G:
        raise ValueError(f"{fn}: a must hold b's {G} groups, got shape {tuple(a.shape)}")
    if Mg == 0:
        raise ValueError(f"{fn}: a must have M = a.shape[1] > 0 rows per group")
    if max(G * Mg * K, G * Mg * N) >= 2**31:
        raise ValueError(f"{fn}: a and d must have < 2^31 elements, got G={G}, M={Mg}")
    if not isinstance(expected_m, int) or expected_m <= 0:
        raise ValueError(f"{fn}: expected_m must be a positive int, got {expected_m!r}")
    _shape(fn, "sfa", sfa, (G, Mg, K // 128), "(G, M, K/128)")
    _shape(fn, "masked_m", masked_m, (G,), "(G,)")
    _shape(fn, "d", d, (G, Mg, N), "(G, M, N)")
    _check_memories(fn, a, sfa, b, sfb, d, "masked_m", masked_m)
    return G, Mg, N, K


def _check_recipe(fn: str, recipe) -> None:
    if recipe is not None and tuple(recipe) != (1, 128, 128):
        raise ValueError(f"{fn}: recipe must be None or (1, 128, 128), got {recipe!r}")


def _pair(fn: str, name: str, pair) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(f"{fn}: {name} must be a pair ({name}, sf{name}) of tensors")
    return pair[0], pair[1]


_PLANS: dict = {}
_sig = host.signature


def _plan(resolve: Callable, tensors: tuple, *scalars) -> Callable:
    """The checked launch of one call signature of the op ``resolve`` resolves,
    ``plan(*tensors, *scalars)``."""
    key = (resolve, *scalars, *map(_sig, tensors))
    return host.lookup(_PLANS, key, resolve, *tensors, *scalars)


def _resolve_contiguous(d, a, sfa, b, sfb, m_indices) -> Callable:
    M, N, K, G = _check_contiguous(d, a, sfa, b, sfb, m_indices)
    if M == 0:
        return host.nothing
    _, bn = pick_block(M, N, K, num_sms(), bms=(_ALIGNMENT,))
    kernel = host.bound_on_first_call(compiled_gemm_1d2d("contiguous", N, K, _ALIGNMENT, bn, G))

    def plan(d, a, sfa, b, sfb, m_indices):
        sfb_rows = sfb.reshape(G * N // 128, K // 128)
        kernel(a, b.view(G * N, K), sfa_rows(sfa), sfb_rows, d, m_indices)

    return plan


def _resolve_masked(d, a, sfa, b, sfb, masked_m, expected_m) -> Callable:
    G, Mg, N, K = _check_masked(d, a, sfa, b, sfb, masked_m, expected_m)
    bm, bn = pick_block(min(expected_m, Mg), N, K, num_sms(), groups=G)
    kernel = host.bound_on_first_call(compiled_gemm_1d2d("masked", N, K, bm, bn, G))

    def plan(d, a, sfa, b, sfb, masked_m, expected_m):
        sfb_rows = sfb.reshape(G * N // 128, K // 128)
        kernel(
            a.view(G * Mg, K),
            b.view(G * N, K),
            sfa_rows(sfa),
            sfb_rows,
            d.view(G * Mg, N),
            masked_m,
        )

    return plan


# the parameters both ops take before their grouping argument, spelled once
_GROUPED = "Tensor(a0!) d, Tensor a, Tensor sfa, Tensor b, Tensor sfb"


@public_op(
    "deepgemm_m_grouped_fp8_gemm_nt_contiguous", schema=f"({_GROUPED}, Tensor m_indices) -> ()"
)
def _contiguous(*tensors: torch.Tensor) -> None:
    _plan(_resolve_contiguous, tensors)(*tensors)


@public_op(
    "deepgemm_m_grouped_fp8_gemm_nt_masked",
    schema=f"({_GROUPED}, Tensor masked_m, SymInt expected_m) -> ()",
)
def _masked(*args) -> None:
    tensors, expected_m = args[:-1], args[-1]
    _plan(_resolve_masked, tensors, expected_m)(*args)


def _call(fn: str, op, resolve: Callable, a, b, d, group_index, *scalars) -> None:
    """One call of either op: on plain CUDA tensors outside ``torch.compile`` its plan,
    without the dispatcher (:mod:`tirx_kernels.core.host`), else ``op``."""
    a_, sfa = _pair(fn, "a", a)
    b_, sfb = _pair(fn, "b", b)
    tensors = (d, a_, sfa, b_, sfb, group_index)
    if host.plain_call(*tensors):
        _plan(resolve, tensors, *scalars)(*tensors, *scalars)
    else:
        op(*tensors, *scalars)


def m_grouped_fp8_gemm_nt_contiguous(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    d: torch.Tensor,
    m_indices: torch.Tensor,
    recipe: tuple[int, int, int] | None = None,
) -> None:
    """DeepGEMM's ``m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, m_indices)``."""
    _check_recipe(_CONTIGUOUS, recipe)
    _call(_CONTIGUOUS, _contiguous, _resolve_contiguous, a, b, d, m_indices)


def m_grouped_fp8_gemm_nt_masked(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    d: torch.Tensor,
    masked_m: torch.Tensor,
    expected_m: int,
    recipe: tuple[int, int, int] | None = None,
) -> None:
    """DeepGEMM's ``m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, expected_m)``."""
    _check_recipe(_MASKED, recipe)
    _call(_MASKED, _masked, _resolve_masked, a, b, d, masked_m, expected_m)
