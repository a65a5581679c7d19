# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op ``fp8_gemm_nt((a, sfa), (b, sfb), d)``: DeepGEMM's API on sm90 (1D2D).

``d[M, N] = (a * sfa) @ (b * sfb).T`` in bf16, from ``csrc/apis/gemm.hpp``
(``fp8_fp4_gemm_nt``, the sm90 fp32-scale branch) and ``csrc/apis/layout.hpp``: ``a`` (M, K)
and ``b`` (N, K) are float8_e4m3fn, K-major (contiguous); ``sfa`` (M, K/128) fp32 holds one
scale per 1x128 block of ``a`` (row-major, or MN-major as
``get_mn_major_tma_aligned_tensor`` returns it, read in place); ``sfb`` (N/128, K/128) fp32
one per 128x128 block of ``b``; ``d`` (M, N) bf16, written.
``torch.ops.tirx_kernels.deepgemm_fp8_gemm_nt(d, a, sfa, b, sfb)`` is the PyTorch op (eager,
CUDA graphs, ``torch.compile``). M is a run-time size: a few kernels per (N, K) (one per
tile shape the schedule picks from M; compiled on first use) serve every M. Schedule:
``prefetch`` (default) or ``basic`` (the first port) by ``TIRX_DEEPGEMM_SCHEDULE``; under
``prefetch``, ``TIRX_DEEPGEMM_MULTICAST=1`` lets CTAs pair up for B multicast.

Domain. Upstream (sm90, this recipe) needs K-major e4m3 A/B, bf16 D without C
accumulation, 16-byte aligned rows (K % 16 == 0 for the TMA descriptors of A/B; N % 8 == 0
for D's and the kernel's device assert) and handles N, K tails by ceil-division and TMA
zero fill. This port needs N % 128 == 0 and K % 128 == 0 (whole scale blocks; DeepSeek's
shapes all are), M >= 0 (M == 0 returns at once, as upstream's early return), and
M * K, M * N < 2^31. Anything else raises ValueError naming the argument.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from tirx_kernels.core import host, toolchain
from tirx_kernels.core.args import check_memory
from tirx_kernels.core.ops import public_op

from ._gemm_1d2d_tirx import make_gemm_1d2d, warpgroup_shape
from ._gemm_schedule import multicast, num_sms, pick_bn, pick_normal_layout, schedule
from ._gemm_tirx import make_fp8_gemm_nt
from ._quant import get_mn_major_tma_aligned_tensor, sfa_rows

__all__ = [
    "compiled_fp8_gemm_nt",
    "compiled_gemm_1d2d",
    "fp8_gemm_nt",
    "get_mn_major_tma_aligned_tensor",
]

_FN = "fp8_gemm_nt"


@functools.cache
def compiled_fp8_gemm_nt(N: int, K: int, bn: int):
    """The kernel for one (N, K, N tile), compiled once; called as ``(a, b, sfa_t, sfb, d)``."""
    return toolchain.compile(make_fp8_gemm_nt(N, K, bn))


def compiled_gemm_1d2d(
    kind: str,
    N: int,
    K: int,
    bm: int,
    bn: int,
    num_groups: int = 1,
    cluster: int = 1,
    multicast_a: bool = False,
    consumers: int = 2,
    l2_promotion: int = 0,
    tma_store: bool = False,
    lean_loop: bool = False,
):
    """A prefetch-schedule kernel (``_gemm_1d2d_tirx``), compiled once per configuration."""
    options = (num_groups, cluster, multicast_a, consumers, l2_promotion, tma_store, lean_loop)
    return _compiled_gemm_1d2d(kind, N, K, bm, bn, *options)


@functools.cache
def _compiled_gemm_1d2d(kind, N, K, bm, bn, groups, cluster, multicast_a, consumers, l2, tma, lean):
    func = make_gemm_1d2d(
        kind,
        N,
        K,
        bm,
        bn,
        groups,
        cluster=cluster,
        multicast_a=multicast_a,
        consumers=consumers,
        l2_promotion=l2,
        tma_store=tma,
        lean_loop=lean,
    )
    return toolchain.compile(func)


def normal_options(bm: int, bn: int, consumers: int = 2) -> dict:
    """The normal GEMM's defaults beside its tile: A's and B's tensor maps promote L2 fills
    to 256 B, as upstream's, and D leaves by TMA stores where a consumer warpgroup's share
    is whole 64-column chunks; both took time off the M 4096 rows (docs/fp8_gemm.md)."""
    return {"l2_promotion": 3, "tma_store": warpgroup_shape(bm, bn, consumers)[0] % 64 == 0}


_NO_INDEX: dict[torch.device, torch.Tensor] = {}


def no_index(device: torch.device) -> torch.Tensor:
    """The unused (1,) int32 index argument of the normal GEMM's kernel."""
    if device not in _NO_INDEX:
        _NO_INDEX[device] = torch.zeros(1, dtype=torch.int32, device=device)
    return _NO_INDEX[device]


def _dtype(name: str, t: torch.Tensor, want: torch.dtype, fix: str) -> None:
    if t.dtype != want:
        raise ValueError(f"{_FN}: {name} must be {want}, got {t.dtype}; {fix}")


def _check(d, a, sfa, b, sfb) -> tuple[int, int, int]:
    """(M, N, K) of valid arguments; ValueError naming the argument and the fix."""
    quant = "quantize it with per_token_cast_to_fp8 / per_block_cast_to_fp8"
    _dtype("a", a, torch.float8_e4m3fn, quant)
    _dtype("b", b, torch.float8_e4m3fn, quant)
    _dtype("sfa", sfa, torch.float32, "the sm90 1D2D recipe takes fp32 scales")
    _dtype("sfb", sfb, torch.float32, "the sm90 1D2D recipe takes fp32 scales")
    _dtype("d", d, torch.bfloat16, "allocate it with torch.empty(M, N, dtype=torch.bfloat16)")
    if a.dim() != 2:
        raise ValueError(f"{_FN}: a must be 2-D (M, K), got shape {tuple(a.shape)}")
    if b.dim() != 2 or b.shape[1] != a.shape[1]:
        raise ValueError(
            f"{_FN}: b must be 2-D (N, K) with a's K = {a.shape[1]} (NT: d = a @ b.T), "
            f"got shape {tuple(b.shape)}"
        )
    (M, K), N = a.shape, b.shape[0]
    if K % 128 or K == 0:
        raise ValueError(
            f"{_FN}: K = a.shape[1] must be a positive multiple of 128 (whole 1x128 scale "
            f"blocks), got {K}; zero-pad a and b along K"
        )
    if N % 128 or N == 0:
        raise ValueError(
            f"{_FN}: N = b.shape[0] must be a positive multiple of 128 (whole 128x128 scale "
            f"blocks), got {N}; zero-pad b with rows and slice d's columns"
        )
    if max(M * K, M * N) >= 2**31:
        raise ValueError(f"{_FN}: a and d must have < 2^31 elements, got M={M}; split a's rows")
    if tuple(sfa.shape) != (M, K // 128):
        raise ValueError(
            f"{_FN}: sfa must be (M, K/128) = ({M}, {K // 128}) (one scale per 1x128 block "
            f"of a), got {tuple(sfa.shape)}"
        )
    if tuple(sfb.shape) != (N // 128, K // 128):
        raise ValueError(
            f"{_FN}: sfb must be (N/128, K/128) = ({N // 128}, {K // 128}) (one scale per "
            f"128x128 block of b), got {tuple(sfb.shape)}"
        )
    if tuple(d.shape) != (M, N):
        raise ValueError(f"{_FN}: d must be (M, N) = ({M}, {N}), got {tuple(d.shape)}")
    device = a.get_device()
    for name, t in (("a", a), ("b", b), ("d", d)):
        check_memory(_FN, name, t, device)
    check_memory(_FN, "sfa", sfa, device, contiguous=False)
    check_memory(_FN, "sfb", sfb, device, contiguous=False)
    return M, N, K


_PLANS: dict = {}
_sig = host.signature


def _plan(d, a, sfa, b, sfb) -> Callable:
    """The checked launch of one call signature, ``plan(d, a, sfa, b, sfb)``; the schedule
    switches are part of the key, as they are read at each call."""
    key = (schedule(), multicast(), _sig(d), _sig(a), _sig(sfa), _sig(b), _sig(sfb))
    return host.lookup(_PLANS, key, _resolve, d, a, sfa, b, sfb)


def _resolve(d, a, sfa, b, sfb) -> Callable:
    """Check a call and pick its kernel once: the tile model walks every candidate layout,
    which costs more than the launch."""
    M, N, K = _check(d, a, sfa, b, sfb)
    if M == 0:
        return host.nothing
    if schedule() == "basic":
        basic = host.main_of(compiled_fp8_gemm_nt(N, K, pick_bn(M, N, num_sms())))
        return lambda d, a, sfa, b, sfb: basic(a, b, sfa_rows(sfa), sfb.contiguous(), d)
    bm, bn, cluster, multicast_a = pick_normal_layout(M, N, K, num_sms(), multicast())
    options = normal_options(bm, bn)
    kernel = compiled_gemm_1d2d(
        "normal", N, K, bm, bn, cluster=cluster, multicast_a=multicast_a, **options
    )
    kernel = host.bound_on_first_call(kernel)
    index = no_index(a.device)
    return lambda d, a, sfa, b, sfb: kernel(a, b, sfa_rows(sfa), sfb.contiguous(), d, index)


@public_op("deepgemm_fp8_gemm_nt", mutates_args=("d",))
def _fp8_gemm_nt(
    d: torch.Tensor, a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor
) -> None:
    _plan(d, a, sfa, b, sfb)(d, a, sfa, b, sfb)


def fp8_gemm_nt(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    d: torch.Tensor,
    c: torch.Tensor | None = None,
    recipe: tuple[int, int, int] | None = None,
) -> None:
    """DeepGEMM's ``fp8_gemm_nt((a, sfa), (b, sfb), d)``: writes ``d = (a*sfa) @ (b*sfb).T``.

    ``c`` (accumulation) is not supported on sm90 upstream either; ``recipe`` may be None or
    (1, 128, 128), the only sm90 fp32 recipe this port runs.
    """
    if c is not None:
        raise ValueError(f"{_FN}: c must be None (sm90 1D2D writes d without accumulation)")
    if recipe is not None and tuple(recipe) != (1, 128, 128):
        raise ValueError(f"{_FN}: recipe must be None or (1, 128, 128), got {recipe!r}")
    for name, pair in (("a", a), ("b", b)):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{_FN}: {name} must be a pair ({name}, sf{name}) of tensors")
    args = (d, a[0], a[1], b[0], b[1])
    if host.plain_call(*args):
        _plan(*args)(*args)  # the op's body without the dispatcher (tirx_kernels.core.host)
    else:
        _fp8_gemm_nt(*args)
