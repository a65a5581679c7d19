# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public GEMM op: ``gemm(a, b, out=None, *, bias=None, alpha=1.0, beta=0.0)``
computes ``alpha * a @ b.T + bias + beta * out`` (by default ``a @ b.T``).

``a`` is (M, K), ``b`` is (N, K) -- the kernel's NT layout, both K-major, as a linear
layer's weight is stored -- and ``out`` is (M, N); bf16 or fp16, fp32 accumulation.
``torch.ops.tirx_kernels.basic_gemm(out, a, b, bias=None, alpha=1.0, beta=0.0)`` writes
``out`` and returns None (a torch custom op: eager, CUDA graphs,
``torch.compile(fullgraph=True)``); ``gemm`` allocates ``out`` when it is None and returns
it. N and K are compile-time constants of the kernel, M
is a run-time argument: ``_gemm_schedule.pick_config`` picks the tile config (and split-K)
for the shape of the call, and the first call of each (N, K, dtype, config) compiles it
(seconds); every later call with any M reuses it (``compiled_gemm``, a per-process cache
keyed without M). Split-K configs also take a workspace and tile locks that
``split_scratch`` keeps per (device, stream).
"""

from __future__ import annotations

import functools

import torch

from tirx_kernels.core import toolchain
from tirx_kernels.core.ops import public_op

from ._args import DTYPE_NAMES, check_tensors, dtype_name
from ._gemm_schedule import TileConfig, num_sms, pick_config
from ._gemm_tirx import make_gemm

__all__ = ["compiled_gemm", "gemm", "gemm_config", "launch_gemm"]


@functools.cache
def compiled_gemm(N: int, K: int, dtype: str, config: TileConfig, ops: str = ""):
    """The kernel for one (N, K, dtype, tile config, epilogue ops), compiled once per
    process; it serves every M. Called as ``(a, b, out)`` (plain), ``(a, b, out, ws,
    lock)`` (split-K) or ``(a, b, out, ws, lock, bias, alpha, beta)`` (ops); see
    :func:`launch_gemm`."""
    return toolchain.compile(make_gemm(N, K, dtype, TileConfig(*config), ops=ops))


def gemm_config(M: int, N: int, K: int) -> TileConfig:
    """The tile config the op runs for an M x N x K product on this device."""
    return pick_config(M, N, K, num_sms())


# split-K scratch per (device, stream): launches on one stream run in order, so they can
# share it; the lock counters start at zero and each tile's last split resets its own
_SPLIT_SCRATCH: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}


def split_scratch(device: torch.device, floats: int, tiles: int):
    """(fp32 workspace of >= ``floats``, int32 locks of >= ``tiles``) for the current
    stream of ``device``; grown (and the new locks zeroed) when too small."""
    key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    ws, lock = _SPLIT_SCRATCH.get(key, (None, None))
    if ws is None or ws.numel() < floats:
        ws = torch.empty(floats, dtype=torch.float32, device=device)
    if lock is None or lock.numel() < tiles:
        lock = torch.zeros(tiles, dtype=torch.int32, device=device)
    _SPLIT_SCRATCH[key] = ws, lock
    return ws, lock


def launch_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: TileConfig,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
):
    """Run the compiled kernel of ``config`` on valid arguments: split-K with its scratch,
    the scale/bias epilogue when ``bias``, ``alpha`` or ``beta`` asks for it."""
    (M, K), N = a.shape, b.shape[0]
    ops = "scale_bias" if bias is not None else ("" if (alpha, beta) == (1.0, 0.0) else "scale")
    ex = compiled_gemm(N, K, DTYPE_NAMES[a.dtype], config, ops)
    if config.split == 1 and not ops:
        ex(a, b, out)
        return
    tiles = -(-M // config.bm) * -(-N // config.bn) if config.split > 1 else 1
    floats = config.split * tiles * config.bm * config.bn if config.split > 1 else 4
    ws, lock = split_scratch(a.device, floats, tiles)  # unread without split-K
    if not ops:
        ex(a, b, out, ws, lock)
        return
    placeholder = out.view(-1) if bias is None else bias  # 1-D, unread by "scale"
    ex(a, b, out, ws, lock, placeholder, float(alpha), float(beta))


def _check(
    out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None
) -> str:
    """The dtype name of valid arguments; ValueError naming the argument and the fix."""
    fn = "gemm"
    dtype = dtype_name(fn, "a", a)
    if b.dtype != a.dtype:
        raise ValueError(
            f"{fn}: b must have a's dtype {a.dtype}, got {b.dtype}; cast it with b.to(a.dtype)"
        )
    if a.dim() != 2:
        raise ValueError(
            f"{fn}: a must be 2-D (M, K), got shape {tuple(a.shape)}; "
            "flatten it with a.view(-1, a.shape[-1])"
        )
    if b.dim() != 2 or b.shape[1] != a.shape[1]:
        raise ValueError(
            f"{fn}: b must be 2-D (N, K) with a's K = {a.shape[1]} (gemm computes "
            f"a @ b.T), got shape {tuple(b.shape)}; for a (K, N) matrix pass "
            "b.T.contiguous()"
        )
    (M, K), N = a.shape, b.shape[0]
    if K % 8:
        raise ValueError(
            f"{fn}: K = a.shape[1] must be a multiple of 8 (TMA needs 16-byte "
            f"rows), got {K}; zero-pad a and b along K to a multiple of 8"
        )
    if N % 8:
        raise ValueError(
            f"{fn}: N = b.shape[0] must be a multiple of 8, got {N}; zero-pad b "
            "with rows to a multiple of 8 and slice the result's columns"
        )
    if max(M * K, N * K, M * N) >= 2**31:
        raise ValueError(
            f"{fn}: a, b and out must each have < 2^31 elements (int32 "
            f"indexing), got M={M} N={N} K={K}; split a into row blocks"
        )
    if out.shape != (M, N) or out.dtype != a.dtype:
        raise ValueError(
            f"{fn}: out must be ({M}, {N}) of a's dtype {a.dtype}, got "
            f"{tuple(out.shape)} {out.dtype}; allocate it with a.new_empty(M, N)"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != N or bias.dtype != a.dtype):
        raise ValueError(
            f"{fn}: bias must be 1-D ({N},) of a's dtype {a.dtype}, got "
            f"{tuple(bias.shape)} {bias.dtype}; pass bias.reshape({N}).to(a.dtype)"
        )
    check_tensors(fn, a=a, b=b, out=out, **({} if bias is None else {"bias": bias}))
    return dtype


@public_op("basic_gemm", mutates_args=("out",))
def _gemm(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> None:
    _check(out, a, b, bias)
    (M, K), N = a.shape, b.shape[0]
    if not M or not N:  # an empty output has nothing to launch
        return
    if not K:  # the kernel needs K >= 1; a sum over nothing is zero
        if beta:
            out.mul_(beta)
        else:
            out.zero_()
        if bias is not None:
            out.add_(bias)
        return
    launch_gemm(a, b, out, gemm_config(M, N, K), bias, alpha, beta)


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> torch.Tensor:
    """``alpha * a @ b.T + bias + beta * out`` for ``a`` (M, K), ``b`` (N, K) and ``bias``
    (N,) (default: ``a @ b.T``); writes ``out`` (M, N) when given and returns it. The sum is
    in fp32 and rounded once; ``beta != 0`` reads ``out``, so it needs ``out``."""
    if out is None:
        if beta:
            raise ValueError("gemm: beta != 0 reads out; pass out (M, N) holding C")
        # (M, N) for valid 2-D arguments; any shape otherwise, so the op's check reports them
        out = a.new_empty(a.shape[:-1] + b.shape[:1])
    _gemm(out, a, b, bias, alpha, beta)
    return out
