# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Suite YAML validation: each problem names file, entry and fix; exit 2, nothing runs."""

import subprocess
import sys

import pytest
from test_suite_support import FakeBackend, FakeKernel, FakeRegistry, write_yaml

from tirx_kernels.core.suite.cli import main
from tirx_kernels.core.suite.config import ConfigError, load_suite, load_workloads_file

KERNELS = {
    k.name: k
    for k in [
        FakeKernel("rmsnorm", "basic", ["t1_h4096", "t4096_h4096"]),
        FakeKernel("gemm", "basic", ["m1_n4096", "m4096_n4096"]),
        FakeKernel("rope", "other", ["t1"]),
    ]
}

GOOD = """\
kernel: rmsnorm
defaults: {num_gpus: 1, timer: event}
configs:
  - {config: t1_h4096, default: true}
  - {config: t4096_h4096, default: false, timer: proton, warmup: 10, repeat: 50}
"""


def load(tmp_path, text, family="basic", name="rmsnorm.yaml"):
    return load_suite([(family, write_yaml(tmp_path, name, text))], KERNELS)


def problems(tmp_path, text, **kw):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, text, **kw)
    return e.value.problems


def test_good_file(tmp_path):
    a, b = load(tmp_path, GOOD)
    assert (a.kernel, a.config, a.family, a.default, a.num_gpus, a.timer) == (
        "rmsnorm",
        "t1_h4096",
        "basic",
        True,
        1,
        "event",
    )
    assert (b.default, b.timer, b.warmup, b.repeat) == (False, "proton", 10, 50)
    assert a.bench_options(5, 1.0) == {"rounds": 5, "cooldown_s": 1.0, "timer": "event"}
    assert b.bench_options(3, 0.5) == {
        "rounds": 3,
        "cooldown_s": 0.5,
        "timer": "proton",
        "warmup": 10,
        "repeat": 50,
    }
    assert "rmsnorm.yaml: configs[1] (config: t4096_h4096)" in b.source


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "kernel: nope\nconfigs: [{config: a, default: true}]",
            ["unknown kernel 'nope'", "installed: gemm, rmsnorm, rope"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t9_h1, default: true}]",
            [
                "configs[0] (config: t9_h1): unknown label 't9_h1' for kernel 'rmsnorm'",
                "fix: use one of its bench labels (t1_h4096, t4096_h4096)",
            ],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096}]",
            ["configs[0] (config: t1_h4096): missing `default`", "fix: add `default: true`"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: yes please}]",
            ["`default` must be true or false, got 'yes please'"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, num_gpus: two}]",
            ["bad num_gpus: 'two'; fix: use an integer >= 1"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, num_gpus: 0}]",
            ["bad num_gpus: 0"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, timer: wallclock}]",
            ["bad timer: 'wallclock'; fix: use one of proton, event, cudagraph_proton, kineto"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, warmup: -1}]",
            ["bad warmup: -1"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, repeat: fast}]",
            ["bad repeat: 'fast'"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, repeat: .nan}]",
            ["bad repeat: nan; fix: use a finite number of milliseconds > 0"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, warmup: .inf}]",
            ["bad warmup: inf; fix: use a finite number of milliseconds >= 0"],
        ),
        (
            "kernel: rmsnorm\ndefaults: {timer: kineto}\n"
            "configs: [{config: t1_h4096, default: true, warmup: 5}]",
            ["timer kineto takes no warmup budget", "fix: drop warmup"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true, rounds: 3}]",
            [
                "unknown key 'rounds'; fix: use only config, default, timer, warmup, repeat, "
                "num_gpus"
            ],
        ),
        (
            "kernel: rmsnorm\ndefaults: {gpus: 2}\nconfigs: [{config: t1_h4096, default: true}]",
            ["defaults: unknown key 'gpus'"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true},"
            " {config: t1_h4096, default: false}]",
            [
                "configs[1] (config: t1_h4096): duplicate entry for kernel 'rmsnorm' "
                "config 't1_h4096'",
                "first at",
                "fix: keep one",
            ],
        ),
        (
            "kernel: rmsnorm\nkernel: gemm\nconfigs: []",
            ["malformed YAML", "duplicate key 'kernel'"],
        ),
        (
            "kernel: rmsnorm\nconfigs: [{config: t1_h4096, default: true}\n",
            ["malformed YAML", "fix: correct the YAML syntax"],
        ),
        ("kernel: rmsnorm\nconfigs: []", ["`configs` must be a non-empty list"]),
        ("- just a list", ["expected a mapping with `kernel:` and `configs:`"]),
        ("configs: [{config: t1_h4096, default: true}]", ["missing `kernel: <name>`"]),
        ("", ["empty file"]),
        ("kernel: rmsnorm\nconfigs: [t1_h4096]", ["configs[0]: expected a mapping"]),
        ("kernel: rmsnorm\nconfigs: [{default: true}]", ["configs[0]: missing `config: <label>`"]),
    ],
)
def test_bad_files_name_file_entry_and_fix(tmp_path, text, expected):
    found = problems(tmp_path, text)
    joined = "\n".join(found)
    for part in expected:
        assert part in joined, joined
    assert all(p.startswith(str(tmp_path / "rmsnorm.yaml")) for p in found)


def test_every_problem_is_reported_at_once(tmp_path):
    found = problems(
        tmp_path,
        "kernel: rmsnorm\nconfigs:\n  - {config: x, default: true}\n"
        "  - {config: t1_h4096}\n  - {config: t1_h4096, default: 1}\n",
    )
    assert len(found) == 3


def test_file_of_another_family_and_second_file_for_a_kernel(tmp_path):
    found = problems(tmp_path, "kernel: rope\nconfigs: [{config: t1, default: true}]")
    assert "kernel 'rope' belongs to family 'other', not 'basic'" in found[0]
    a = write_yaml(tmp_path, "a.yaml", GOOD)
    b = write_yaml(tmp_path, "b.yaml", GOOD)
    with pytest.raises(ConfigError) as e:
        load_suite([("basic", a), ("basic", b)], KERNELS)
    assert "already has a suite file" in str(e.value) and str(a) in str(e.value)


def test_workloads_file(tmp_path):
    path = write_yaml(
        tmp_path,
        "w.yaml",
        """\
        defaults: {timer: event}
        workloads:
          - {kernel: rmsnorm, config: t1_h4096}
          - {kernel: gemm, config: m4096_n4096, num_gpus: 2, timer: kineto, default: false}
        """,
    )
    a, b = load_workloads_file(path, KERNELS)
    assert (a.kernel, a.family, a.timer, a.default) == ("rmsnorm", "basic", "event", True)
    assert (b.kernel, b.num_gpus) == ("gemm", 2)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("workloads:\n  - {config: t1_h4096}", "workloads[0] (config: t1_h4096): missing `kernel`"),
        ("workloads:\n  - {kernel: nope, config: a}", "unknown kernel 'nope'"),
        ("workloads:\n  - {kernel: gemm, config: t1_h4096}", "unknown label 't1_h4096'"),
        (
            "workloads:\n  - {kernel: gemm, config: m1_n4096}\n"
            "  - {kernel: gemm, config: m1_n4096}",
            "duplicate entry",
        ),
        ("kernel: gemm", "unknown key 'kernel'"),
        ("workloads: {kernel: gemm}", "`workloads` must be a non-empty list"),
        (
            "workloads:\n  - {kernel: gemm, config: m1_n4096, num_gpus: 2, timer: proton}",
            "timer proton cannot time a 2-GPU workload",
        ),
        (
            "workloads:\n  - {kernel: gemm, config: m1_n4096, timer: kineto}",
            "timer kineto times only multi-GPU workloads",
        ),
        ("? [1, 2]\n: x\n", "unhashable key"),
    ],
)
def test_bad_workloads_files(tmp_path, text, expected):
    with pytest.raises(ConfigError) as e:
        load_workloads_file(write_yaml(tmp_path, "w.yaml", text), KERNELS)
    assert expected in str(e.value)


def test_cli_exits_2_and_runs_nothing_on_a_bad_file(tmp_path, capsys):
    good = write_yaml(
        tmp_path, "gemm.yaml", "kernel: gemm\nconfigs: [{config: m1_n4096, default: true}]"
    )
    bad = write_yaml(
        tmp_path, "rmsnorm.yaml", "kernel: rmsnorm\nconfigs: [{config: zz, default: true}]"
    )
    backend = FakeBackend(
        FakeRegistry(KERNELS.values(), [("basic", good), ("basic", bad)]), tmp=tmp_path
    )
    code = main(["--out-dir", str(tmp_path / "out"), "--kernel", "gemm"], backend=backend)
    err = capsys.readouterr().err
    assert code == 2
    assert "invalid suite configuration (1 problem(s)); nothing ran" in err
    assert f"{bad}: configs[0] (config: zz): unknown label 'zz'" in err
    assert backend.fake_executor.started == []
    assert not (tmp_path / "out").exists()
    bad_workloads = write_yaml(tmp_path, "w.yaml", "workloads: [{kernel: gemm}]")
    assert (
        main(
            ["--workloads", str(bad_workloads), "--out-dir", str(tmp_path / "out")], backend=backend
        )
        == 2
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kernel", "nope"], "no kernel 'nope'"),
        (["--family", "nope"], "no family 'nope'"),
        (["--kernel", "rope"], "kernel 'rope' has no suite entry"),
        (["--config", "m9"], "no selected suite entry has config(s) m9"),
        (["--config", "m1_n4069"], "config(s) m1_n4069 (did you mean 'm1_n4096'?); `tirx-suite"),
        (["--kernel", "gemm", "--gpus", "7"], "--gpus: no GPU with index [7]"),
        (["--rounds", "0"], "argument --rounds: must be an integer >= 1"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path, capsys, args, message):
    f = write_yaml(
        tmp_path,
        "gemm.yaml",
        "kernel: gemm\nconfigs: [{config: m1_n4096, "
        "default: true}, {config: m4096_n4096, default: false}]",
    )
    backend = FakeBackend(FakeRegistry(KERNELS.values(), [("basic", f)]), tmp=tmp_path)
    assert main([*args, "--out-dir", str(tmp_path / "out")], backend=backend) == 2
    assert message in capsys.readouterr().err
    assert backend.fake_executor.started == []


def test_installed_families_suite_files_are_valid():
    """The YAML files the installed families ship validate against their kernels."""
    from tirx_kernels.core.registry import Registry

    registry = Registry.load()
    files = registry.suite_files()
    if not files:
        pytest.skip("no installed family ships suite files")
    workloads = load_suite(files, registry.kernels)
    assert workloads and any(w.default for w in workloads)


def test_non_utf8_file_is_a_config_error(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_bytes(b"\xff\xfeworkloads: []\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_workloads_file(path, KERNELS)


def test_gpus_option_rejects_a_repeated_index():
    from tirx_kernels.core.suite.cli import UsageError, _choose_gpus

    class Gpu:
        def __init__(self, index):
            self.index = index

    gpus = [Gpu(0), Gpu(1)]
    assert [g.index for g in _choose_gpus(gpus, "1")] == [1]
    with pytest.raises(UsageError, match="names a GPU twice"):
        _choose_gpus(gpus, "0,0")
    with pytest.raises(UsageError, match="no GPU with index"):
        _choose_gpus(gpus, "2")


def alias_bomb() -> str:
    """Billion laughs: nine levels of nine aliases, 9**9 strings once expanded."""
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "lols:\n" + "".join(f"  {x}\n" for x in levels) + "workloads: [*i]\n"


def test_yaml_aliases_are_refused_before_they_expand(tmp_path):
    """Row 12 of issue #27: a 487-byte alias bomb in --workloads took 2.9 GB, then
    MemoryError. Run under a 1 GiB address-space cap so a regression fails fast."""
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    assert len(path.read_bytes()) < 600
    code = f"""
import resource
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from tirx_kernels.core.suite.config import ConfigError, load_workloads_file
try:
    load_workloads_file({str(path)!r}, {{}})
except ConfigError as e:
    print(e)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-1500:]
    assert f"{path}: line 3: YAML aliases (*a) are not allowed" in p.stdout, p.stdout
    assert "fix: write the value out" in p.stdout and len(p.stdout) < 1000


def test_family_suite_files_refuse_aliases_too(tmp_path):
    text = "kernel: rmsnorm\nconfigs:\n  - &e {config: t1_h4096, default: true}\n  - *e\n"
    found = problems(tmp_path, text)
    assert len(found) == 1 and "YAML aliases (*e) are not allowed" in found[0]
