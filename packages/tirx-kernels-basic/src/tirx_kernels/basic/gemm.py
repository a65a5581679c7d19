# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public GEMM op: ``gemm(a, b, out=None, *, bias=None, alpha=1.0, beta=0.0)``
computes ``alpha * a @ b.T + bias + beta * out`` (by default ``a @ b.T``).

``a`` is (M, K), ``b`` is (N, K) -- as a linear layer's weight is stored -- and ``out`` is
(M, N), contiguous; bf16 or fp16, fp32 accumulation. ``a`` and ``b`` are each either
contiguous or the transpose of a contiguous tensor (``x.t()``): :func:`gemm_layout` reads the
kernel layout ("NT", "NN", "TN", "TT", ``_gemm_tirx``) from their strides, so no operand is
copied; other strides raise ValueError. (``tirx_kernels.basic.matmul`` is ``a @ b``.)
``torch.ops.tirx_kernels.basic_gemm(out, a, b, bias=None, alpha=1.0, beta=0.0)`` writes
``out`` and returns None (a torch custom op: eager, CUDA graphs,
``torch.compile(fullgraph=True)``); ``gemm`` allocates ``out`` when it is None and returns
it. N and K are compile-time constants of the kernel, M
is a run-time argument: ``_gemm_schedule.pick_config`` picks the tile config (and split-K)
for the shape of the call, and the first call of each (N, K, dtype, config) compiles it
(seconds); every later call with any M reuses it (``compiled_gemm``, a per-process cache
keyed without M; one kernel per layout). Split-K configs also take a workspace and tile locks that
``split_scratch`` keeps per (device, stream).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from tirx_kernels.core import host, toolchain
from tirx_kernels.core.args import check_memory
from tirx_kernels.core.ops import public_op

from ._args import DTYPE_NAMES, matrix_dtype_name
from ._gemm_schedule import TileConfig, num_sms, pick_config
from ._gemm_tirx import make_gemm

__all__ = [
    "compiled_gemm",
    "gemm",
    "gemm_config",
    "gemm_launcher",
    "gemm_layout",
    "launch_gemm",
]


@functools.cache
def compiled_gemm(
    N: int, K: int, dtype: str, config: TileConfig, ops: str = "", layout: str = "NT"
):
    """The kernel for one (N, K, dtype, tile config, epilogue ops, layout), compiled once
    per process; it serves every M. Called as ``(a, b, out)`` (plain), ``(a, b, out, ws,
    lock)`` (split-K) or ``(a, b, out, ws, lock, bias, alpha, beta)`` (ops), with ``a`` and
    ``b`` as stored (``[K, M]``/``[K, N]`` when MN-major); see :func:`launch_gemm`."""
    return toolchain.compile(make_gemm(N, K, dtype, TileConfig(*config), ops=ops, layout=layout))


def _major(t: torch.Tensor, natural: str, transposed: str) -> str | None:
    """``natural`` when ``t`` is contiguous, ``transposed`` when ``t.t()`` is, else None."""
    if t.is_contiguous():
        return natural
    if t.t().is_contiguous():
        return transposed
    return None


def gemm_layout(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """The kernel layout of ``a @ b.T`` for 2-D ``a`` (M, K) and ``b`` (N, K) views, from
    their strides: A "N" when ``a`` is contiguous, "T" when ``a.t()`` is (stored (K, M));
    B "T" when ``b`` is contiguous, "N" when ``b.t()`` is (stored (K, N), ``a @ w``).
    None when an operand is neither."""
    la, lb = _major(a, "N", "T"), _major(b, "T", "N")
    return la + lb if la and lb else None


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


def _ops(bias: torch.Tensor | None, scaled: bool) -> str:
    """The epilogue kernel family a call needs: the plain ``a @ b.T`` unless it adds a bias
    or ``scaled`` (alpha or beta is not the default)."""
    if bias is not None:
        return "scale_bias"
    return "scale" if scaled else ""


def gemm_launcher(a: torch.Tensor, b: torch.Tensor, config: TileConfig, ops: str) -> Callable:
    """``launch(out, a, b, bias, alpha, beta)`` of the compiled kernel of ``config`` and
    ``ops`` for operands laid out as ``a`` and ``b`` are (``a`` (M, K), ``b`` (N, K), each
    contiguous or a transposed contiguous tensor: :func:`gemm_layout`), unchecked: the
    kernel takes each operand as stored, split-K its scratch, the epilogue its operands."""
    (M, K), N = a.shape, b.shape[0]
    layout = gemm_layout(a, b) or "NT"
    a_t, b_t = layout[0] == "T", layout[1] == "N"  # stored transposed: hand over x.t()
    fn = host.main_of(compiled_gemm(N, K, DTYPE_NAMES[a.dtype], config, ops, layout))
    # NT without an epilogue hands the kernel the caller's a, b and out as they are
    as_they_are = host.kernel_checked if layout == "NT" and not ops else (lambda plan: plan)
    if config.split == 1 and not ops:

        def plain(out, a, b, bias, alpha, beta):
            fn(a.t() if a_t else a, b.t() if b_t else b, out)

        return as_they_are(plain)
    tiles = -(-M // config.bm) * -(-N // config.bn) if config.split > 1 else 1
    floats = config.split * tiles * config.bm * config.bn if config.split > 1 else 4

    def with_scratch(out, a, b, bias, alpha, beta):
        ws, lock = split_scratch(a.device, floats, tiles)  # unread without split-K
        operands = (a.t() if a_t else a, b.t() if b_t else b, out, ws, lock)
        if not ops:
            fn(*operands)
        else:  # a 1-D placeholder for the bias "scale" does not read
            fn(*operands, out.view(-1) if bias is None else bias, float(alpha), float(beta))

    return as_they_are(with_scratch)


def launch_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: TileConfig,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
):
    """Run the compiled kernel of ``config`` on valid arguments (:func:`gemm_launcher`)."""
    ops = _ops(bias, (alpha, beta) != (1.0, 0.0))
    gemm_launcher(a, b, config, ops)(out, a, b, bias, alpha, beta)


def _check(
    out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None
) -> str:
    """The dtype name of valid arguments; ValueError naming the argument and the fix."""
    fn = "gemm"
    dtype = matrix_dtype_name(fn, a, b)
    if b.dim() != 2 or b.shape[1] != a.shape[1]:
        raise ValueError(
            f"{fn}: b must be 2-D (N, K) with a's K = {a.shape[1]} (gemm computes "
            f"a @ b.T), got shape {tuple(b.shape)}; for a (K, N) matrix pass b.T "
            "(or call tirx_kernels.basic.matmul)"
        )
    check_operands(fn, out, a, b, bias, n_of_b="b.shape[0]")
    return dtype


def check_operands(
    fn: str,
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    n_of_b: str,
    b_name: str = "b",
) -> str:
    """The checks :func:`gemm` and ``matmul`` share, on 2-D ``a`` (M, K) and ``b`` (N, K)
    with matching K (``b`` is matmul's ``b.t()``; ``b_name``/``n_of_b`` name it in the
    messages): layouts, TMA's 16-byte strides, sizes, ``out``, ``bias``, memory. Returns
    the kernel layout (:func:`gemm_layout`)."""
    for name, t in (("a", a), (b_name, b)):
        if _major(t, "N", "T") is None:
            raise ValueError(
                f"{fn}: {name} must be contiguous or the transpose of a contiguous tensor "
                f"({name}.t().is_contiguous()), got strides {tuple(t.stride())}; "
                f"pass {name}.contiguous()"
            )
    layout = gemm_layout(a, b)
    (M, K), N = a.shape, b.shape[0]
    if K % 8 and layout != "TN":
        raise ValueError(
            f"{fn}: K = a.shape[1] must be a multiple of 8 (TMA needs 16-byte "
            f"rows) unless both operands are MN-major, got {K}; zero-pad a and b along K "
            "to a multiple of 8"
        )
    if N % 8:
        raise ValueError(
            f"{fn}: N = {n_of_b} must be a multiple of 8, got {N}; zero-pad {b_name} "
            "to a multiple of 8 along N and slice the result's columns"
        )
    if M % 8 and layout[0] == "T":
        raise ValueError(
            f"{fn}: a is the transpose of a contiguous (K, M) tensor, whose rows TMA reads "
            f"with 16-byte strides: M must be a multiple of 8 then, got {M}; pass "
            "a.contiguous()"
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
    device = a.get_device()
    for name, t in (("a", a), (b_name, b)):  # contiguous or transposed: checked above
        check_memory(fn, name, t, device, contiguous=False)
        if t.data_ptr() % 16:
            raise ValueError(
                f"{fn}: {name} must be 16-byte aligned (a view at an offset is not); "
                f"pass {name}.clone()"
            )
    for name, t in (("out", out), ("bias", bias)):
        if t is not None:
            check_memory(fn, name, t, device)
    return layout


_PLANS: dict = {}
_FAST: dict = {}  # kernel-checked plans of a @ b.T by (a's and b's shapes, dtype, device)
_sig = host.signature


def _plan(out, a, b, bias, scaled: bool) -> Callable:
    """The checked launch of one call signature, ``plan(out, a, b, bias, alpha, beta)``
    (:mod:`tirx_kernels.core.host`); ``scaled``: alpha or beta is not the default."""
    key = (scaled, _sig(out), _sig(a), _sig(b), None if bias is None else _sig(bias))
    return host.lookup(_PLANS, key, _resolve, out, a, b, bias, scaled)


def _resolve(out, a, b, bias, scaled: bool) -> Callable:
    _check(out, a, b, bias)
    (M, K), N = a.shape, b.shape[0]
    if not M or not N:  # an empty output has nothing to launch
        return host.nothing
    if not K:
        return _no_k
    return gemm_launcher(a, b, gemm_config(M, N, K), _ops(bias, scaled))


def _no_k(out, a, b, bias, alpha, beta) -> None:
    """K = 0: a sum over nothing is zero (the kernel needs K >= 1)."""
    if beta:
        out.mul_(beta)
    else:
        out.zero_()
    if bias is not None:
        out.add_(bias)


def _run(out, a, b, bias, alpha, beta) -> None:
    """One call: a plain ``a @ b.T`` by a coarse key (:func:`host.run`: the kernel checks the
    tensors), an epilogue by its call signature."""
    scaled = (alpha, beta) != (1.0, 0.0)
    if bias is None and not scaled:
        key = (a.shape, b.shape, a.dtype, a.get_device())
        host.run(_FAST, key, (out, a, b, None, 1.0, 0.0), _plan, out, a, b, None, False)
    else:
        _plan(out, a, b, bias, scaled)(out, a, b, bias, alpha, beta)


@public_op("basic_gemm", mutates_args=("out",))
def _gemm(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> None:
    _run(out, a, b, bias, alpha, beta)


def _direct(out, a, b, bias) -> bool:
    """Whether an eager call may skip the dispatcher (:func:`host.plain_call`)."""
    return host.plain_call(a, out, b) and (bias is None or type(bias) is torch.Tensor)


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
    if _direct(out, a, b, bias):  # checked once per signature, then launched
        _run(out, a, b, bias, alpha, beta)
    else:
        _gemm(out, a, b, bias, alpha, beta)
    return out
