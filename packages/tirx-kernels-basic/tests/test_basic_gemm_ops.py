# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The public op ``torch.ops.tirx_kernels.basic_gemm`` and its wrapper ``gemm`` (a @ b.T).

CPU: registration, argument checks, the fake, Dynamo tracing, run-time M (one compile
serves every M of a tile config; the generated CUDA takes M as an argument), the layouts'
operand shapes and wgmma transpose bits. GPU (sm_90a; skipped elsewhere): the op against an
fp32 matmul, eagerly, for many M through one compiled kernel, every tile config and variant,
every layout (transposed operand views, with the epilogue too), replayed from a CUDA graph
and under ``torch.compile(fullgraph=True)``. ``matmul`` (a @ b): test_basic_matmul_ops.py.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tirx_kernels.basic._gemm_schedule import CANDIDATES, TileConfig
from tirx_kernels.basic._gemm_tirx import LAYOUTS, make_gemm
from tirx_kernels.basic.gemm import _check as _check_arguments
from tirx_kernels.basic.gemm import (
    compiled_gemm,
    gemm,
    gemm_config,
    gemm_layout,
    launch_gemm,
    split_scratch,
)
from tirx_kernels.basic.kernels import gemm as gemm_kernel
from tirx_kernels.core import testing, toolchain
from tirx_kernels.core.ops import is_registered

BF16, FP16 = torch.bfloat16, torch.float16
needs_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90a GPU",
)


def test_the_op_is_registered_and_named_by_the_kernel_module():
    assert gemm_kernel.PUBLIC_OPS == ("basic_gemm", "basic_matmul")
    assert is_registered("basic_gemm") and is_registered("basic_matmul")


def _args(a=(16, 64), b=(32, 64), out=None, dtype=BF16, bdtype=None, odtype=None):
    ta = torch.zeros(a, dtype=dtype)
    tb = torch.zeros(b, dtype=bdtype or dtype)
    tout = torch.empty(out or (a[0], b[0]), dtype=odtype or dtype)
    return tout, ta, tb


BAD = {
    "a_dtype": (dict(dtype=torch.float32), r"a must be bfloat16 or float16.*a\.to\("),
    "b_dtype": (dict(bdtype=FP16), r"b must have a's dtype torch\.bfloat16.*b\.to\(a\.dtype\)"),
    "a_dim": (dict(a=(2, 16, 64), out=(2, 32)), r"a must be 2-D \(M, K\).*a\.view\("),
    "b_dim": (dict(b=(64,), out=(16, 32)), r"b must be 2-D \(N, K\).*pass b\.T \(or call"),
    "b_k": (dict(b=(64, 32)), r"b must be 2-D \(N, K\) with a's K = 64 \(gemm computes a @ b\.T\)"),
    "k_ragged": (
        dict(a=(16, 60), b=(32, 60)),
        r"K = a\.shape\[1\] must be a multiple of 8.*got 60; zero-pad a and b",
    ),
    "n_ragged": (dict(b=(30, 64)), r"N = b\.shape\[0\] must be a multiple of 8, got 30"),
    "out_shape": (dict(out=(16, 16)), r"out must be \(16, 32\) of a's dtype.*a\.new_empty"),
    "out_dtype": (dict(odtype=FP16), r"out must be \(16, 32\) of a's dtype torch\.bfloat16"),
    "a_cpu": (dict(), r"a must be a CUDA tensor, got cpu; move it with a\.cuda\(\)"),
}


@pytest.mark.parametrize("bad, message", BAD.values(), ids=BAD.keys())
def test_bad_arguments_raise_value_error_naming_them(bad, message):
    out, a, b = _args(**bad)
    with pytest.raises(ValueError, match=message):
        torch.ops.tirx_kernels.basic_gemm(out, a, b)
    with pytest.raises(ValueError, match=message):
        gemm(a, b, out=out)


BAD_LAYOUTS = {  # (a, b) views -> message
    "b_strided": (
        lambda: (torch.zeros(16, 64, dtype=BF16), torch.zeros(32, 128, dtype=BF16)[:, :64]),
        r"b must be contiguous or the transpose of a contiguous tensor.*strides \(128, 1\); "
        r"pass b\.contiguous\(\)",
    ),
    "a_m_ragged": (
        lambda: (torch.zeros(64, 12, dtype=BF16).t(), torch.zeros(32, 64, dtype=BF16)),
        r"a is the transpose of a contiguous \(K, M\).*multiple of 8 then, got 12; "
        r"pass a\.contiguous\(\)",
    ),
    "k_ragged_nt": (
        lambda: (torch.zeros(60, 16, dtype=BF16).t(), torch.zeros(32, 60, dtype=BF16)),
        r"K = a\.shape\[1\] must be a multiple of 8.*unless both operands are MN-major",
    ),
    # TN (a (K, M), b (K, N) stored) needs no K alignment: the next check is the device's
    "k_ragged_tn": (
        lambda: (torch.zeros(60, 16, dtype=BF16).t(), torch.zeros(60, 32, dtype=BF16).t()),
        r"a must be a CUDA tensor",
    ),
}


@pytest.mark.parametrize("views, message", BAD_LAYOUTS.values(), ids=BAD_LAYOUTS.keys())
def test_operand_layouts_come_from_strides_and_bad_ones_are_named(views, message):
    a, b = views()
    with pytest.raises(ValueError, match=message):
        gemm(a, b)


def test_gemm_layout_reads_the_four_layouts_from_strides():
    a, at = torch.zeros(16, 64), torch.zeros(64, 16).t()
    b, bt = torch.zeros(32, 64), torch.zeros(64, 32).t()
    got = {gemm_layout(x, y) for x in (a, at) for y in (b, bt)}
    assert got == set(LAYOUTS)
    assert gemm_layout(a, b) == "NT" and gemm_layout(a, bt) == "NN"
    assert gemm_layout(at, bt) == "TN" and gemm_layout(at, b) == "TT"
    assert gemm_layout(torch.zeros(1, 64), bt) == "NN"  # M = 1: contiguous wins
    assert gemm_layout(a, torch.zeros(32, 128)[:, :64]) is None


def test_too_many_elements_are_refused():
    a, b = torch.empty(65536, 64, device="meta"), torch.empty(65536, 64, device="meta")
    out = torch.empty(65536, 65536, device="meta")  # meta tensors: shapes without memory
    with pytest.raises(ValueError, match=r"< 2\^31 elements.*split a into row blocks"):
        _check_arguments(out, a.bfloat16(), b.bfloat16())


def test_the_fake_gives_metadata_without_running():
    with FakeTensorMode():
        out, a, b = _args(a=(5, 256), b=(48, 256), dtype=FP16)
        assert torch.ops.tirx_kernels.basic_gemm(out, a, b) is None
        c = gemm(a, b)
        assert (c.shape, c.dtype) == ((5, 48), FP16)


def test_fullgraph_compile_traces_the_wrapper_into_one_graph_with_the_op():
    graphs = []

    def backend(gm, example_inputs):  # record Dynamo's graph, then run it as is
        graphs.append(gm)
        return gm

    model = torch.compile(lambda a, b: gemm(a * 2, b) + 1, fullgraph=True, backend=backend)
    _, a, b = _args()
    with pytest.raises(ValueError, match="a must be a CUDA tensor"):  # the op ran on CPU
        model(a, b)
    ops = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    packet = torch.ops.tirx_kernels.basic_gemm  # Dynamo records the packet or its overload
    assert packet in ops or packet.default in ops


def test_one_compile_serves_every_m_of_a_config():
    """The compile cache is keyed without M: the M values the dispatch maps to one tile
    config compile once (counted by the cache), and get the same executable."""
    compiled_gemm.cache_clear()
    decode = [1, 7, 16, 33, 64]  # all (64, 128) tiles at N = 1024
    large = [2048, 3000, 4096, 8191]  # all (128, 256) tiles at N = 8192
    assert {gemm_config(m, 1024, 512) for m in decode} == {TileConfig(64, 128)}
    assert {gemm_config(m, 8192, 256) for m in large} == {TileConfig(128, 256)}
    small = {id(compiled_gemm(1024, 512, "bfloat16", gemm_config(m, 1024, 512))) for m in decode}
    assert len(small) == 1 and compiled_gemm.cache_info().misses == 1
    big = {id(compiled_gemm(8192, 256, "bfloat16", gemm_config(m, 8192, 256))) for m in large}
    assert len(big) == 1 and compiled_gemm.cache_info().misses == 2
    assert compiled_gemm.cache_info().hits == len(decode) + len(large) - 2


@pytest.mark.parametrize("config", CANDIDATES, ids=lambda c: f"bm{c.bm}_bn{c.bn}")
def test_the_generated_cuda_takes_m_as_an_argument(config):
    """No M constant in the kernel: M is a kernel argument, the tile count, the persistent
    grid stride and the A box guards are expressions of it; every candidate assembles."""
    func = make_gemm(1000, 264, "bfloat16", config)
    src = toolchain.cuda_source(toolchain.compile(func))
    assert re.search(r"__global__ void .*gemm_kernel\(.*CUtensorMap.*, int M\)", src)
    bm = config.bm
    assert f"((M + {bm - 1}) >> {bm.bit_length() - 1})" in src  # ceil(M / bm) M tiles
    assert re.search(r"u \+= [^;]*\(M \+ ", src)  # persistent stride min(units, SMs)
    # without split-K a work unit is its tile: no division by the run-time tile count on
    # the way to a tile's first load (it cost 1024^3 5% on an H100)
    assert "% (((M + " not in src
    assert len(toolchain.compile_cubin(func)) > 0


@pytest.mark.parametrize("config", [TileConfig(64, 128, 4), TileConfig(128, 256, 2)], ids=str)
def test_split_k_kernel_takes_its_scratch_and_reduces_through_l2(config):
    src = toolchain.cuda_source(toolchain.compile(make_gemm(4096, 4096, "bfloat16", config)))
    assert re.search(r"gemm_split_kernel\(int\* __restrict__ LOCK_ptr, float\* __restrict__", src)
    assert "atomicAdd" in src and "__threadfence()" in src and "bar.sync %0, %1;" in src
    assert "ld.global.cg.f32" in src  # partials of other SMs: read from L2, not a stale L1
    assert "% (((M + " in src  # the tile of a (split, tile) unit
    assert len(toolchain.compile_cubin(make_gemm(4096, 4096, "bfloat16", config))) > 0


def test_bad_bias_and_beta_without_out_raise_value_error():
    out, a, b = _args()
    with pytest.raises(ValueError, match=r"bias must be 1-D \(32,\) of a's dtype"):
        torch.ops.tirx_kernels.basic_gemm(out, a, b, torch.zeros(16))
    with pytest.raises(ValueError, match=r"beta != 0 reads out; pass out"):
        gemm(a, b, beta=0.5)


def test_the_fake_takes_bias_alpha_beta():
    with FakeTensorMode():
        out, a, b = _args(a=(5, 256), b=(48, 256))
        bias = torch.empty(48, dtype=BF16)
        assert torch.ops.tirx_kernels.basic_gemm(out, a, b, bias, 2.0, 0.5) is None
        assert gemm(a, b, out, bias=bias, alpha=2.0, beta=1.0) is out


@pytest.mark.parametrize(
    "config, ops",
    [(TileConfig(128, 128), "scale_bias"), (TileConfig(64, 128, 4), "scale")],
    ids=str,
)
def test_the_scale_bias_epilogue_kernel_takes_alpha_beta_at_run_time(config, ops):
    func = make_gemm(1000, 1024, "bfloat16", config, ops=ops)
    src = toolchain.cuda_source(toolchain.compile(func))
    assert re.search(r"gemm_ops_kernel\(.*int M, float alpha, float beta\)", src)
    assert ("BIAS_ptr" in src) == (ops == "scale_bias")
    assert len(toolchain.compile_cubin(func)) > 0


# a layout, a config: every operand major on both bm (bm=64 splits B by columns), n192
@pytest.mark.parametrize(
    "layout, config",
    [("NN", TileConfig(64, 256, 2)), ("TN", TileConfig(128, 192)), ("TT", TileConfig(64, 128))],
    ids=str,
)
def test_each_layout_takes_its_operands_as_stored_and_sets_the_transpose_bits(layout, config):
    """A (K, M) / B (K, N) tensors in the kernel signature (M still a run-time argument),
    the wgmma ``imm-trans-a``/``imm-trans-b`` immediates, and the cubin assembles."""
    func = make_gemm(1000, 264, "bfloat16", config, layout=layout)
    params = {str(p.name): p for p in func.params}
    a_shape = [str(d) for d in params["A"].shape]
    b_shape = [str(d) for d in params["B"].shape]
    assert a_shape == (["264", "M"] if layout[0] == "T" else ["M", "264"])
    assert b_shape == (["264", "1000"] if layout[1] == "N" else ["1000", "264"])
    src = toolchain.cuda_source(toolchain.compile(func))
    assert re.search(r"__global__ void .*gemm\w*_kernel\(.*CUtensorMap.*, int M\)", src)
    bits = set(re.findall(r"wgmma\.mma_async[^;]*p\w*, 1, 1, (\d), (\d);", src))
    assert bits == {(str(int(layout[0] == "T")), str(int(layout[1] == "N")))}
    assert len(toolchain.compile_cubin(func)) > 0


def test_layout_domain_checks():
    with pytest.raises(ValueError, match="layout must be one of"):
        make_gemm(1024, 512, "bfloat16", TileConfig(128, 128), layout="NX")
    with pytest.raises(ValueError, match="K=260 must be a multiple of 8"):
        make_gemm(1024, 260, "bfloat16", TileConfig(128, 128), layout="NN")
    make_gemm(1024, 260, "bfloat16", TileConfig(128, 128), layout="TN")  # both MN-major
    with pytest.raises(ValueError, match="a_box=16 must be a multiple of 64 for A"):
        make_gemm(1024, 512, "bfloat16", TileConfig(64, 128), layout="TT", a_box=16)
    with pytest.raises(ValueError, match="cluster_m=2 with B \\[K, N\\] needs"):
        make_gemm(1024, 512, "bfloat16", TileConfig(128, 192), layout="NN", cluster_m=2)


def test_split_k_variant_limits():
    with pytest.raises(ValueError, match="split=9 must be in 1..8"):
        make_gemm(1024, 512, "bfloat16", TileConfig(128, 128, 9))
    with pytest.raises(ValueError, match="split-K runs without clusters"):
        make_gemm(1024, 4096, "bfloat16", TileConfig(128, 128, 2), cluster_m=2)


# ---- GPU ------------------------------------------------------------------------------


def _data(M, N, K, dtype, seed=0, layout="NT"):
    """a (M, K), b (N, K) as ``layout`` stores them (transposed views of (K, M) / (K, N))."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(dtype).cuda()
    b = torch.randn(N, K, generator=g).to(dtype).cuda()
    if layout[0] == "T":
        a = a.t().contiguous().t()
    if layout[1] == "N":
        b = b.t().contiguous().t()
    assert gemm_layout(a, b) == layout
    return a, b


def _check(c, a, b):
    """c vs the fp32 matmul, within the kernel module's test tolerance."""
    tol = gemm_kernel.tolerance(a.shape[1], "bfloat16" if a.dtype == BF16 else "float16")
    torch.testing.assert_close(c.float(), gemm_kernel.reference(a, b), rtol=0.0, atol=tol)


@needs_sm90
@pytest.mark.parametrize(
    "M, N, K, dtype", [(333, 520, 264, BF16), (64, 256, 128, FP16), (1, 1024, 512, BF16)]
)
def test_eager_matches_fp32_reference(M, N, K, dtype):
    a, b = _data(M, N, K, dtype)
    _check(gemm(a, b), a, b)
    out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
    assert gemm(a, b, out=out) is out
    _check(out, a, b)


@needs_sm90
def test_one_compiled_kernel_is_right_for_every_m():
    """Several M, every A box count of bm=64 and both tails, through one compile."""
    compiled_gemm.cache_clear()
    for M in (1, 15, 16, 17, 40, 63, 64):
        a, b = _data(M, 1024, 512, BF16, seed=M)
        assert gemm_config(M, 1024, 512) == TileConfig(64, 128)
        _check(gemm(a, b), a, b)
    assert compiled_gemm.cache_info().misses == 1


@needs_sm90
@pytest.mark.parametrize("config", CANDIDATES, ids=lambda c: f"bm{c.bm}_bn{c.bn}")
@pytest.mark.parametrize("M", [1, 77, 200, 515])
def test_every_tile_config_at_ragged_m(config, M):
    a, b = _data(M, 1000, 264, FP16, seed=M)
    out = torch.full((M, 1000), float("nan"), dtype=FP16, device="cuda")
    compiled_gemm(1000, 264, "float16", config)(a, b, out)
    _check(out, a, b)


@needs_sm90
@pytest.mark.parametrize(
    "config", [TileConfig(64, 128, 4), TileConfig(128, 128, 2), TileConfig(128, 256, 3)], ids=str
)
@pytest.mark.parametrize("M", [1, 64, 200, 1000])
def test_split_k_is_right_deterministic_and_leaves_its_locks_at_zero(config, M):
    """Split-K at several M through one compile; twice bit for bit (the splits are summed in
    split order) and the tile locks back at zero (the second launch reuses them)."""
    a, b = _data(M, 2048, 4096, BF16, seed=M)
    outs = []
    for _ in range(2):
        out = torch.full((M, 2048), float("nan"), dtype=BF16, device="cuda")
        launch_gemm(a, b, out, config)
        outs.append(out)
    _check(outs[0], a, b)
    assert torch.equal(outs[0], outs[1])
    _, lock = split_scratch(a.device, 0, 0)
    assert int(lock.abs().sum()) == 0


@needs_sm90
@pytest.mark.parametrize("M, N, K", [(1, 4096, 4096), (333, 520, 264), (1024, 1024, 1024)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_alpha_beta_bias_epilogue(M, N, K, with_bias):
    """alpha * a @ b.T + bias + beta * C, in fp32 before the one rounding, on plain and
    split-K dispatches (M = 1 and 1024 split)."""
    a, b = _data(M, N, K, BF16)
    g = torch.Generator().manual_seed(7)
    c0 = torch.randn(M, N, generator=g).to(BF16).cuda()
    bias = torch.randn(N, generator=g).to(BF16).cuda() if with_bias else None
    out = c0.clone()
    gemm(a, b, out, bias=bias, alpha=0.5, beta=-2.0)
    ref = 0.5 * gemm_kernel.reference(a, b) - 2.0 * c0.float()
    if with_bias:
        ref = ref + bias.float()
    tol = gemm_kernel.tolerance(K, "bfloat16") + 2.0**-8 * float(ref.abs().max())
    torch.testing.assert_close(out.float(), ref, rtol=0.0, atol=tol)
    nan = torch.full((M, N), float("nan"), dtype=BF16, device="cuda")
    gemm(a, b, nan, alpha=2.0)  # beta = 0: out is not read (NaN must not leak)
    twice = 2.0 * gemm_kernel.reference(a, b)
    torch.testing.assert_close(nan.float(), twice, rtol=0.0, atol=2 * tol)


@needs_sm90
def test_the_op_dispatches_split_k_for_decode():
    a, b = _data(1, 4096, 4096, BF16)
    assert gemm_config(1, 4096, 4096).split > 1
    _check(gemm(a, b), a, b)


@needs_sm90
@pytest.mark.parametrize(
    "variant", [dict(cluster_m=2), dict(epilogue="direct"), dict(inflight=0)], ids=str
)
@pytest.mark.parametrize("M", [1, 333])
def test_variants_at_run_time_m(variant, M):
    """The development variants (``make_gemm`` keywords) with run-time M, odd tile rows."""
    ex = toolchain.compile(make_gemm(520, 264, "bfloat16", TileConfig(128, 128), **variant))
    a, b = _data(M, 520, 264, BF16)
    out = torch.full((M, 520), float("nan"), dtype=BF16, device="cuda")
    ex(a, b, out)
    _check(out, a, b)


@needs_sm90
def test_empty_shapes_and_bad_memory_on_gpu():
    a, b = _data(0, 64, 128, BF16)
    assert gemm(a, b).shape == (0, 64)
    a, b = _data(16, 64, 0, BF16)
    assert torch.equal(gemm(a, b), torch.zeros(16, 64, dtype=BF16, device="cuda"))
    a, b = _data(16, 64, 128, BF16)
    with pytest.raises(ValueError, match="b must be contiguous or the transpose"):
        gemm(a, torch.cat([b, b], dim=1)[:, :128])
    flat = torch.empty(16 * 128 + 8, dtype=BF16, device="cuda")
    with pytest.raises(ValueError, match="a must be 16-byte aligned"):
        gemm(flat[1 : 1 + 16 * 128].view(16, 128), b)
    with pytest.raises(ValueError, match="b must be a CUDA tensor"):
        gemm(a, b.cpu())


@needs_sm90
def test_opcheck():
    a, b = _data(128, 256, 128, BF16)
    out = torch.empty(128, 256, dtype=BF16, device="cuda")
    torch.library.opcheck(torch.ops.tirx_kernels.basic_gemm.default, (out, a, b))


@needs_sm90
def test_cuda_graph_capture_and_replay():
    a, b = _data(256, 512, 256, BF16)
    out = torch.empty(256, 512, dtype=BF16, device="cuda")
    a2, _ = _data(256, 512, 256, BF16, seed=1)
    _check(testing.replayed(lambda: gemm(a, b, out=out), out, (a, a2)), a2, b)


@needs_sm90
def test_torch_compile_fullgraph():
    def model(a, b):
        return gemm(a * 2, b) + 1

    a, b = _data(128, 256, 256, BF16)
    got = torch.compile(model, fullgraph=True)(a, b)
    torch.testing.assert_close(got, model(a, b))


@needs_sm90
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "M, N, K, dtype",
    [(8, 1024, 512, BF16), (40, 520, 264, FP16), (200, 1000, 1000, BF16), (1000, 2048, 1024, BF16)],
)
def test_every_layout_matches_fp32_reference(layout, M, N, K, dtype):
    """Transposed operand views straight into the kernel (no copies): decode (split-K),
    ragged M, N and K tails, bm=64 and bm=128 dispatches."""
    a, b = _data(M, N, K, dtype, seed=M, layout=layout)
    out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
    assert gemm(a, b, out=out) is out
    _check(out, a, b)


@needs_sm90
@pytest.mark.parametrize("config", CANDIDATES, ids=lambda c: f"bm{c.bm}_bn{c.bn}")
def test_every_tile_config_with_both_operands_mn_major(config):
    """Every config with A (K, M) and B (K, N) stored (TN): bm=64 splits B by columns, n192
    has three 64-column B boxes; M = 200 is a tail of both tile heights."""
    a, b = _data(200, 1000, 264, FP16, seed=3, layout="TN")
    out = torch.full((200, 1000), float("nan"), dtype=FP16, device="cuda")
    launch_gemm(a, b, out, config)
    _check(out, a, b)


@needs_sm90
@pytest.mark.parametrize("layout", ["NN", "TN", "TT"])
@pytest.mark.parametrize("config", [TileConfig(64, 128, 4), TileConfig(128, 256, 2)], ids=str)
def test_split_k_in_the_mn_major_layouts(layout, config):
    a, b = _data(64, 2048, 4096, BF16, layout=layout)
    out = torch.full((64, 2048), float("nan"), dtype=BF16, device="cuda")
    launch_gemm(a, b, out, config)
    _check(out, a, b)


@needs_sm90
def test_tn_takes_k_that_is_not_a_multiple_of_8():
    """Both operands MN-major: K is their outer dimension, TMA zero-fills the last K-block."""
    a, b = _data(200, 520, 260, BF16, layout="TN")
    _check(gemm(a, b), a, b)


@needs_sm90
@pytest.mark.parametrize("layout", ["NN", "TN", "TT"])
@pytest.mark.parametrize("M, N, K", [(8, 4096, 4096), (200, 520, 264)])
def test_alpha_beta_bias_epilogue_in_every_layout(layout, M, N, K):
    a, b = _data(M, N, K, BF16, layout=layout)
    g = torch.Generator().manual_seed(7)
    c0 = torch.randn(M, N, generator=g).to(BF16).cuda()
    bias = torch.randn(N, generator=g).to(BF16).cuda()
    out = c0.clone()
    gemm(a, b, out, bias=bias, alpha=0.5, beta=-2.0)
    ref = 0.5 * gemm_kernel.reference(a, b) - 2.0 * c0.float() + bias.float()
    tol = gemm_kernel.tolerance(K, "bfloat16") + 2.0**-8 * float(ref.abs().max())
    torch.testing.assert_close(out.float(), ref, rtol=0.0, atol=tol)


@needs_sm90
@pytest.mark.parametrize(
    "layout, variant",
    [("NN", dict(cluster_m=2)), ("TT", dict(cluster_m=2)), ("TN", dict(inflight=0))],
    ids=str,
)
def test_variants_in_the_mn_major_layouts(layout, variant):
    ex = toolchain.compile(
        make_gemm(520, 264, "bfloat16", TileConfig(128, 128), layout=layout, **variant)
    )
    a, b = _data(200, 520, 264, BF16, layout=layout)
    out = torch.full((200, 520), float("nan"), dtype=BF16, device="cuda")
    ex(a if layout[0] == "N" else a.t(), b if layout[1] == "T" else b.t(), out)
    _check(out, a, b)
