# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A pytest plugin for device runs: each failure's test id and first error line, appended to
``$TIRX_FAILURES_LOG`` as it happens, so a run a timeout kills before pytest's summary still
says why its tests failed (``python -m pytest -p failures_now``, ``scripts`` on the path)."""

from __future__ import annotations

import os


def pytest_runtest_logreport(report):
    path = os.environ.get("TIRX_FAILURES_LOG")
    if path and report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        why = (crash.message if crash else str(report.longrepr)).strip().splitlines()
        with open(path, "a") as f:
            f.write(f"{report.nodeid} ({report.when}): {why[0] if why else '?'}\n")
