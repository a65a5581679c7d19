# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""The flashattention family loads with its terms: Apache-2.0 AND BSD-3-Clause, upstream
FlashAttention at the pinned commit, its LICENSE and AUTHORS texts shipped verbatim."""

from __future__ import annotations

import pathlib

from tirx_kernels.flashattention import plugin

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_family_declares_its_terms():
    family = plugin.tirx_kernels_family()
    assert family.name == "flashattention" and family.package == "tirx_kernels.flashattention"
    policy = family.license
    assert policy.expression == "Apache-2.0 AND BSD-3-Clause"
    assert policy.upstream.commit == "0251105a2fb19d2957484b7f023cd8c115286ced"
    assert policy.upstream.spdx == "BSD-3-Clause"
    assert policy.upstream.texts == (
        "licenses/flash-attention-LICENSE.txt",
        "licenses/flash-attention-AUTHORS.txt",
    )


def test_license_texts_are_shipped():
    text = (ROOT / "licenses" / "flash-attention-LICENSE.txt").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "Copyright (c) 2022, the respective contributors, as shown by the AUTHORS file." in text
    assert (ROOT / "licenses" / "flash-attention-AUTHORS.txt").read_text() == (
        "Tri Dao, trid@cs.stanford.edu"
    )
