# This file is a TIRx port of code from FlashInfer
# (https://github.com/flashinfer-ai/flashinfer @ fb28d7242b3506a2348265962041acc1fb56cca4),
# Copyright (c) 2024 by FlashInfer team.
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The contract functions of the four RMSNorm kernels, which differ only in ``weight_bias``.

Upstream: ``include/flashinfer/norm.cuh`` (``RMSNormKernel`` and ``FusedAddRMSNormKernel``,
whose ``weight_bias`` is 0 or 1) and ``flashinfer/norm/__init__.py`` (the four ops).

``RMSNormKernelAPI`` serves ``flashinfer_rmsnorm`` (weight_bias 0) and
``flashinfer_gemma_rmsnorm`` (1); ``FusedAddRMSNormKernelAPI`` serves the two fused-add
kernels. Each kernel module keeps its own KERNEL_META, docstring and upstream citation and
binds the methods of one instance as its module-level functions. ``op`` names the FlashInfer
function of the same semantics (``flashinfer.norm.<op>``): the reference the tests and
benchmarks compare against.
"""

from __future__ import annotations

import torch

from . import _norm

EPS = 1e-6  # FlashInfer's default


class RMSNormKernelAPI:
    """``out = T(float(x) * rsqrt(mean(x^2) + eps) * (weight_bias + float(w)))``."""

    kind = "rmsnorm"

    def __init__(self, meta: dict, weight_bias: float, op: str):
        self.meta, self.weight_bias, self.op = meta, float(weight_bias), op

    def get_kernel(self, dtype, hidden, tokens=None, **_):
        """The TIRx PrimFunc the host launches for ``tokens`` rows (``_norm.schedule``).

        Tokens are dynamic; their count picks the schedule.
        """
        return _norm.kernel_for(self.kind, dtype, hidden, tokens, self.weight_bias)

    def flashinfer_op(self):
        import flashinfer

        return getattr(flashinfer.norm, self.op)

    def weight(self, dtype, hidden):
        # centred so that the applied weight (weight_bias + w) is about 1 +- 0.5
        return _norm.randn(
            (hidden,), dtype, seed=hidden + 1, scale=0.5, shift=1.0 - self.weight_bias
        )

    def torch_weight(self, w):
        """The weight torch's rms_norm applies: (weight_bias + w), folded outside timing."""
        return w if self.weight_bias == 0 else (self.weight_bias + w.float()).to(w.dtype)

    def apply(self, x, w, eps=EPS, out=None):
        """``flashinfer.norm.<op>(x, w, eps, out)`` for 2D x, through the TIRx kernel."""
        return _norm.rmsnorm(x, w, eps, out, weight_bias=self.weight_bias)

    def prepare_data(self, dtype, tokens, hidden, **_):
        return {
            "x": _norm.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden),
            "w": self.weight(dtype, hidden),
        }

    def reference(self, x, w, eps=EPS):
        """fp32 torch RMSNorm (unrounded)."""
        xf = x.float()
        rms_rcp = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
        return xf * rms_rcp * (self.weight_bias + w.float())

    def run_test(self, dtype, tokens, hidden, **_):
        _norm.skip_unless_gpu(self.meta)
        data = self.prepare_data(dtype, tokens, hidden)
        out = self.apply(data["x"], data["w"])
        torch.cuda.synchronize()
        _norm.assert_close("vs torch fp32", out, self.reference(**data), _norm.dtype_tols(dtype))
        if _norm.flashinfer_available():
            want = self.flashinfer_op()(data["x"], data["w"], eps=EPS)
            _norm.assert_close("vs flashinfer", out, want, _norm.ulp_tols(dtype))

    def run_bench(
        self,
        dtype,
        tokens,
        hidden,
        *,
        warmup=None,
        repeat=None,
        timer=None,
        rounds=1,
        cooldown_s=1.0,
        **_,
    ):
        from tirx_kernels.core import toolchain

        data = self.prepare_data(dtype, tokens, hidden)
        run = _norm.launcher(self.kind, dtype, hidden, tokens, self.weight_bias)
        ours, references = self.bench_impls(data, hidden, run)
        return toolchain.bench(
            {"tirx": ours},
            references=references,
            warmup=warmup,
            repeat=repeat,
            timer=timer,
            rounds=rounds,
            cooldown_s=cooldown_s,
        )

    def bench_impls(self, data, hidden, run):
        """(our launch, {reference name: lazy builder of its launch}) on ``data``."""
        x, w = data["x"], data["w"]
        out = torch.empty_like(x)

        def build_flashinfer():
            op, o = self.flashinfer_op(), torch.empty_like(x)
            op(x, w, eps=EPS, out=o)  # JIT outside timing
            return lambda: op(x, w, eps=EPS, out=o)

        def build_torch():
            w1 = self.torch_weight(w)
            return lambda: torch.nn.functional.rms_norm(x, (hidden,), w1, EPS)

        ours = lambda: run(x, w, out, EPS)  # noqa: E731
        return ours, {"flashinfer": build_flashinfer, "torch": build_torch}


class FusedAddRMSNormKernelAPI(RMSNormKernelAPI):
    """In place: ``residual = T(x + residual)``; ``x = RMSNorm(fp32 sum) * (weight_bias + w)``."""

    kind = "fused_add_rmsnorm"

    def apply(self, x, residual, w, eps=EPS):
        """``flashinfer.norm.<op>(x, residual, w, eps)``: updates x and residual."""
        _norm.fused_add_rmsnorm(x, residual, w, eps, weight_bias=self.weight_bias)

    def prepare_data(self, dtype, tokens, hidden, **_):
        return {
            "x": _norm.randn((tokens, hidden), dtype, seed=tokens * 7 + hidden),
            "residual": _norm.randn((tokens, hidden), dtype, seed=tokens * 11 + hidden + 3),
            "w": self.weight(dtype, hidden),
        }

    def reference(self, x, residual, w, eps=EPS):
        """(new residual rounded to the dtype, normalized output in fp32), from fp32 torch."""
        s = x.float() + residual.float()
        rms_rcp = torch.rsqrt(s.square().mean(-1, keepdim=True) + eps)
        return s.to(x.dtype), s * rms_rcp * (self.weight_bias + w.float())

    def run_test(self, dtype, tokens, hidden, **_):
        _norm.skip_unless_gpu(self.meta)
        data = self.prepare_data(dtype, tokens, hidden)
        want_res, want_out = self.reference(**data)
        x, res = data["x"].clone(), data["residual"].clone()
        self.apply(x, res, data["w"])
        torch.cuda.synchronize()
        # The new residual is one fp32 add rounded once: it must match bit for bit.
        _norm.assert_close("residual vs torch", res, want_res, {"rtol": 0, "atol": 0})
        _norm.assert_close("output vs torch fp32", x, want_out, _norm.dtype_tols(dtype))
        if _norm.flashinfer_available():
            fx, fres = data["x"].clone(), data["residual"].clone()
            self.flashinfer_op()(fx, fres, data["w"], eps=EPS)
            _norm.assert_close("residual vs flashinfer", res, fres, {"rtol": 0, "atol": 0})
            _norm.assert_close("output vs flashinfer", x, fx, _norm.ulp_tols(dtype))

    def bench_impls(self, data, hidden, run):
        w = data["w"]
        x0, r0 = data["x"].clone(), data["residual"].clone()  # each implementation owns its state

        def build_flashinfer():
            op = self.flashinfer_op()
            x1, r1 = data["x"].clone(), data["residual"].clone()
            op(x1, r1, w, eps=EPS)  # JIT outside timing
            return lambda: op(x1, r1, w, eps=EPS)

        def build_torch():
            x2, r2 = data["x"].clone(), data["residual"].clone()
            w1 = self.torch_weight(w)

            def run_torch():
                r2.add_(x2)
                return torch.nn.functional.rms_norm(r2, (hidden,), w1, EPS)

            return run_torch

        ours = lambda: run(x0, r0, w, EPS)  # noqa: E731
        return ours, {"flashinfer": build_flashinfer, "torch": build_torch}
