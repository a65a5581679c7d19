# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""GPU tests of ``flash_attn_func`` and ``flash_attn_varlen_func`` (sm_90a only; a few small
shapes, so a crashing kernel costs little): against the fp32 reference eagerly, in a CUDA
graph and under torch.compile, each schedule, and the empty cases. The full matrices run as
``tirx-run test --kernel flash_attn_fwd`` and ``--kernel flash_attn_varlen_fwd``."""

from __future__ import annotations

import math

import pytest
import torch

from tirx_kernels.core import toolchain
from tirx_kernels.flashattention import flash_attn_func, flash_attn_varlen_func
from tirx_kernels.flashattention._attention_schedule import pick_schedule
from tirx_kernels.flashattention.attention import launch_args
from tirx_kernels.flashattention.kernels import flash_attn_fwd as fa
from tirx_kernels.flashattention.kernels import flash_attn_varlen_fwd as vf

needs_sm90a = pytest.mark.skipif(
    not torch.cuda.is_available() or toolchain.gpu_arch() != "sm_90a",
    reason="needs an sm_90a GPU",
)


def _data(b, sq, sk, hq, hk, d, dtype="bfloat16"):
    return fa.prepare_data(dtype, b, sq, sk, hq, hk, d, d)


@needs_sm90a
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference_eager_graph_compile(causal):
    data = _data(2, 150, 300, 4, 2, 128)
    scale = 0.1
    out, lse = flash_attn_func(**data, softmax_scale=scale, causal=causal)
    fa.check(out, lse, data, scale, causal)

    out_g = torch.empty_like(out)
    lse_g = torch.empty_like(lse)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.ops.tirx_kernels.flashattention_fwd(
            out_g, lse_g, data["q"], data["k"], data["v"], scale, causal
        )
    graph.replay()
    torch.testing.assert_close(out_g, out, rtol=0, atol=0)
    torch.testing.assert_close(lse_g, lse, rtol=0, atol=0)

    compiled = torch.compile(
        lambda q, k, v: flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)[0] * 2,
        fullgraph=True,
    )
    torch.testing.assert_close(compiled(**data), out * 2, rtol=0, atol=0)


# schedule overrides (as TIRX_FLASH_ATTN_SCHEDULE would give them): the default, without
# ping-pong, the first working schedule (one barrier per K/V slot, no ping-pong), the
# simplest (each GEMM waited for), and three consumer warpgroups (kBlockM 192) with
# and without their turns, and with P through shared memory
SCHEDULES = (
    {},
    {"pingpong": False},
    {"bn": 128, "split_kv": False, "pingpong": False, "regs": 40},
    {"bn": 128, "overlap": False, "split_kv": False, "pingpong": False, "regs": 40},
    {"bm": 192, "bn": 128},  # three consumer warpgroups (upstream's d 64 tile), turns 1-2-3
    {"bm": 192, "bn": 128, "pingpong": False},
    {"bm": 192, "bn": 128, "pv_smem": True},  # P through shared memory, SS P V
    {"early_rescale": True},  # O rescaled under the S GEMM, before P V is issued
    {"persistent": False},  # one CTA per tile (the default walks them at d 64 and 128)
)
# the persistent kernel, in tests of its own: its first GPU run hung (registers over-asked,
# 2026-12-06), and a hang ends the process, so it must not take the other schedules with it
PERSISTENT = (
    {"persistent": True},  # one CTA per SM: here one tile each
    {"persistent": True, "grid": 3},  # three CTAs walking 5-6 tiles each: Q reloads, turns
    {"persistent": True, "grid": 3, "early_rescale": True},  # corrections across tiles
)


def _schedule_id(override):
    return ",".join(f"{k}={int(v)}" for k, v in override.items()) or "default"


@needs_sm90a
@pytest.mark.parametrize("override", SCHEDULES, ids=_schedule_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_schedules_match_reference(override, d, causal):
    """Each schedule, launched directly: if only the default fails, its additions are at
    fault."""
    _check_schedule(override, d, causal)


@needs_sm90a
@pytest.mark.parametrize("causal", [False, True])
def test_early_rescale_at_head_dim_256(causal):
    """Upstream rescales O before P V for head dims above 128 (``RescaleOBeforeGemm``)."""
    _check_schedule({"early_rescale": True}, 256, causal)


@needs_sm90a
@pytest.mark.parametrize("override", PERSISTENT, ids=_schedule_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_schedules_match_reference(override, d, causal):
    _check_schedule(override, d, causal)


@needs_sm90a
@pytest.mark.parametrize("causal", [False, True])
def test_upstream_d64_tile_matches_reference(causal):
    """192 x 192 with P through shared memory, upstream's non-causal d 64 tile (d 64 only:
    at d 128 its P tiles leave room for one K/V slot)."""
    _check_schedule({"bm": 192, "bn": 192, "pv_smem": True}, 64, causal)


@needs_sm90a
@pytest.mark.parametrize("grid", [0, 5])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape", [(3, 1100, 700, 8, 2), (2, 900, 130, 4, 4)], ids=["long", "sq>sk"]
)
def test_persistent_walk_matches_reference(grid, causal, shape):
    """The persistent kernel over more tiles than SMs (216: every CTA walks one or two) and,
    with ``grid`` 5, many per CTA; ``sq>sk`` causal: the first Q tiles see no key (no K/V
    block, only the Q barrier)."""
    _check_schedule({"persistent": True, "grid": grid}, 128, causal, shape)


def _check_schedule(override, d, causal, shape=(2, 200, 1000, 4, 2)):
    b, sq, sk, hq, hk = shape  # default: 6-8 K/V blocks, the rings wrap, turns repeat
    data = _data(b, sq, sk, hq, hk, d)
    schedule = pick_schedule(d, d, causal, override)
    out = torch.empty(b, sq, hq, d, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(b, hq, sq, dtype=torch.float32, device="cuda")
    kernel, tensors = launch_args(
        False, data["q"], data["k"], data["v"], out, lse, causal, schedule
    )
    kernel(*tensors, b, sq, sk, 0.125)
    torch.cuda.synchronize()
    fa.check(out, lse, data, 0.125, causal)


@needs_sm90a
def test_empty_sequences():
    data = _data(1, 0, 5, 2, 2, 64)
    out, lse = flash_attn_func(**data)
    assert out.shape == (1, 0, 2, 64) and lse.shape == (1, 2, 0)
    data = _data(1, 3, 0, 2, 2, 64)
    out, lse = flash_attn_func(**data)
    assert (out == 0).all() and torch.isneginf(lse).all()
    assert not math.isnan(out.float().sum().item())


@needs_sm90a
@pytest.mark.parametrize("config", vf.CONFIGS[:3], ids=lambda c: c["label"])
def test_varlen_matches_reference(config):
    """Mixed short and long sequences, causal and not, an empty query sequence and one
    without keys (the rest of the matrix: ``tirx-run test --kernel flash_attn_varlen_fwd``)."""
    vf.run_test(**{k: v for k, v in config.items() if k != "label"})


@needs_sm90a
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_of_equal_lengths_matches_the_batched_op_and_a_graph(causal):
    b, s, hq, hk, d = 3, 150, 4, 2, 128
    data = _data(b, s, s, hq, hk, d)
    out, lse = flash_attn_func(**data, causal=causal)
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device="cuda")
    packed = {name: t.view(b * s, *t.shape[2:]) for name, t in data.items()}
    out_v, lse_v = flash_attn_varlen_func(
        **packed, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=s, max_seqlen_k=s, causal=causal
    )
    torch.testing.assert_close(out_v.view(b, s, hq, d), out, rtol=0, atol=2e-2)
    torch.testing.assert_close(lse_v.view(hq, b, s).transpose(0, 1), lse, rtol=0, atol=1e-4)

    out_g = torch.empty_like(out_v)
    lse_g = torch.empty_like(lse_v)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.ops.tirx_kernels.flashattention_varlen_fwd(
            out_g, lse_g, packed["q"], packed["k"], packed["v"], s, cu, cu, d**-0.5, causal
        )
    graph.replay()
    torch.testing.assert_close(out_g, out_v, rtol=0, atol=0)
    torch.testing.assert_close(lse_g, lse_v, rtol=0, atol=0)


@needs_sm90a
@pytest.mark.parametrize("batch", [1, 3])
def test_public_calls_compute_the_same_attention(batch):
    """Each callable the per-call table times (ours, torch SDPA, FlashInfer's FA3 where it
    is installed) gives our op's out: they time the same work."""
    calls = fa.public_calls(batch)
    assert "torch_sdpa" in calls
    want = calls.pop("tirx")()[0]
    for name, call in calls.items():
        got = call()
        got = got.transpose(1, 2) if name.startswith("torch_sdpa") else got.view(want.shape)
        torch.testing.assert_close(
            got, want, rtol=2e-2, atol=2e-2, msg=lambda m, name=name: f"{name}: {m}"
        )
