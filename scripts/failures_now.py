# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A pytest plugin for device runs: each failure's test id and first error line, appended to
``$TIRX_FAILURES_LOG`` as it happens, so a run a timeout kills before pytest's summary still
says why its tests failed (``python -m pytest -p failures_now``, ``scripts`` on the path).

With ``$TIRX_TEST_TIMEOUT`` (seconds), a test still running after that long is logged as
``<test id> (timeout): ...`` and the process exits with status 124: a hung kernel blocks
every later test of the process anyway, and exiting frees the rest of the device call. A
faulthandler watchdog, which needs no interpreter lock, dumps the stacks and exits too should
the process be stuck inside a C call that holds it.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading

import pytest

_EXIT_TIMEOUT = 124  # as `timeout` reports it
_STACKS_GRACE_S = 10


def _log(line: str) -> None:
    path = os.environ.get("TIRX_FAILURES_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def pytest_runtest_logreport(report):
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        why = (crash.message if crash else str(report.longrepr)).strip().splitlines()
        _log(f"{report.nodeid} ({report.when}): {why[0] if why else '?'}")


def _give_up(nodeid: str, seconds: float) -> None:
    _log(f"{nodeid} (timeout): still running after {seconds:g} s; the process exits")
    os._exit(_EXIT_TIMEOUT)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    seconds = float(os.environ.get("TIRX_TEST_TIMEOUT") or 0)
    if seconds <= 0:
        yield
        return
    timer = threading.Timer(seconds, _give_up, (item.nodeid, seconds))
    timer.daemon = True
    timer.start()
    path = os.environ.get("TIRX_FAILURES_LOG")
    stacks = open(path, "a") if path else None  # noqa: SIM115 - open until the test ends
    faulthandler.dump_traceback_later(
        seconds + _STACKS_GRACE_S, exit=True, file=stacks or sys.stderr
    )
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        timer.cancel()
        if stacks:
            stacks.close()
