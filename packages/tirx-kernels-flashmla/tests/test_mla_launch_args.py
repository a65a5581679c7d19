# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The decode op's kernel arguments against the kernels' parameters, on the CPU: the op runs
on CPU tensors (its CUDA-only check off) and hands both launches' arguments to stand-ins for
the compiled kernels, which compare them with the kernels' (uncompiled) parameters as the
launch on the GPU does."""

from __future__ import annotations

import pytest
import torch

from tirx_kernels.core import host, testing
from tirx_kernels.flashmla import decode
from tirx_kernels.flashmla._mla_decode_schedule import DEFAULT_VARIANT, VARIANTS


@pytest.fixture
def launched(monkeypatch):
    funcs: list = []

    def make_decode(variant, dtype, h_q, s_q, causal):
        return decode.DECODE_FACTORIES[variant](dtype, h_q, s_q, causal)

    monkeypatch.setattr(decode, "_decode_exec", testing.checked_launches(make_decode, funcs))

    def combine_kernel(dtype, h_q, s_q, combine):
        return decode.COMBINE_FACTORIES[combine](dtype, h_q, s_q)

    monkeypatch.setattr(decode, "_combine_exec", testing.checked_launches(combine_kernel, funcs))
    monkeypatch.setattr(host, "main_of", lambda executable: executable)  # plans' fallback
    check_args = decode.check_args

    def check_args_on_the_cpu(q, *args):  # every check but the last, CUDA's
        try:
            check_args(q, *args)
        except ValueError as e:
            if "must be a CUDA tensor" not in str(e):
                raise

    monkeypatch.setattr(decode, "check_args", check_args_on_the_cpu)
    return funcs


@pytest.mark.parametrize("variant, combine", [(v, "row") for v in VARIANTS] + [("v5", "warp")])
@pytest.mark.parametrize("s_q, h_q", [(1, 16), (2, 64), (1, 128)])
def test_decode_launches_match_the_kernels(launched, monkeypatch, variant, combine, s_q, h_q):
    monkeypatch.setenv("TIRX_FLASHMLA_VARIANT", variant)
    monkeypatch.setenv("TIRX_FLASHMLA_COMBINE", combine)
    batch, blocks = 3, 4
    lens = torch.tensor([100, 1, 256], dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, s_q * h_q, 1)
    out, lse = decode.flash_mla_with_kvcache(
        torch.zeros(batch, s_q, h_q, 576, dtype=torch.bfloat16),
        torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16),
        torch.arange(batch * blocks, dtype=torch.int32).view(batch, blocks),
        lens,
        512,
        meta,
        splits,
        causal=s_q > 1,
    )
    assert len(launched) == 2 and out.shape == (batch, s_q, h_q, 512)
    assert lse.shape == (batch, h_q, s_q)
    assert (
        launched[1].attrs["global_symbol"]
        == {"row": "mla_combine", "warp": "mla_combine_warp_rows"}[combine]
    )


def test_int32_arguments_at_any_element_offset(launched):
    """block_table, cache_seqlens and the metadata may be slices of larger int32 tensors (4
    bytes past a 64-byte boundary): the kernels read them without TIRx's default alignment."""
    lens = testing.offset_copy(torch.tensor([100, 1, 256], dtype=torch.int32), 4)
    meta, splits = decode.get_mla_metadata(lens, 16, 1)
    table = torch.arange(12, dtype=torch.int32).view(3, 4)
    decode.flash_mla_with_kvcache(
        torch.zeros(3, 1, 16, 576, dtype=torch.bfloat16),
        torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16),
        testing.offset_copy(table, 4),
        lens,
        512,
        testing.offset_copy(meta, 8),
        testing.offset_copy(splits, 12),
    )
    assert len(launched) == 2


def test_direct_calls_check_each_call_signature_once(launched, monkeypatch):
    """Plain CUDA tensors (here: CPU ones taken for them) skip the dispatcher and the checks
    after the first call of a signature; a new variant or shape is checked again."""
    monkeypatch.setattr(host, "plain_cuda", lambda t: True)
    monkeypatch.setattr(decode, "_PLANS", {})
    checked = []
    check_args = decode.check_args
    monkeypatch.setattr(
        decode, "check_args", lambda *a: checked.append(a[0].shape) or check_args(*a)
    )
    lens = torch.tensor([100, 1, 256], dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, 16, 1)
    k_cache = torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16)
    table = torch.arange(12, dtype=torch.int32).view(3, 4)
    for variant, s_q in (("v5", 1), ("v5", 1), ("v1", 1), ("v5", 2)):
        monkeypatch.setenv("TIRX_FLASHMLA_VARIANT", variant)
        decode.switches.cache_clear()  # read again, as a new process would
        q = torch.zeros(3, s_q, 16, 576, dtype=torch.bfloat16)
        out, lse = decode.flash_mla_with_kvcache(q, k_cache, table, lens, 512, meta, splits)
        assert out.shape == (3, s_q, 16, 512) and lse.shape == (3, 16, s_q)
    assert [shape[1] for shape in checked] == [1, 1, 2]
    assert len(launched) == 8


def _call_args():
    """(q, k_cache, block_table, cache_seqlens, metadata, num_splits) of a 3-request call,
    h_q 16, s_q 1, on the CPU."""
    lens = torch.tensor([100, 1, 256], dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, 16, 1)
    q = torch.zeros(3, 1, 16, 576, dtype=torch.bfloat16)
    k_cache = torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16)
    table = torch.arange(12, dtype=torch.int32).view(3, 4)
    return q, k_cache, table, lens, meta, splits


def test_a_plan_binds_both_kernels_on_its_first_call(launched, monkeypatch):
    binds, calls = [], []

    def direct_launcher(executable, *args, as_called=()):
        binds.append(len(args))
        return lambda *args: calls.append(len(args))

    monkeypatch.setattr(host, "direct_launcher", direct_launcher)
    monkeypatch.setattr(host, "plain_cuda", lambda t: True)
    monkeypatch.setattr(decode, "_PLANS", {})
    monkeypatch.setattr(decode, "_FAST", {})
    q, k_cache, table, lens, meta, splits = _call_args()
    for _ in range(3):
        decode.flash_mla_with_kvcache(q, k_cache, table, lens, 512, meta, splits)
    assert binds == [11, 5]  # decode and combine, once each, with the kernels' arguments
    assert calls == [11, 5] * 3 and not launched


def test_a_bound_plan_is_reused_by_shape_and_a_refused_call_is_checked(launched, monkeypatch):
    """With both kernels bound exactly, later calls of q's and k_cache's shapes skip the
    signature lookup; a tensor the launcher refuses (here a block table of another width)
    gets the full checks: its own plan, or the ValueError naming it."""

    def direct_launcher(executable, *examples, as_called=()):
        bound = [(a.shape, a.dtype) for a in as_called if isinstance(a, torch.Tensor)]

        def launch(*args):
            if [(a.shape, a.dtype) for a in args if isinstance(a, torch.Tensor)] != bound:
                raise ValueError("refused")  # as direct_launch.cc does, before any launch

        return launch

    monkeypatch.setattr(host, "direct_launcher", direct_launcher)
    monkeypatch.setattr(host, "plain_cuda", lambda t: True)
    monkeypatch.setattr(decode, "_PLANS", {})
    monkeypatch.setattr(decode, "_FAST", {})
    signatures = []
    signature = host.signature
    monkeypatch.setattr(decode, "_sig", lambda t: signatures.append(1) or signature(t))
    q, k_cache, table, lens, meta, splits = _call_args()
    for _ in range(3):
        decode.flash_mla_with_kvcache(q, k_cache, table, lens, 512, meta, splits)
    assert len(signatures) == 6  # the first call's six tensors only
    wider = torch.zeros(3, 5, dtype=torch.int32)
    decode.flash_mla_with_kvcache(q, k_cache, wider, lens, 512, meta, splits)
    assert len(signatures) == 12 and len(decode._FAST) == 1
    with pytest.raises(ValueError, match="block_table must be"):
        decode.flash_mla_with_kvcache(q, k_cache, table[:2], lens, 512, meta, splits)
    with pytest.raises(ValueError, match="num_splits must be"):
        decode.flash_mla_with_kvcache(q, k_cache, wider, lens, 512, meta, splits[:3])


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_direct_launcher_reads_each_variants_host_code(variant, monkeypatch):
    """Dry (CPU tensors): the KV-cache descriptor of v5 and after (one, however many boxes
    the kernel issues) is the cache as (rows, 576) in 64 x 64 boxes with the 128B swizzle;
    every variant gets a launcher with the scheduler parts as
    grid.x, the query-row tiles as grid.y and its dynamic shared memory."""
    from tirx_kernels.core import direct_launch, launch_spec, toolchain

    monkeypatch.setattr(launch_spec, "TMA", True)
    q = torch.zeros(3, 1, 128, 576, dtype=torch.bfloat16)
    k_cache = torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16)
    table = torch.arange(12, dtype=torch.int32).view(3, 4)
    lens = torch.tensor([100, 1, 256], dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, 128, 1)
    outputs = decode.op_outputs(q, meta.shape[0])
    exe = decode.compiled_kernels(variant, q, False)[0]
    args = (q.view(3, 128, 576), k_cache.view(-1, 576), table, lens, meta, splits, *outputs[2:])
    args += (outputs[0].view(3, 128, 512), outputs[1].view(3, 128), 0.1)
    (launch,) = launch_spec.launch_spec(toolchain.host_code(exe), args)
    assert launch.dims[:2] == [meta.shape[0], 2] and launch.smem > 0
    if variant != "v1":  # v5 and after load the pages by TMA
        (tmap,) = launch.maps
        assert (tmap.arg, tmap.dims, tmap.strides) == (1, [576, 12 * 64], [576 * 2])
        assert (tmap.box, tmap.swizzle) == ([64, 64], 3)
    else:
        assert not launch.maps
    assert direct_launch.bound(exe, *args, dry=True) is not None


def test_the_plans_launchers_take_the_ops_tensors_unviewed(monkeypatch):
    """Dry (CPU tensors): bound ``as_called`` with the op's own tensors (``unviewed_args``),
    the decode and combine launchers accept them and pass the kernels exactly the words
    the viewed arguments (``kernel_args``) give, and refuse the views."""
    from tirx_kernels.core import direct_launch, launch_spec

    monkeypatch.setattr(launch_spec, "TMA", True)
    q = torch.zeros(3, 2, 64, 576, dtype=torch.bfloat16)
    k_cache = torch.zeros(12, 64, 1, 576, dtype=torch.bfloat16)
    lens = torch.tensor([100, 1, 256], dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, 128, 1)
    inputs = (q, k_cache, torch.arange(12, dtype=torch.int32).view(3, 4), lens, meta, splits)
    outputs = decode.op_outputs(q, meta.shape[0])
    viewed = decode.kernel_args(outputs, inputs, 0.1)
    unviewed = decode.unviewed_args(outputs, inputs, 0.1)
    kernels = decode.compiled_kernels(DEFAULT_VARIANT, q, True)
    for exe, args, called in zip(kernels, viewed, unviewed):
        launch = direct_launch.bound(exe, *args, as_called=called, dry=True)
        plain = direct_launch.bound(exe, *args, dry=True)
        assert list(launch(*called)) == list(plain(*args))
        with pytest.raises(ValueError):
            launch(*args)


def test_device_metadata_launch_matches_the_kernel(monkeypatch):
    from tirx_kernels.flashmla._mla_metadata_tirx import make_sched_meta

    funcs: list = []
    monkeypatch.setattr(
        decode, "_metadata_exec", lambda: testing.checked_launches(make_sched_meta, funcs)()
    )
    lens = torch.tensor([[5, 0], [700, 64], [1, 9]], dtype=torch.int32)[:, 0]  # a strided view
    meta, splits = decode.device_metadata(lens, 66)
    decode.device_metadata(testing.offset_copy(lens, 4), 66)  # a slice of a longer tensor
    assert len(funcs) == 2 and meta.shape == (66, 8) and splits.shape == (4,)
    assert meta.dtype == splits.dtype == torch.int32


def test_the_switches_are_read_at_the_first_call_only(launched, monkeypatch):
    """An eager call looks up no environment variable (an unset one's lookup raises and
    catches a KeyError, a µs or two a call): the variant and combine are read once."""
    monkeypatch.setattr(host, "plain_cuda", lambda t: True)
    monkeypatch.setattr(decode, "_PLANS", {})
    monkeypatch.setattr(decode, "_FAST", {})
    monkeypatch.setenv("TIRX_FLASHMLA_VARIANT", "v5")
    monkeypatch.delenv("TIRX_FLASHMLA_COMBINE", raising=False)
    args = _call_args()
    decode.flash_mla_with_kvcache(*args[:4], 512, *args[4:])

    def no_lookup(environ=None):
        raise AssertionError("a call read the environment")

    monkeypatch.setattr(decode, "selected_variant", no_lookup)
    monkeypatch.setattr(decode, "selected_combine", no_lookup)
    monkeypatch.setenv("TIRX_FLASHMLA_VARIANT", "v1")  # not seen until read again
    for _ in range(2):
        decode.flash_mla_with_kvcache(*args[:4], 512, *args[4:])
    assert decode.switches() == ("v5", "warp") and len(launched) == 6
