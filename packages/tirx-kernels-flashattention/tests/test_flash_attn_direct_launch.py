# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The attention kernel through the direct launcher's TMA path
(on unless ``TIRX_KERNELS_DIRECT_LAUNCH_TMA=0``; the GPU test here passed first):
descriptors of q, k and v, the batch read per call and seqlen_q pinned (the grid is computed
from it), and on a GPU the output of the host function's launch."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import direct_launch, host, launch_spec, toolchain
from tirx_kernels.flashattention import attention
from tirx_kernels.flashattention._attention_schedule import pick_schedule


def _call(causal: bool, device="cpu", schedule=None):
    """(kernel, the host function's arguments) of a B2 Sq300 Sk500 H32/8 d128 call
    (``schedule``: the default's when None)."""
    q = torch.randn(2, 300, 32, 128, dtype=torch.bfloat16, device=device)
    k = torch.randn(2, 500, 8, 128, dtype=torch.bfloat16, device=device)
    v = torch.randn_like(k)
    out, lse = torch.zeros_like(q), torch.zeros(2, 32, 300, device=device)
    kernel, tensors = attention.launch_args(False, q, k, v, out, lse, causal, schedule)
    return kernel, (*tensors, 2, 300, 500, 128**-0.5)


@pytest.mark.parametrize("causal", [False, True])
def test_q_k_v_descriptors_the_batch_per_call_and_seqlen_q_pinned(causal, monkeypatch):
    """One CTA per tile: the grid is (Q tiles, heads, batch)."""
    monkeypatch.setattr(launch_spec, "TMA", True)
    kernel, args = _call(causal, schedule=pick_schedule(128, 128, causal, {"persistent": False}))
    (launch,) = launch_spec.launch_spec(toolchain.host_code(kernel), args)
    assert sorted(m.arg for m in launch.maps) == [0, 1, 2]
    assert launch.dims[2] == -(5 + 1)  # grid.z: batch, argument #5, read per call
    assert launch.pinned == [(6, 300)]  # grid.x: ceil(seqlen_q / kBlockM)
    bound = direct_launch.bound(kernel, *args, dry=True)
    words = list(bound(*args))
    assert words[-6:-3] == [launch.dims[0], launch.dims[1], 2]
    with pytest.raises(ValueError, match="argument #6"):
        bound(*args[:6], 301, *args[7:])


@pytest.mark.parametrize("causal", [False, True])
def test_the_default_walk_launches_one_cta_per_sm_with_batch_and_seqlen_q_pinned(
    causal, monkeypatch
):
    """The persistent walk (the default at d 128): min(tiles, SMs) CTAs, so the batch and
    seqlen_q that count the tiles are pinned; causal adds the tile counter after LSE."""
    monkeypatch.setattr(launch_spec, "TMA", True)
    kernel, args = _call(causal)
    (launch,) = launch_spec.launch_spec(toolchain.host_code(kernel), args)
    tensors = 5 + causal
    assert sorted(m.arg for m in launch.maps) == [0, 1, 2]
    assert launch.dims[:3] == [min(3 * 32 * 2, toolchain.num_sms()), 1, 1]
    assert launch.pinned == [(tensors, 2), (tensors + 1, 300)]
    with pytest.raises(ValueError, match=f"argument #{tensors + 1}"):
        direct_launch.bound(kernel, *args, dry=True)(
            *args[: tensors + 1], 301, *args[tensors + 2 :]
        )


@pytest.mark.skipif(toolchain.gpu_arch() != "sm_90a", reason="needs an sm_90a GPU")
@pytest.mark.parametrize("causal", [False, True])
def test_on_the_gpu_the_tma_launch_writes_what_the_host_function_writes(causal, monkeypatch):
    monkeypatch.setattr(launch_spec, "TMA", True)
    kernel, args = _call(causal, "cuda")
    host.main_of(kernel)(*args)
    want_out, want_lse = args[3].clone(), args[4].clone()
    args[3].zero_()
    args[4].zero_()
    bound = direct_launch.bound(kernel, *args)
    assert bound is not None
    bound(*args)
    torch.testing.assert_close(args[3], want_out, rtol=0, atol=0)
    torch.testing.assert_close(args[4], want_lse, rtol=0, atol=0)
