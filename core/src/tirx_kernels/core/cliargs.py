# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Command-line parsing shared by ``tirx-run`` and ``tirx-suite``.

Number types refuse NaN and infinity while parsing: NaN compares false with everything, so
a plain ``x <= 0`` check lets ``--timeout nan`` (never expires) or ``--threshold nan`` (the
regression gate never fires) through. Parse errors are one line naming the argument, the
problem and where the fix is documented (``--help``), exit 2. Output folders are checked
(and created) before a run starts, never found unwritable halfway through it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), exit 2."""

    def error(self, message: str):
        print(f"{self.prog}: error: {message}; see `{self.prog} --help`", file=sys.stderr)
        sys.exit(2)


def report_internal_error(say: Callable[[str], None], e: BaseException) -> None:
    """``say`` the one line a bug prints instead of a traceback; with TIRX_KERNELS_DEBUG=1
    the traceback follows on stderr."""
    say(
        f"internal error: {type(e).__name__}: {e}; fix: report it with the traceback "
        "that TIRX_KERNELS_DEBUG=1 prints"
    )
    if os.environ.get("TIRX_KERNELS_DEBUG"):
        traceback.print_exc()


def add_config_option(parser, help: str, **kwargs) -> None:
    """``--config LABEL`` (repeatable) into ``configs``: the config labels to select."""
    parser.add_argument(
        "--config", action="append", dest="configs", metavar="LABEL", help=help, **kwargs
    )


def _number(text: str, convert, what: str, ok):
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    return _number(text, float, "a finite number > 0", lambda v: v > 0)


def non_negative_float(text: str) -> float:
    return _number(text, float, "a finite number >= 0", lambda v: v >= 0)


def positive_int(text: str) -> int:
    return _number(text, int, "an integer >= 1", lambda v: v >= 1)


def non_negative_int(text: str) -> int:
    return _number(text, int, "an integer >= 0", lambda v: v >= 0)


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` cannot take output (it is created when missing); None when it can."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        return e.strerror or type(e).__name__
    return None
