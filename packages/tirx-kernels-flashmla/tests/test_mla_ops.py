# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The dense-decode public API: op registration, metadata, and argument validation on the CPU
(every bad input is a ValueError naming the argument); on a GPU, two small configs against
the torch fp32 reference (the full matrix runs through ``tirx-run test``)."""

import inspect

import pytest
import torch

from tirx_kernels.core import testing
from tirx_kernels.core.ops import is_registered
from tirx_kernels.flashmla import decode
from tirx_kernels.flashmla._mla_decode_schedule import (
    COMBINE_ENV,
    COMBINES,
    DEFAULT_COMBINE,
    DEFAULT_VARIANT,
    VARIANT_ENV,
    VARIANTS,
    selected_combine,
    selected_variant,
    variants_to_check,
)
from tirx_kernels.flashmla.kernels import flash_mla_decode as contract


def args(batch=2, s_q=1, h_q=16, seqlens=(100, 64), blocks=4, dtype=torch.bfloat16):
    q = torch.zeros(batch, s_q, h_q, 576, dtype=dtype)
    k = torch.zeros(8, 64, 1, 576, dtype=dtype)
    table = torch.arange(batch * blocks, dtype=torch.int32).view(batch, blocks) % 8
    lens = torch.tensor(seqlens, dtype=torch.int32)
    meta, splits = decode.get_mla_metadata(lens, s_q * h_q, 1)
    return dict(
        q=q,
        k_cache=k,
        block_table=table,
        cache_seqlens=lens,
        head_dim_v=512,
        tile_scheduler_metadata=meta,
        num_splits=splits,
    )


def call(**kw):
    a = args()
    a.update(kw)
    return decode.flash_mla_with_kvcache(**a)


def test_the_op_is_registered_and_named_by_the_kernel_module():
    assert contract.PUBLIC_OPS == ("flash_mla_with_kvcache",)
    assert is_registered("flash_mla_with_kvcache")
    schema = torch.ops.tirx_kernels.flash_mla_with_kvcache.default._schema
    written = [a.name for a in schema.arguments if a.alias_info and a.alias_info.is_write]
    assert written == ["out", "lse", "out_accum", "lse_accum"]


def test_the_wrapper_keeps_flashmlas_signature():
    params = inspect.signature(decode.flash_mla_with_kvcache).parameters
    assert list(params)[:7] == [
        "q",
        "k_cache",
        "block_table",
        "cache_seqlens",
        "head_dim_v",
        "tile_scheduler_metadata",
        "num_splits",
    ]
    assert params["softmax_scale"].default is None and params["causal"].default is False


def test_variants_are_selected_by_the_environment():
    assert DEFAULT_VARIANT in VARIANTS and set(decode.DECODE_FACTORIES) == set(VARIANTS)
    assert selected_variant({}) == DEFAULT_VARIANT
    assert selected_variant({VARIANT_ENV: ""}) == DEFAULT_VARIANT
    for v in VARIANTS:
        assert selected_variant({VARIANT_ENV: v}) == v
    with pytest.raises(ValueError, match="TIRX_FLASHMLA_VARIANT='v99' is not one of"):
        selected_variant({VARIANT_ENV: "v99"})


def test_an_explicit_variant_is_checked_alone():
    assert variants_to_check({}) == [DEFAULT_VARIANT] + [
        v for v in VARIANTS if v != DEFAULT_VARIANT
    ]
    for v in VARIANTS:
        assert variants_to_check({VARIANT_ENV: v}) == [v]


def test_get_kernel_builds_every_variant_or_the_one_named(monkeypatch):
    monkeypatch.delenv(VARIANT_ENV, raising=False)
    funcs = contract.get_kernel(dtype="float16", h_q=16, s_q=2, causal=True)
    assert len(funcs) == len(VARIANTS) + 2  # and both combine kernels
    monkeypatch.setenv(VARIANT_ENV, "v1")  # a targeted (or fallback) run compiles only it
    names = [f.attrs["global_symbol"] for f in contract.get_kernel(h_q=16)]
    assert names == ["mla_decode", "mla_combine", "mla_combine_warp_rows"]


def test_the_combine_is_selected_by_the_environment():
    assert selected_combine({}) == DEFAULT_COMBINE == "warp"
    assert [selected_combine({COMBINE_ENV: c}) for c in COMBINES] == list(COMBINES)
    with pytest.raises(ValueError, match="TIRX_FLASHMLA_COMBINE='cta' is not one of"):
        selected_combine({COMBINE_ENV: "cta"})


def test_metadata_shapes_and_dtypes():
    meta, splits = decode.get_mla_metadata(torch.tensor([5, 700], dtype=torch.int32), 128, 1)
    assert meta.dtype == splits.dtype == torch.int32
    assert meta.shape == (66, 8) and splits.shape == (3,) and int(splits[0]) == 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(cache_seqlens=torch.tensor([1, 2])), "cache_seqlens must be int32"),
        (dict(cache_seqlens=torch.zeros(2, 2, dtype=torch.int32)), "1-d"),
        (dict(num_heads_k=2), "num_heads_k must be 1"),
        (dict(num_q_tokens_per_head_k=0), "num_q_tokens_per_head_k"),
        (dict(cache_seqlens=torch.tensor([-1], dtype=torch.int32)), ">= 0"),
    ],
)
def test_bad_metadata_arguments(kw, match):
    a = dict(cache_seqlens=torch.tensor([3], dtype=torch.int32), num_q_tokens_per_head_k=16)
    a["num_heads_k"] = 1
    a.update(kw)
    with pytest.raises(ValueError, match=match):
        decode.get_mla_metadata(**a)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(head_dim_v=576), "head_dim_v must be 512"),
        (dict(q=torch.zeros(2, 1, 16, 512, dtype=torch.bfloat16)), "q must be .*head dim 576"),
        (dict(q=torch.zeros(2, 1, 16, 576, dtype=torch.float32)), "q dtype must be"),
        (dict(k_cache=torch.zeros(8, 32, 1, 576, dtype=torch.bfloat16)), "k_cache .*page size"),
        (dict(k_cache=torch.zeros(8, 64, 2, 576, dtype=torch.bfloat16)), "k_cache .*one KV head"),
        (dict(k_cache=torch.zeros(8, 64, 1, 512, dtype=torch.bfloat16)), "k_cache head dim"),
        (dict(k_cache=torch.zeros(8, 64, 1, 576, dtype=torch.float16)), "k_cache dtype"),
        (dict(block_table=torch.zeros(2, 4, dtype=torch.int64)), "block_table must be an int32"),
        (dict(block_table=torch.zeros(3, 4, dtype=torch.int32)), r"block_table must be \(2,"),
        (
            dict(cache_seqlens=torch.tensor([100], dtype=torch.int32)),
            "cache_seqlens must be int32 of shape",
        ),
        (dict(num_splits=torch.zeros(2, dtype=torch.int32)), "num_splits"),
        (
            dict(tile_scheduler_metadata=torch.zeros(4, 7, dtype=torch.int32)),
            "tile_scheduler_metadata",
        ),
        (dict(q=torch.zeros(2, 1, 16, 576, dtype=torch.bfloat16)[:, :, :, :]), "CUDA"),
        (
            dict(q=testing.misaligned_like(torch.zeros(2, 1, 16, 576, dtype=torch.bfloat16))),
            r"q must be 16-byte aligned .*q\.clone\(\)",
        ),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(kw, match):
    with pytest.raises(ValueError, match=match):
        call(**kw)


@pytest.mark.parametrize(
    "kw",
    [
        dict(block_table=torch.tensor([[0, 9, 1, 0], [3, 0, 0, 0]], dtype=torch.int32)),
        dict(block_table=torch.tensor([[0, -1, 2, 0], [3, 0, 0, 0]], dtype=torch.int32)),
        dict(cache_seqlens=torch.tensor([100, 257], dtype=torch.int32)),  # past the table
        dict(cache_seqlens=torch.tensor([100, 200], dtype=torch.int32)),  # stale metadata
    ],
    ids=["entry_past_cache", "negative_entry", "seqlen_past_table", "stale_metadata"],
)
def test_values_are_left_to_the_device_guards(kw, monkeypatch):
    """No tensor value is read on the host (no sync, CUDA-graph capturable): bad entries and
    lengths pass the host checks; only the CPU device fails."""

    def no_host_read(*a, **k):
        raise AssertionError("flash_mla_with_kvcache read a tensor value on the host")

    a = args()
    a.update(kw)
    for name in ("tolist", "item", "cpu", "numpy", "__int__", "__bool__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, no_host_read)
    with pytest.raises(ValueError, match="CUDA"):
        decode.flash_mla_with_kvcache(**a)


def test_unused_block_table_entries_may_be_anything():
    a = args(seqlens=(64, 1))
    a["block_table"][0, 1:] = 2147480000
    a["block_table"][1, 1:] = -5
    with pytest.raises(ValueError, match="CUDA"):  # every check passed; only the device fails
        decode.flash_mla_with_kvcache(**a)


@pytest.mark.parametrize(
    "label",
    [
        "bf16_h16_sq2_b5_sk400_var_causal",
        "bf16_h128_sq1_b9_sk700_var",
        "bf16_h128_sq1_b8_sk600_var_badpages",
        "fp16_h16_sq2_b6_sk300_var_causal_badpages",
    ],
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_against_the_reference(label, variant, monkeypatch):
    """Each variant alone (named by the environment) through the public API."""
    from tirx_kernels.core.testing import skip_unless_gpu

    skip_unless_gpu(contract.KERNEL_META)
    monkeypatch.setenv(VARIANT_ENV, variant)
    cfg = next(c for c in contract.CONFIGS if c["label"] == label)
    contract.run_test(**{k: v for k, v in cfg.items() if k != "label"})


def test_gpu_metadata_kernel_equals_the_host_walk(monkeypatch):
    """The one-warp metadata kernel gives the host walk's tensors bit for bit, on random
    batches (lengths 0, 1, 63, 64, 65 and long ones) and part counts."""
    import random

    from tirx_kernels.core.testing import skip_unless_gpu
    from tirx_kernels.flashmla._mla_decode_schedule import METADATA_ENV

    skip_unless_gpu(contract.KERNEL_META)
    rng = random.Random(7)
    for batch in (1, 2, 31, 32, 33, 128, 300):
        lens = [rng.choice([0, 1, 63, 64, 65, rng.randrange(1, 20000)]) for _ in range(batch)]
        lens_gpu = torch.tensor(lens, dtype=torch.int32, device="cuda")
        for rows in (16, 64, 128, 256):
            got = decode.get_mla_metadata(lens_gpu, rows, 1)
            monkeypatch.setenv(METADATA_ENV, "host")
            want = decode.get_mla_metadata(lens_gpu, rows, 1)
            monkeypatch.delenv(METADATA_ENV)
            for g, w in zip(got, want, strict=True):
                assert torch.equal(g, w), (batch, rows)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_cuda_graph_capture_and_replay_with_new_lengths(variant, monkeypatch):
    """The whole public call, metadata included, is captured (no host sync inside it);
    replaying after copying new q and shorter cache_seqlens into the captured tensors gives
    the new result."""
    from tirx_kernels.core.testing import skip_unless_gpu

    skip_unless_gpu(contract.KERNEL_META)
    monkeypatch.setenv(VARIANT_ENV, variant)
    cfg = dict(dtype="bfloat16", h_q=64, s_q=1, batch=6, s_k=700, varlen=True, causal=False)
    q, k_cache, table, lens = contract.prepare_data(**cfg)
    meta, splits = decode.get_mla_metadata(lens, 64, 1)

    def call():
        return decode.flash_mla_with_kvcache(q, k_cache, table, lens, 512, meta, splits)

    call()  # compiles and loads outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the metadata kernel too: it never syncs with the host
        meta_now, splits_now = decode.get_mla_metadata(lens, 64, 1)
        meta.copy_(meta_now)
        splits.copy_(splits_now)
        out, lse = call()
    q.copy_(torch.randn_like(q) / 10)
    lens.copy_(torch.clamp(lens * 2 // 3, min=1))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    want_out, want_lse = contract.reference(q, k_cache, table, lens)
    contract.compare(out, lse, want_out, want_lse)


@pytest.mark.parametrize("variant", [None, *VARIANTS])
def test_run_bench_times_every_variant_beside_the_reference(variant, monkeypatch):
    """The selected variant is ``tirx``, each other one ``tirx_<variant>``; a variant named by
    the environment is timed alone (CPU: the timer and the data's device are replaced; only
    the wiring is checked)."""
    seen = {}

    def fake_bench(funcs, references=None, **options):
        seen.update(funcs=sorted(funcs), options=options)
        return {"impls": {}}

    real_prepare = contract.prepare_data
    if variant:
        monkeypatch.setenv(VARIANT_ENV, variant)
    else:
        monkeypatch.delenv(VARIANT_ENV, raising=False)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(
        contract, "prepare_data", lambda *a, on_device=False, **k: real_prepare(*a, **k)
    )
    monkeypatch.setattr(contract.toolchain, "bench", fake_bench)
    cfg = dict(dtype="bfloat16", h_q=16, s_q=1, batch=2, s_k=100)
    result = contract.run_bench(**cfg, rounds=2, cooldown_s=0.0, not_an_option=1)
    others = [] if variant else [f"tirx_{v}" for v in VARIANTS if v != DEFAULT_VARIANT]
    assert seen["funcs"] == sorted(["tirx", *others])
    assert seen["options"] == {"rounds": 2, "cooldown_s": 0.0}
    assert result["variant"] == (variant or DEFAULT_VARIANT)


@pytest.mark.parametrize("mode", testing.OP_MODES)
def test_a_mode_row_times_the_public_calls(mode, monkeypatch):
    """A bench row with ``mode`` times public_calls at its batch through bench_calls (CPU: the
    data stays on the CPU, so our call stops at the op's device check, which shows that it
    is the public op with its checks)."""
    seen = {}

    def fake_bench_calls(calls, mode, **options):
        seen.update(calls=calls, mode=mode, options=options)
        return {"impls": {}}

    real_prepare = contract.prepare_data
    monkeypatch.setattr(
        contract, "prepare_data", lambda *a, on_device=False, **k: real_prepare(*a, **k)
    )
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(contract, "bench_calls", fake_bench_calls)
    row = next(c for c in contract.BENCH_CONFIGS if c["label"] == f"op_b1_{mode}")
    contract.run_bench(**{k: v for k, v in row.items() if k != "label"}, rounds=7)
    assert seen["mode"] == mode and seen["options"] == {"rounds": 7}
    assert "tirx" in seen["calls"]
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        seen["calls"]["tirx"]()


def test_gpu_public_calls_give_the_reference():
    """Each of public_calls (batch 3, s_k 1024: ours, FlashMLA's where installed) against
    the fp32 reference: both time the same work."""
    from tirx_kernels.core.testing import skip_unless_gpu

    skip_unless_gpu(contract.KERNEL_META)
    calls = contract.public_calls(3)
    q, k_cache, table, seqlens = contract.prepare_data("bfloat16", 128, 1, 3, 1024, on_device=True)
    want_out, want_lse = contract.reference(q, k_cache, table, seqlens)
    for name, call in calls.items():
        out, lse = call()
        try:
            contract.compare(out, lse, want_out, want_lse)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e
