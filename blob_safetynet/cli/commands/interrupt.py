"""SIGINT and SIGTERM ask a long run to stop between chunks instead of killing it mid-chunk.

A KeyboardInterrupt raised inside a chunk would leave its rows claimed until the claim TTL
and print a traceback. Inside `stop_signals()` the two signals only set a flag, which
the run reads before each chunk; the command then reports what finished and exits 130
(SIGINT) or 143 (SIGTERM), 128 plus the signal's number as shells report it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from blob_safetynet.cli.exitcodes import ExitCode

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}


class StopSignals:
    """The first stop signal received: pass `requested` to the run, then exit `exit_code`."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None

    def requested(self) -> str | None:
        """The name of the first signal received (`SIGINT`), None while none was."""
        return None if self.received is None else self.received.name

    @property
    def exit_code(self) -> ExitCode:
        assert self.received is not None
        return EXIT_CODES[self.received]

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)


@contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """SIGINT and SIGTERM set the flag of the `StopSignals` yielded, while the block runs.

    Handlers can only be installed from the main thread; called from another (an embedding
    caller's), the signals keep their default behaviour.
    """
    stop = StopSignals()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {number: signal.signal(number, stop.handle) for number in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
