# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Static reading and validation of KERNEL_META and config matrices."""

import pytest

from tirx_kernels.core.meta import (
    MetaError,
    read_module_info,
    strip_label,
    validate_configs,
    validate_meta,
)

GOOD = {"name": "rmsnorm", "category": "basic", "compute_capability": 9, "archs": ["sm_90a"]}


def meta(**changes):
    m = dict(GOOD, **changes)
    return {k: v for k, v in m.items() if v is not None}


def test_good_meta_passes():
    validate_meta(GOOD, where="m", category="basic")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"name": None}, "missing required key 'name'"),
        ({"archs": "sm_90a"}, "must be list"),
        ({"compute_capability": 90}, "write the major version (9 for SM90)"),
        ({"compute_capability": 100, "archs": ["sm_100a"]}, "10 for SM100"),
        ({"compute_capability": True}, "must be int"),
        ({"archs": []}, "exact archs"),
        ({"archs": ["hopper"]}, "not an exact arch"),
        ({"archs": ["sm_100a"]}, "does not belong to compute_capability 9"),
        ({"name": "Bad-Name"}, "lower_snake_case"),
        ({"extra": 1}, "unknown keys"),
        ({"category": "flashinfer"}, "family's category is 'basic'"),
    ],
)
def test_bad_meta_is_rejected_with_the_fix(changes, message):
    with pytest.raises(MetaError) as e:
        validate_meta(meta(**changes), where="mod.py", category="basic")
    assert message in str(e.value) and "mod.py" in str(e.value)


@pytest.mark.parametrize(
    "configs, message",
    [
        ([], "non-empty list"),
        ([{"M": 1}], "needs a non-empty string 'label'"),
        ([{"label": " "}], "non-empty string"),
        ([{"label": "a"}, {"label": "a"}], "used twice"),
        (["a"], "must be a dict"),
    ],
)
def test_bad_configs(configs, message):
    with pytest.raises(MetaError, match=message):
        validate_configs(configs, where="m")


def test_labels_and_strip_label():
    assert validate_configs([{"label": "a", "M": 1}, {"label": "b"}], where="m") == ["a", "b"]
    assert strip_label({"label": "a", "M": 1}) == {"M": 1}


def test_configs_from_comprehensions_over_literals(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(
        "import torch\n"  # never executed
        "KERNEL_META = {'name': 'k', 'category': 'c', 'compute_capability': 9,"
        " 'archs': ['sm_90a']}\n"
        "HIDDEN = (128, 4096)\n"
        "TOKENS = (1, 2)\n"
        "CONFIGS = [{'label': f'h{h}_t{t}', 'hidden': h, 'tokens': t}"
        " for h in HIDDEN for t in TOKENS]\n"
        "BENCH_CONFIGS = CONFIGS[:1]\n"
        "def get_kernel(**c): raise SystemExit\n"
    )
    info = read_module_info(src)
    assert [c["label"] for c in info.configs] == ["h128_t1", "h128_t2", "h4096_t1", "h4096_t2"]
    assert info.bench_configs == info.configs[:1]


UNREADABLE = {
    "meta-not-a-literal": (
        "NAME = 'k'\nKERNEL_META = {'name': NAME}\nCONFIGS = []\n",
        "plain literal",
    ),
    "configs-calling-code-are-not-evaluated": (
        "KERNEL_META = {'name': 'k'}\nCONFIGS = [{'label': str(__import__('os').getpid())}]\n",
        "CONFIGS is not statically evaluable.*line 2: calls",
    ),
    "configs-naming-an-imported-value-say-which": (
        "from x import SIZES\n"
        "KERNEL_META = {'name': 'k'}\n"
        "CONFIGS = [{'label': str(s)} for s in SIZES]\n",
        "name 'SIZES' is not defined",
    ),
    "missing-meta": ("CONFIGS = []\n", "no module-level KERNEL_META"),
}


@pytest.mark.parametrize("source, message", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_unreadable_modules_say_why(tmp_path, source, message):
    src = tmp_path / "k.py"
    src.write_text(source)
    with pytest.raises(MetaError, match=message):
        read_module_info(src)


def test_configs_shared_through_a_sibling_module_are_read_without_importing(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "_shared.py").write_text(
        "import torch\n"  # never executed
        "SIZES = (1, 7)\n"
        "SHARED = [{'label': f't{t}', 'tokens': t} for t in SIZES]\n"
        "DYNAMIC = torch.arange(3)\n"
    )
    (pkg / "k.py").write_text(
        "from ._shared import SHARED as BASE, DYNAMIC\n"
        "KERNEL_META = {'name': 'k'}\n"
        "CONFIGS = BASE\n"
        "BENCH_CONFIGS = [dict(c, big=True) for c in BASE]\n"
    )
    info = read_module_info(pkg / "k.py")
    assert [c["label"] for c in info.configs] == ["t1", "t7"]
    assert info.bench_configs[1] == {"label": "t7", "tokens": 7, "big": True}
    (pkg / "k.py").write_text("from ._shared import DYNAMIC\nKERNEL_META = {}\nCONFIGS = DYNAMIC\n")
    with pytest.raises(MetaError, match="DYNAMIC of _shared.py"):
        read_module_info(pkg / "k.py")


def test_config_dtypes_are_torch_names():
    good = [{"label": "bf16_a", "dtype": "bfloat16", "out_dtype": "float8_e4m3fn"}]
    validate_configs(good, where="m")
    with pytest.raises(MetaError, match=r"m: CONFIGS 'a': dtype='bf16' is not a torch dtype name"):
        validate_configs([{"label": "a", "dtype": "bf16"}], where="m")
    with pytest.raises(MetaError, match=r"out_dtype='fp8'"):
        validate_configs([{"label": "a", "out_dtype": "fp8"}], where="m")


def test_meta_dtypes_are_torch_names():
    meta = {
        "name": "k",
        "category": "c",
        "compute_capability": 9,
        "archs": ["sm_90a"],
        "dtypes": ["bfloat16", "fp16"],
    }
    with pytest.raises(MetaError, match=r"dtypes'\] has \['fp16'\]"):
        validate_meta(meta, where="m")
