# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The norm public ops: registration, FlashInfer's signatures, argument checks and fakes on
the CPU; on an sm_90a GPU, results against torch fp32, CUDA-graph replay and
torch.compile(fullgraph=True)."""

import inspect
import subprocess
import sys

import pytest
import torch

from tirx_kernels.core.ops import is_registered
from tirx_kernels.core.testing import dtype_tols
from tirx_kernels.flashinfer import norm
from tirx_kernels.flashinfer.kernels import _rms_common as rms
from tirx_kernels.flashinfer.kernels import (
    fused_add_rmsnorm,
    gemma_fused_add_rmsnorm,
    gemma_rmsnorm,
    layernorm,
    rmsnorm,
)

OPS = (
    "flashinfer_rmsnorm",
    "flashinfer_gemma_rmsnorm",
    "flashinfer_fused_add_rmsnorm",
    "flashinfer_gemma_fused_add_rmsnorm",
    "flashinfer_layernorm",
)
# flashinfer/norm/__init__.py: (parameter names, defaults) of each function we mirror
UPSTREAM_SIGNATURES = {
    "rmsnorm": ("input weight eps out enable_pdl", (1e-6, None, None)),
    "gemma_rmsnorm": ("input weight eps out enable_pdl", (1e-6, None, None)),
    "fused_add_rmsnorm": ("input residual weight eps enable_pdl", (1e-6, None)),
    "gemma_fused_add_rmsnorm": ("input residual weight eps enable_pdl", (1e-6, None)),
    "layernorm": ("input gemma beta eps", (1e-6,)),
}
BF16 = torch.bfloat16


def cpu(shape, dtype=BF16):
    return torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)


# -- CPU: registration, import cost, signatures -------------------------------------------


def test_every_public_op_is_registered_and_named_by_its_kernel_module():
    assert all(is_registered(name) for name in OPS)
    modules = (rmsnorm, gemma_rmsnorm, fused_add_rmsnorm, gemma_fused_add_rmsnorm, layernorm)
    assert sorted(name for m in modules for name in m.PUBLIC_OPS) == sorted(OPS)


def test_importing_the_package_imports_neither_torch_nor_the_compiler():
    code = (
        "import sys, tirx_kernels.flashinfer as f; "
        "assert 'torch' not in sys.modules and 'tvm_tirx' not in sys.modules, 'eager'; "
        "assert 'rmsnorm' in dir(f); "
        "f.rmsnorm; assert 'torch' in sys.modules and 'tvm_tirx' not in sys.modules, 'lazy'"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_the_package_reexports_the_public_functions():
    import tirx_kernels.flashinfer as package

    for name in UPSTREAM_SIGNATURES:
        assert getattr(package, name) is getattr(norm, name)
    with pytest.raises(AttributeError, match="no attribute 'not_a_kernel'"):
        package.not_a_kernel  # noqa: B018


@pytest.mark.parametrize("name", UPSTREAM_SIGNATURES)
def test_wrappers_keep_flashinfers_argument_names_and_defaults(name):
    params = inspect.signature(getattr(norm, name)).parameters.values()
    names, defaults = UPSTREAM_SIGNATURES[name]
    assert [p.name for p in params] == names.split()
    assert tuple(p.default for p in params if p.default is not p.empty) == defaults


# -- CPU: argument checks (ValueError naming the argument) --------------------------------


@pytest.mark.parametrize("wrapper", [norm.rmsnorm, norm.gemma_rmsnorm])
@pytest.mark.parametrize(
    "args, match",
    [
        ((cpu((2, 2, 4, 64)), cpu(64)), r"input must be 2D \(tokens, hidden\) or 3D"),
        ((cpu((4, 64), torch.float32), cpu(64, torch.float32)), "input has dtype torch.float32"),
        ((cpu((4, 64)), cpu(32)), r"weight must be 1D of shape \(64,\)"),
        ((cpu((4, 64)), cpu(64, torch.float16)), "weight must be .* dtype torch.bfloat16"),
        ((cpu((4, 64)), cpu(64), 1e-6, cpu((3, 64))), "out must have input's shape"),
        ((cpu((4, 16392)), cpu(16392)), "hidden=16392 outside"),
        ((cpu((4, 64)).t(), cpu(4)), "input's last dimension must be contiguous"),
        ((cpu((4, 64)), cpu(64)), "input must be a CUDA tensor, got cpu"),
        ((cpu((2, 4, 64)), cpu(64)), "input must be a CUDA tensor, got cpu"),
    ],
)
def test_rmsnorm_arguments_are_checked(wrapper, args, match):
    with pytest.raises(ValueError, match=match):
        wrapper(*args)


@pytest.mark.parametrize("wrapper", [norm.fused_add_rmsnorm, norm.gemma_fused_add_rmsnorm])
@pytest.mark.parametrize(
    "args, match",
    [
        ((cpu(64), cpu(64), cpu(64)), "input must be 2D"),
        ((cpu((4, 64), torch.int8), cpu((4, 64)), cpu(64)), "input has dtype torch.int8"),
        ((cpu((4, 64)), cpu((4, 72)), cpu(64)), "residual must have input's shape"),
        ((cpu((4, 64)), cpu((4, 64), torch.float16), cpu(64)), "residual must have .* dtype"),
        ((cpu((4, 64)), cpu((4, 64)), cpu((1, 64))), "weight must be 1D"),
        ((cpu((2, 4, 64)), cpu((2, 4, 64)), cpu(64)), "input must be 2D"),
        ((cpu((4, 64)), cpu((4, 64)), cpu(64)), "input must be a CUDA tensor"),
    ],
)
def test_fused_add_rmsnorm_arguments_are_checked(wrapper, args, match):
    with pytest.raises(ValueError, match=match):
        wrapper(*args)


F32 = torch.float32


@pytest.mark.parametrize(
    "args, match",
    [
        ((cpu((4, 64), torch.float16), cpu(64, F32), cpu(64, F32)), "expected torch.bfloat16"),
        ((cpu((4, 64)), cpu(64), cpu(64, F32)), "gemma must be .* dtype torch.float32"),
        ((cpu((4, 64)), cpu(64, F32), cpu(63, F32)), r"beta must be 1D of shape \(64,\)"),
        ((cpu((4, 16400)), cpu(16400, F32), cpu(16400, F32)), "hidden=16400 outside"),
        ((cpu((4, 64)), cpu(64, F32), cpu(64, F32)), "input must be a CUDA tensor"),
    ],
)
def test_layernorm_arguments_are_checked(args, match):
    with pytest.raises(ValueError, match=match):
        norm.layernorm(*args)


def test_the_ops_check_their_arguments_when_called_directly():
    with pytest.raises(ValueError, match="out must have input's shape"):
        torch.ops.tirx_kernels.flashinfer_rmsnorm(cpu((2, 64)), cpu((4, 64)), cpu(64), 1e-6)


# -- CPU: fakes and tracing ---------------------------------------------------------------


def test_fakes_give_the_outputs_metadata_without_running_a_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, w = torch.empty(5, 64, dtype=BF16), torch.empty(64, dtype=BF16)
        g, b = torch.empty(64, dtype=F32), torch.empty(64, dtype=F32)
        outs = [norm.rmsnorm(x, w), norm.gemma_rmsnorm(x, w), norm.layernorm(x, g, b)]
        assert norm.fused_add_rmsnorm(x, torch.empty_like(x), w) is None
        assert norm.gemma_fused_add_rmsnorm(x, torch.empty_like(x), w) is None
    assert all(o.shape == (5, 64) and o.dtype == BF16 for o in outs)


def test_fullgraph_compile_traces_the_wrappers_and_keeps_the_checks():
    """Dynamo traces into the op (no graph break); the eager run still checks the device."""

    def model(x, residual, w, g, b):
        norm.fused_add_rmsnorm(x, residual, w)
        return norm.layernorm(norm.rmsnorm(x, w), g, b)

    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with pytest.raises(ValueError, match="input must be a CUDA tensor"):
        compiled(cpu((3, 64)), cpu((3, 64)), cpu(64), cpu(64, F32), cpu(64, F32))


# -- GPU (sm_90a) -------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (sm_90a)")


@pytest.fixture
def sm90():
    from tirx_kernels.core.testing import skip_unless_gpu

    skip_unless_gpu({"archs": ["sm_90a"]})


def data(tokens, hidden, dtype=BF16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g).to(dtype).cuda()
    w = (torch.randn(hidden, generator=g) * 0.5 + 1).to(dtype).cuda()
    return x, w


def affine(hidden, seed=2):
    """LayerNorm's float32 gamma (about 1) and beta."""
    g = torch.Generator().manual_seed(seed)
    gamma = torch.randn(hidden, generator=g) * 0.5 + 1
    return gamma.cuda(), (torch.randn(hidden, generator=g) * 0.5).cuda()


RMS_CASES = [(7, 2048, BF16), (300, 4096, torch.float16), (8193, 2048, BF16), (0, 4096, BF16)]


@gpu
@pytest.mark.parametrize("tokens, hidden, dtype", RMS_CASES)
@pytest.mark.parametrize("bias, wrapper", [(0.0, norm.rmsnorm), (1.0, norm.gemma_rmsnorm)])
def test_rmsnorm_matches_torch_fp32(sm90, tokens, hidden, dtype, bias, wrapper):
    x, w = data(tokens, hidden, dtype)
    want = rms.rmsnorm_reference(x, w, 1e-5, bias)
    tols = dtype_tols(str(dtype).removeprefix("torch."))
    torch.testing.assert_close(wrapper(x, w, 1e-5).float(), want, **tols)
    out = torch.empty_like(x)
    assert wrapper(x, w, eps=1e-5, out=out, enable_pdl=True) is out
    torch.testing.assert_close(out.float(), want, **tols)


@gpu
@pytest.mark.parametrize("tokens, hidden, dtype", RMS_CASES)
@pytest.mark.parametrize(
    "bias, wrapper", [(0.0, norm.fused_add_rmsnorm), (1.0, norm.gemma_fused_add_rmsnorm)]
)
def test_fused_add_rmsnorm_matches_torch_fp32(sm90, tokens, hidden, dtype, bias, wrapper):
    x, w = data(tokens, hidden, dtype)
    r, _ = data(tokens, hidden, dtype, seed=1)
    want_res, want = rms.fused_add_reference(x, r, w, 1e-6, bias)
    assert wrapper(x, r, w) is None
    torch.testing.assert_close(r, want_res, rtol=0, atol=0)
    torch.testing.assert_close(x.float(), want, **dtype_tols(str(dtype).removeprefix("torch.")))


@gpu
@pytest.mark.parametrize("tokens, hidden", [(7, 2048), (8195, 1000), (300, 9000), (0, 4096)])
def test_layernorm_matches_torch_fp32(sm90, tokens, hidden):
    x, _ = data(tokens, hidden)
    g, b = affine(hidden)
    out = norm.layernorm(x, g, b, 1e-5)
    want = layernorm.reference(x, g, b, 1e-5)
    torch.testing.assert_close(out.float(), want, **dtype_tols("bfloat16"))


@gpu
def test_cuda_graph_replay_normalizes_new_inputs(sm90):
    x, w = data(512, 4096)
    r, _ = data(512, 4096, seed=1)
    g, b = affine(4096)
    out, ln = torch.empty_like(x), torch.empty_like(x)
    x1, r1, x2, r2 = x.clone(), r.clone(), x.clone(), r.clone()
    qk = x.view(512, 32, 128)  # 3D (QK-norm) and strided rows (every other row)
    wq = w[:128].contiguous()

    def ops():
        norm.rmsnorm(x, w, out=out)
        ln.copy_(norm.layernorm(x, g, b))
        norm.fused_add_rmsnorm(x1, r1, w)
        norm.gemma_fused_add_rmsnorm(x2, r2, w)
        return norm.gemma_rmsnorm(x, w), norm.rmsnorm(qk, wq), norm.rmsnorm(x[::2], w)

    ops()  # compile outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemma, qk_out, strided = ops()
    new_x, _ = data(512, 4096, seed=3)
    x.copy_(new_x)
    x1.copy_(new_x)
    r1.copy_(r)
    x2.copy_(new_x)
    r2.copy_(r)
    graph.replay()
    torch.cuda.synchronize()
    tols = dtype_tols("bfloat16")
    torch.testing.assert_close(out.float(), rms.rmsnorm_reference(new_x, w, 1e-6, 0.0), **tols)
    torch.testing.assert_close(gemma.float(), rms.rmsnorm_reference(new_x, w, 1e-6, 1.0), **tols)
    want_qk = rms.rmsnorm_reference(new_x.view(512, 32, 128), wq, 1e-6, 0.0)
    torch.testing.assert_close(qk_out.float(), want_qk, **tols)
    want = rms.rmsnorm_reference(new_x[::2], w, 1e-6, 0.0)
    torch.testing.assert_close(strided.float(), want, **tols)
    want_res, want = rms.fused_add_reference(new_x, r, w, 1e-6, 1.0)
    torch.testing.assert_close(r2, want_res, rtol=0, atol=0)
    torch.testing.assert_close(x2.float(), want, **tols)
    torch.testing.assert_close(ln.float(), layernorm.reference(new_x, g, b), **tols)
    want_res, want = rms.fused_add_reference(new_x, r, w, 1e-6, 0.0)
    torch.testing.assert_close(r1, want_res, rtol=0, atol=0)
    torch.testing.assert_close(x1.float(), want, **tols)


@gpu
def test_fullgraph_compile_gives_the_eager_bits(sm90):
    def model(x, residual, w, g, b):
        y = norm.gemma_rmsnorm(x, w)
        norm.gemma_fused_add_rmsnorm(x, residual, w)
        return y, norm.layernorm(norm.rmsnorm(x, w), g, b)

    x, w = data(1024, 4096)
    r, _ = data(1024, 4096, seed=1)
    g, b = affine(4096)
    eager_x, eager_r = x.clone(), r.clone()
    want = model(eager_x, eager_r, w, g, b)
    got = torch.compile(model, fullgraph=True)(x, r, w, g, b)
    for a, e in zip((*got, x, r), (*want, eager_x, eager_r)):
        assert torch.equal(a, e)


@gpu
def test_layout_and_device_errors_name_the_argument(sm90):
    x, w = data(8, 4096)
    with pytest.raises(ValueError, match="input's last dimension must be contiguous"):
        norm.rmsnorm(x.t().contiguous().t(), w)
    with pytest.raises(ValueError, match="weight must be contiguous and 16-byte aligned"):
        norm.rmsnorm(x, torch.empty(4097, dtype=BF16, device="cuda")[1:])
    with pytest.raises(ValueError, match="weight must be on input's device cuda:0, got cpu"):
        norm.rmsnorm(x, w.cpu())
    with pytest.raises(ValueError, match="out must have input's shape"):
        norm.rmsnorm(x, w, out=torch.empty(4, 4096, dtype=BF16, device="cuda"))


@gpu
@pytest.mark.parametrize("hidden", [111, 500, 6, 4100])
@pytest.mark.parametrize("dtype", [BF16, torch.float16])
def test_any_hidden_size_runs_upstreams_narrow_vectors(sm90, hidden, dtype):
    """gcd(8, hidden)-element vectors (1, 4, 2, 4 here), as upstream's VEC_SIZE."""
    x, w = data(37, hidden, dtype)
    r, _ = data(37, hidden, dtype, seed=1)
    tols = dtype_tols(str(dtype).removeprefix("torch."))
    for bias, wrapper in ((0.0, norm.rmsnorm), (1.0, norm.gemma_rmsnorm)):
        want = rms.rmsnorm_reference(x, w, 1e-6, bias)
        torch.testing.assert_close(wrapper(x, w).float(), want, **tols)
    want_res, want = rms.fused_add_reference(x, r, w, 1e-6, 0.0)
    norm.fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close(r, want_res, rtol=0, atol=0)
    torch.testing.assert_close(x.float(), want, **tols)
    if dtype == BF16:
        g, b = affine(hidden)
        want = layernorm.reference(r, g, b, 1e-6)
        torch.testing.assert_close(norm.layernorm(r, g, b).float(), want, **tols)


@gpu
def test_3d_qk_norm_and_strided_rows_match_the_contiguous_result(sm90):
    qkv, w = data(19, 3 * 8 * 128)
    w = w[:128].contiguous()
    q = qkv[:, : 8 * 128].view(19, 8, 128)  # a head slice of qkv: rows with a stride
    want = rms.rmsnorm_reference(q, w, 1e-6, 0.0)
    tols = dtype_tols("bfloat16")
    torch.testing.assert_close(norm.rmsnorm(q.contiguous(), w).float(), want, **tols)
    torch.testing.assert_close(norm.rmsnorm(q, w).float(), want, **tols)
    out = torch.empty(19, 2, 8, 128, dtype=BF16, device="cuda")[:, 1]  # strided out
    assert norm.gemma_rmsnorm(q, w, out=out) is out
    torch.testing.assert_close(out.float(), rms.rmsnorm_reference(q, w, 1e-6, 1.0), **tols)
    x, r = qkv[:, :1024], qkv[:, 1024:2048].clone()  # in place on a strided slice
    want_res, want = rms.fused_add_reference(x, r, w.repeat(8), 1e-6, 0.0)
    before = qkv[:, 2048:].clone()
    norm.fused_add_rmsnorm(x, r, w.repeat(8))
    torch.testing.assert_close(r, want_res, rtol=0, atol=0)
    torch.testing.assert_close(x.float(), want, **tols)
    assert torch.equal(qkv[:, 2048:], before)  # the rest of the wider tensor is untouched
