# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""core.args (shared argument checks) and core.exports (lazy family exports)."""

import sys
import types

import pytest
import torch

from tirx_kernels.core.args import check_memory
from tirx_kernels.core.exports import lazy_exports


def test_check_memory_names_the_function_argument_and_fix():
    with pytest.raises(ValueError, match=r"op: x must be a CUDA tensor.*x.cuda\(\)"):
        check_memory("op", "x", torch.zeros(4), device=0)
    # a CPU tensor never passes, contiguous or not
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        check_memory("op", "x", torch.zeros(4, 4).t(), device=0, contiguous=False)


def test_lazy_exports_import_on_first_use_and_cache(monkeypatch):
    pkg = types.ModuleType("fakefam")
    pkg.__path__ = []
    op = types.ModuleType("fakefam.ops")
    op.thing = object()
    monkeypatch.setitem(sys.modules, "fakefam", pkg)
    monkeypatch.setitem(sys.modules, "fakefam.ops", op)
    namespace = {}
    getattr_, dir_ = lazy_exports("fakefam", {"thing": "ops"}, namespace)
    assert getattr_("thing") is op.thing and namespace["thing"] is op.thing
    assert dir_() == ["thing"]
    with pytest.raises(AttributeError, match="'fakefam' has no attribute 'other'"):
        getattr_("other")
