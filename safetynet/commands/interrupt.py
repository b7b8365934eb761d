"""SIGINT and SIGTERM ask a long run to stop between chunks instead of killing it mid-chunk.

A KeyboardInterrupt raised inside a chunk would leave its rows claimed until the claim TTL
and print a traceback. While `StopSignals` is active the two signals only set a flag, which
the run reads before each chunk; the command then reports what finished and exits 130
(SIGINT) or 143 (SIGTERM), 128 plus the signal's number as shells report it.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

from safetynet.exitcodes import ExitCode

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}


class StopSignals:
    """`with StopSignals() as stop:` pass `stop.requested` to the run, then `stop.exit_code`."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def requested(self) -> str | None:
        """The name of the first signal received (`SIGINT`), None while none was."""
        return None if self.received is None else self.received.name

    @property
    def exit_code(self) -> ExitCode:
        assert self.received is not None
        return EXIT_CODES[self.received]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)

    def __enter__(self) -> StopSignals:
        # Handlers can only be installed from the main thread (an embedding caller's thread
        # keeps the default behaviour).
        if threading.current_thread() is threading.main_thread():
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)  # type: ignore[arg-type]
