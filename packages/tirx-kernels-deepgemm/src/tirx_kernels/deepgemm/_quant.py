# This file is a TIRx port of code from DeepGEMM
# (https://github.com/deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b),
# Copyright (c) 2025 DeepSeek.
# SPDX-License-Identifier: Apache-2.0 AND MIT
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FP8 quantization recipes and the accuracy metric of DeepGEMM's tests (torch only).

From ``deep_gemm/utils/math.py`` (``per_token_cast_to_fp8``, ``per_block_cast_to_fp8`` with
fp32 scales, i.e. ``use_ue8m0=False``), ``deep_gemm/utils/layout.py`` /
``csrc/apis/layout.hpp`` (``get_mn_major_tma_aligned_tensor`` for fp32 scales) and
``deep_gemm/testing/numeric.py`` (``calc_diff``).
"""

from __future__ import annotations

import torch

GRAN = 128
FP8_MAX = 448.0  # largest finite e4m3fn


def ceil_div(x: int, y: int) -> int:
    return -(-x // y)


def per_token_cast_to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, K) -> e4m3 (M, K) and fp32 scales (M, ceil(K/128)): one scale per 1x128 block,
    amax / 448 (amax clamped to >= 1e-4)."""
    m, k = x.shape
    kp = ceil_div(k, GRAN) * GRAN
    padded = x.new_zeros((m, kp))
    padded[:, :k] = x
    view = padded.view(m, kp // GRAN, GRAN)
    sf = view.abs().float().amax(dim=2).clamp(1e-4) / FP8_MAX
    q = (view * (1.0 / sf.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, kp)
    return q[:, :k].contiguous(), sf


def per_block_cast_to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) -> e4m3 (N, K) and fp32 scales (ceil(N/128), ceil(K/128)), one per 128x128."""
    n, k = x.shape
    np_, kp = ceil_div(n, GRAN) * GRAN, ceil_div(k, GRAN) * GRAN
    padded = x.new_zeros((np_, kp))
    padded[:n, :k] = x
    view = padded.view(np_ // GRAN, GRAN, kp // GRAN, GRAN)
    sf = view.abs().float().amax(dim=(1, 3), keepdim=True).clamp(1e-4) / FP8_MAX
    q = (view * (1.0 / sf)).to(torch.float8_e4m3fn).view(np_, kp)
    return q[:n, :k].contiguous(), sf.view(np_ // GRAN, kp // GRAN)


def tma_aligned_size(mn: int, element_size: int) -> int:
    """``mn`` rounded up so a row of that many elements is a multiple of 16 bytes."""
    align = 16 // element_size
    return ceil_div(mn, align) * align


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor) -> torch.Tensor:
    """fp32 scales (MN, SF_K) (or (G, MN, SF_K)) as the same values in MN-major storage
    whose MN stride is TMA-aligned (a multiple of 4 floats): the sfa layout the sm90
    kernels read. Returns ``sf`` itself when it already has that layout."""
    if sf.dtype != torch.float32 or sf.dim() not in (2, 3):
        raise ValueError(
            "get_mn_major_tma_aligned_tensor: sf must be a 2-D or 3-D float32 tensor, got "
            f"{sf.dim()}-D {sf.dtype}"
        )
    mn, sf_k = sf.shape[-2], sf.shape[-1]
    aligned = tma_aligned_size(mn, 4)
    if (
        sf.stride(-2) == 1
        and sf.stride(-1) == aligned
        and (sf.dim() == 2 or sf.stride(0) == aligned * sf_k)
    ):
        return sf
    lead = sf.shape[:-2]
    out = torch.empty((*lead, sf_k, aligned), dtype=sf.dtype, device=sf.device)
    out[..., :mn].copy_(sf.transpose(-1, -2))
    return out[..., :mn].transpose(-1, -2)


def sfa_rows(sfa: torch.Tensor) -> torch.Tensor:
    """sfa (M, KB) or (G, M, KB) as the kernels' (KB, MP) / (G*KB, MP) row-major matrix
    (``[g*KB + kb, m] = sfa[g, m, kb]``), MP a multiple of 4 and the start 16-byte aligned,
    as the TMA of its rows needs: read in place when it has
    ``get_mn_major_tma_aligned_tensor``'s layout inside its storage, else copied into it."""
    aligned = get_mn_major_tma_aligned_tensor(sfa)
    kb, mp = aligned.shape[-1], aligned.stride(-1)
    groups = aligned.shape[0] if aligned.dim() == 3 else 1
    need = (aligned.storage_offset() + groups * kb * mp) * aligned.element_size()
    if kb > 1 and aligned.data_ptr() % 16 == 0 and need <= aligned.untyped_storage().nbytes():
        return aligned.as_strided((groups * kb, mp), (mp, 1))
    rows = aligned.shape[-2]
    out = torch.empty((groups, kb, mp), dtype=sfa.dtype, device=sfa.device)
    out[..., :rows].copy_(sfa.reshape(groups, rows, kb).transpose(1, 2))
    return out.view(groups * kb, mp)


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's accuracy metric: 1 - 2 sum(xy) / sum(x^2 + y^2), in float64."""
    x, y = x.double(), y.double()
    denom = (x * x + y * y).sum()
    if denom == 0:
        return 0.0
    return float(1 - 2 * (x * y).sum() / denom)
