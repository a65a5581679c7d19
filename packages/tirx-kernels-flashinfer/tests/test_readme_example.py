# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The README's switch-over example calls our functions as FlashInfer's users write them:
every ``flashinfer.<name>(...)`` in it is a public function whose signature takes those
arguments (positional count and keyword names)."""

import ast
import inspect
import re
from pathlib import Path

import tirx_kernels.flashinfer as ours

README = Path(__file__).resolve().parents[1] / "README.md"


def _example_calls():
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    tree = ast.parse(code)
    assert any(
        isinstance(node, ast.Import) and node.names[0].name == "tirx_kernels.flashinfer"
        for node in tree.body
    )
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and getattr(node.func.value, "id", None) == "flashinfer"
    ]


def test_every_call_of_the_example_binds_to_our_function():
    calls = _example_calls()
    assert len(calls) >= 4
    for call in calls:
        name = call.func.attr
        assert name in ours.__all__, name
        signature = inspect.signature(getattr(ours, name))
        signature.bind(*call.args, **{kw.arg: kw.value for kw in call.keywords})
