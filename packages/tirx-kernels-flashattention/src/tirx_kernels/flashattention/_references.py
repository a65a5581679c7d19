# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""FlashInfer's FA3 backend as a timed reference of the attention benches (issue #23):
``single_prefill_with_kv_cache`` for one sequence, the ragged batch prefill wrapper for a
batch or packed sequences. Each builder sets its call up (and JIT-builds FlashInfer's
module per head dim the first time, slowly; cached under ``FLASHINFER_WORKSPACE_BASE``)
and returns a launch, which returns out as q's rows ``(tokens, heads_q, dv)``. Imported only
where FlashInfer is installed."""

from __future__ import annotations

from collections.abc import Callable

import torch

WORKSPACE_BYTES = 128 << 20  # FlashInfer's recommended float workspace


def single(q, k, v, causal: bool, scale: float) -> Callable[[], torch.Tensor]:
    """FA3 on one sequence: q ``(seqlen_q, heads_q, d)``, k and v ``(seqlen_k, heads_kv, ·)``."""
    import flashinfer

    def launch():
        return flashinfer.single_prefill_with_kv_cache(
            q, k, v, causal=causal, sm_scale=scale, backend="fa3"
        )

    launch()
    return launch


def ragged(
    q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool, scale: float
) -> Callable[[], torch.Tensor]:
    """FA3 on packed sequences: q ``(total_q, heads_q, d)``, k and v ``(total_k, heads_kv,
    ·)``, sequence ``i`` at rows ``cu_seqlens[i]:cu_seqlens[i + 1]`` (causal bottom-right
    aligned, as ours)."""
    import flashinfer

    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD", backend="fa3")
    wrapper.plan(
        cu_seqlens_q.to(torch.int32),
        cu_seqlens_k.to(torch.int32),
        q.shape[1],
        k.shape[1],
        q.shape[2],
        head_dim_vo=v.shape[2],
        causal=causal,
        sm_scale=scale,
        q_data_type=q.dtype,
        kv_data_type=k.dtype,
    )

    def launch():
        return wrapper.run(q, k, v)

    launch()
    return launch


def batched(q, k, v, causal: bool, scale: float) -> Callable[[], torch.Tensor]:
    """FA3 on a batch of equal lengths, q ``(batch, seqlen_q, heads_q, d)``: :func:`ragged`
    over its rows, or :func:`single` for one sequence."""
    batch, seqlen_q = q.shape[:2]
    seqlen_k = k.shape[1]
    if batch == 1:
        return single(q[0], k[0], v[0], causal, scale)
    starts = torch.arange(batch + 1, dtype=torch.int32, device=q.device)
    return ragged(
        q.flatten(0, 1),
        k.flatten(0, 1),
        v.flatten(0, 1),
        starts * seqlen_q,
        starts * seqlen_k,
        causal,
        scale,
    )
