# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""Stop signals of a run that owns child processes: SIGINT, SIGTERM and SIGHUP.

Inside ``StopSignals`` a stop signal only records itself; the run loop calls ``check()`` at
a safe point, which raises KeyboardInterrupt once. So a signal never lands between starting
a child and recording it (an orphan), and a second Ctrl-C a few ms after the first cannot
cut short the cleanup (kill and reap every child) or the output of what finished; after
a stop, later ones are ignored until the process exits.
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    def __init__(self):
        self.received: list[int] = []
        self._raised = False
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._record)
            except ValueError:  # not the main thread: signals stay as they are
                break
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            # after a stop the process is on its way out: a late repeat must not turn the
            # exit into a traceback
            signal.signal(sig, signal.SIG_IGN if self.received else handler)

    def _record(self, signum, frame) -> None:
        self.received.append(signum)

    def check(self) -> None:
        """Raise KeyboardInterrupt, once, after the first stop signal."""
        if self.received and not self._raised:
            self._raised = True
            raise KeyboardInterrupt(signal.Signals(self.received[0]).name)


def raise_interrupt(signum, frame):
    """A handler making SIGTERM and SIGHUP act as Ctrl-C outside a run loop."""
    raise KeyboardInterrupt(signal.Signals(signum).name)
