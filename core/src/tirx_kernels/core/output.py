# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A command's output when its reader may be gone.

stdout closed early (``| head -1``, a consumer that exited) fails the first write or the
final flush with BrokenPipeError; a terminal that hung up fails with EIO. The results of a
run must not be lost then: they go to a file and one line on stderr says where. Progress
lines on stderr are informational: a failing write never stops a run or its cleanup.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


class StdoutClosed(Exception):
    """stdout went away before the output was complete.

    ``saved`` names the file holding the results (None: nothing to save, or saving failed);
    ``code`` is the exit code the command had reached (0: none yet).
    """

    def __init__(self, saved: Path | None = None, code: int = 0):
        super().__init__("stdout was closed")
        self.saved, self.code = saved, code


def note(text: str) -> None:
    """A line on stderr; a closed or hung-up stderr is ignored."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def emit(
    text: str,
    *,
    results: dict | None = None,
    saved: Path | None = None,
    code: int = 0,
    prog: str = "tirx",
) -> None:
    """Print ``text`` on stdout; if stdout is gone, save ``results`` (or point at ``saved``)
    and raise StdoutClosed."""
    try:
        print(text)
        sys.stdout.flush()
    except OSError:
        if results is not None:
            saved = _save(results, prog)
        raise StdoutClosed(saved, code) from None


def flush_stdout() -> None:
    """Flush now, so a closed stdout is StdoutClosed here rather than a traceback at exit."""
    try:
        sys.stdout.flush()
    except OSError:
        raise StdoutClosed() from None


def stdout_closed_line(prog: str, e: StdoutClosed) -> str:
    """The one-line report of a closed stdout; also stops the exit's flush from failing."""
    try:  # what is still buffered goes nowhere instead of failing at interpreter exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    where = f"; the results are saved in {e.saved}" if e.saved else ""
    return (
        f"{prog}: error: stdout was closed before the output was complete (broken "
        f"pipe){where}; fix: let the reader take all of it, or redirect it to a file"
    )


def _save(results: dict, prog: str) -> Path | None:
    try:
        fd, path = tempfile.mkstemp(prefix=f"{prog}-results-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        return Path(path)
    except OSError:
        return None
