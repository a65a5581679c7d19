# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Child processes that die with their parent.

``tirx-run`` and ``tirx-suite`` run each config in a worker process (and a multi-GPU
worker runs one process per rank). When the parent dies without cleaning up (``kill -9``,
an OOM kill), a hung worker would run on with no timeout. The parent passes its pid in
``TIRX_KERNELS_PARENT_PID``; the child asks Linux for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), then checks that the parent did not die before that, and
elsewhere falls back to a thread polling ``os.getppid()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

ENV_PARENT = "TIRX_KERNELS_PARENT_PID"
PR_SET_PDEATHSIG = 1
POLL_S = 0.5


def child_env() -> dict[str, str]:
    """The environment entry a child needs to die with this process."""
    return {ENV_PARENT: str(os.getpid())}


def die_with_parent() -> None:
    """Call first thing in a child started with :func:`child_env` (no-op otherwise)."""
    try:
        parent = int(os.environ.get(ENV_PARENT, ""))
    except ValueError:
        return  # started by hand: no parent to follow
    if not _request_death_signal():
        threading.Thread(target=_watch, args=(parent,), name="tirx-lifeline", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _request_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os.kill(os.getpid(), signal.SIGKILL)
