# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""All-gather + GEMM on ``world`` GPUs: ``C[M, N] = all_gather(A_local) @ B[N, K]^T``.

Every rank holds its own ``A_local[m_local, K]`` and the same full ``B[N, K]`` (bf16 or
fp16). NCCL all-gathers the A shards in rank order into a pre-allocated ``A[M, K]``
(``M = world * m_local``) with ``torch.distributed.all_gather_into_tensor``, then our sm_90a
TIRx GEMM (``tirx_kernels.basic._gemm_tirx``: TMA + wgmma, fp32 accumulation, one rounding)
computes the full ``C`` on every rank. Numerics are the GEMM's; the gather is an exact copy.

Process group: ``KERNEL_META["num_gpus"]`` ranks, one GPU each, NCCL, set up by the harness
(``tirx_kernels.core.distributed``); the config's ``world`` must equal the group's size.
Rank r's A shard is seeded with ``seed * 1009 + 1 + r``, B with ``seed`` on every rank.
The gather buffer is a plain torch allocation (NCCL user-buffer registration through
torch's private ``ProcessGroup._get_backend(...).register_mem_pool`` is not used).

Dispatch domain: the GEMM's for ``(world * m_local, N, K)``: K % 8 == 0, N % 8 == 0.

Timing (``run_bench``): the distributed kineto timer (``tvm_tirx.testing.bench`` with a
``DistributedBenchContext``): the span from the gather's first GPU activity to the GEMM's
last, max over ranks, per sample. The NCCL gather runs on NCCL's stream; a blocking
collective makes the current (timing) stream wait for it, and the GEMM is launched on that
stream. Nothing needs resetting between launches (each overwrites its outputs), so no
``prepare`` callbacks. Reference "torch": the same NCCL gather + ``torch.matmul`` (cuBLAS).
"""

from __future__ import annotations

import unittest

import torch

from tirx_kernels.basic._gemm_tirx import make_gemm
from tirx_kernels.basic.gemm import compiled_gemm, gemm_config, launch_gemm
from tirx_kernels.basic.kernels.gemm import tolerance
from tirx_kernels.core import testing, toolchain

KERNEL_META = {
    "name": "allgather_gemm",
    "category": "basic",
    "compute_capability": 9,
    "archs": ["sm_90a"],
    "description": "C = all_gather(A_local) @ B^T over NCCL on 2 GPUs, then the TIRx GEMM",
    "num_gpus": 2,
}

# No op of its own: the gather is torch.distributed's collective over the caller's process
# group, so users call it and then the public GEMM op (tirx_kernels.basic.gemm.gemm).
PUBLIC_OPS: tuple[str, ...] = ()

CONFIGS = [
    {
        "label": "bf16_w2_ml1024_n4096_k4096",
        "dtype": "bfloat16",
        "world": 2,
        "m_local": 1024,
        "N": 4096,
        "K": 4096,
    },
    {
        "label": "fp16_w2_ml1024_n4096_k4096",
        "dtype": "float16",
        "world": 2,
        "m_local": 1024,
        "N": 4096,
        "K": 4096,
    },
    {
        "label": "bf16_w2_ml333_n520_k264",
        "dtype": "bfloat16",
        "world": 2,
        "m_local": 333,
        "N": 520,
        "K": 264,
    },
]

BENCH_CONFIGS = [
    {
        "label": f"bf16_w2_ml{m}_n{s}_k{s}",
        "dtype": "bfloat16",
        "world": 2,
        "m_local": m,
        "N": s,
        "K": s,
    }
    for m in [1024, 4096]
    for s in [4096, 8192]
]


def get_kernel(m_local, N, K, dtype="bfloat16", world=2, **_):
    """The GEMM PrimFunc over the gathered rows (what CPU CI compiles)."""
    return make_gemm(N, K, dtype, gemm_config(world * m_local, N, K))


def _check_group(world):
    """The process-group assumptions, explicit: NCCL, ``world`` ranks, an sm_90a GPU."""
    import torch.distributed as dist

    if toolchain.gpu_arch() not in KERNEL_META["archs"]:
        raise unittest.SkipTest(f"needs {world} {KERNEL_META['archs']} GPUs")
    if not dist.is_initialized():
        raise unittest.SkipTest("needs a torch.distributed process group (run through tirx-run)")
    if dist.get_world_size() != world:
        raise ValueError(
            f"allgather_gemm: config is for world={world}, the process group has "
            f"{dist.get_world_size()} ranks"
        )
    return dist.get_rank()


def _a_local(rank, m_local, K, tdtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed * 1009 + 1 + rank)
    return torch.randn(m_local, K, device="cuda", generator=gen).to(tdtype)


def prepare_data(m_local, N, K, dtype="bfloat16", world=2, rank=0, seed=0):
    """Rank-local tensors: (A_local, B, gather buffer A, C pre-filled with NaN)."""
    tdtype = testing.torch_dtype(dtype)
    a_local = _a_local(rank, m_local, K, tdtype, seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    b = torch.randn(N, K, device="cuda", generator=gen).to(tdtype)
    a = torch.empty(world * m_local, K, device="cuda", dtype=tdtype)
    c = torch.full((world * m_local, N), float("nan"), device="cuda", dtype=tdtype)
    return a_local, b, a, c


def _launch(config, a_local, b, a, c):
    import torch.distributed as dist

    dist.all_gather_into_tensor(a, a_local)  # blocking: the current stream waits for NCCL
    launch_gemm(a, b, c, config)


def reference(a_local, b, world):
    """torch.distributed all-gather (its own buffer) and an fp32 matmul."""
    import torch.distributed as dist

    a = torch.empty(world * a_local.shape[0], a_local.shape[1], device="cuda", dtype=a_local.dtype)
    dist.all_gather_into_tensor(a, a_local)
    return a, a.float() @ b.float().t()


def run_test(m_local, N, K, dtype="bfloat16", world=2):
    rank = _check_group(world)
    M = world * m_local
    config = gemm_config(M, N, K)
    compiled_gemm(N, K, dtype, config)  # compile outside the collective
    a_local, b, a, c = prepare_data(m_local, N, K, dtype, world, rank)
    _launch(config, a_local, b, a, c)
    ref_a, ref = reference(a_local, b, world)
    torch.cuda.synchronize()
    # the gather itself, against shards regenerated from their seeds (no communication)
    expect_a = torch.cat([_a_local(r, m_local, K, a.dtype, 0) for r in range(world)])
    for name, got in (("our gather buffer", a), ("torch all_gather", ref_a)):
        if not torch.equal(got, expect_a):
            rows = (got != expect_a).any(dim=1).nonzero().flatten()
            raise AssertionError(
                f"allgather_gemm rank {rank}: {name} differs from the rank "
                f"shards at {rows.numel()} rows, first row {int(rows[0])}"
            )
    tol = tolerance(K, dtype)
    what = f"allgather_gemm rank {rank} {dtype} world={world} m_local={m_local} N={N} K={K}"
    worst = testing.assert_close(what, c, ref, atol=tol, rtol=0.0)
    return {"rank": rank, "max_abs_err": worst, "tol": tol}


def run_bench(m_local, N, K, dtype="bfloat16", world=2, **options):
    from tirx_kernels.core import distributed
    from tirx_kernels.core.protocol import BENCH_OPTIONS

    rank = _check_group(world)
    config = gemm_config(world * m_local, N, K)
    compiled_gemm(N, K, dtype, config)
    a_local, b, a, c = prepare_data(m_local, N, K, dtype, world, rank)
    ctx = distributed.bench_context()  # timing stream: the current stream, ours launch on it

    def build_torch():
        import torch.distributed as dist

        a_ref, c_ref, bt = torch.empty_like(a), torch.empty_like(c), b.t()

        def launch():
            dist.all_gather_into_tensor(a_ref, a_local)
            torch.matmul(a_ref, bt, out=c_ref)

        return launch

    # toolchain.bench, not testing.bench: that one keeps only the tirx-run options and
    # would drop the distributed context (the kineto timer over ranks)
    chosen = {key: value for key, value in options.items() if key in BENCH_OPTIONS}
    return toolchain.bench(
        {"tirx": lambda: _launch(config, a_local, b, a, c)},
        references={"torch": build_torch},
        distributed=ctx,
        **chosen,
    )
