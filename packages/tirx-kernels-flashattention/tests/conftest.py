# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Each test reads the schedule override afresh: tests set ``$TIRX_FLASH_ATTN_SCHEDULE``,
which the op reads once (``_attention_schedule.override_text``)."""

import pytest


@pytest.fixture(autouse=True)
def fresh_override():
    from tirx_kernels.flashattention._attention_schedule import override_text

    override_text.cache_clear()
    yield
    override_text.cache_clear()
