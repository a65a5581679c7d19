# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Each test reads the op's switches afresh: tests set ``$TIRX_FLASHMLA_VARIANT`` and
``$TIRX_FLASHMLA_COMBINE``, which the op reads once (``decode.switches``)."""

import pytest


@pytest.fixture(autouse=True)
def fresh_switches():
    from tirx_kernels.flashmla import decode

    decode.switches.cache_clear()
    yield
    decode.switches.cache_clear()
