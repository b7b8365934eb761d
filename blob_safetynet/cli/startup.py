"""SIGINT and SIGTERM from the console script's first instruction: exit 130 or 143, one line.

The console script imports `blob_safetynet.cli.main`, whose module imports nothing but this
and the standard library, and `main` enters `stopped_cleanly()` before it imports anything
else: the command's modules (SQLAlchemy, the Azure SDK) load inside it. A signal there, or in a
command that installs no handlers of its own, ends the run with `safetynet: stopped by SIGINT`
and 128 plus the signal's number, never a `KeyboardInterrupt` traceback or a raw -15. Commands
that stop between chunks (`interrupt.stop_signals`) put their handlers in front of these while
they run. Before `main` and after it returns (the atexit handlers, the last flush) the console
script's `stop_at_once` ends the process at once with the same line and code. What the
interpreter does before the script's first line is not the script's to change: there SIGINT
and SIGTERM keep Python's own behaviour.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""ExitCode.INTERRUPTED and ExitCode.TERMINATED (exitcodes.py, not imported here: too late)."""


class Terminated(BaseException):
    """SIGTERM, raised where the main thread is, as Python raises KeyboardInterrupt for SIGINT."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def received_signal(stop: KeyboardInterrupt | Terminated) -> signal.Signals:
    """The signal a stop exception stands for: SIGINT for KeyboardInterrupt, else SIGTERM."""
    return signal.SIGINT if isinstance(stop, KeyboardInterrupt) else signal.SIGTERM


class Outcome:
    """The exit code a stop signal decided, None while none arrived."""

    code: int | None = None


@contextmanager
def stopped_cleanly() -> Iterator[Outcome]:
    """Run the block; a SIGINT or SIGTERM in it sets the outcome's code to 130 or 143 after one
    line on stderr (a second signal meanwhile is ignored). Outside the main thread (an
    embedding caller's) nothing is installed."""
    outcome = Outcome()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
            signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate),
        }
    try:
        yield outcome
    except (KeyboardInterrupt, Terminated) as stop:
        for number in previous:
            signal.signal(number, signal.SIG_IGN)
        received = received_signal(stop)
        print(f"safetynet: stopped by {received.name}", file=sys.stderr)
        outcome.code = EXIT_CODES[received]
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def stop_at_once() -> None:
    """SIGINT and SIGTERM end the process at once, after one line: `stopped by SIG...`, exit
    130 or 143. The console script installs this first: `stopped_cleanly` puts it back when
    `main` returns, so it holds for the atexit handlers, the last flush and the normal exit's
    wait for threads, where Python's own behaviour is a KeyboardInterrupt traceback
    ("Exception ignored in atexit callback") or a raw -15."""
    if threading.current_thread() is threading.main_thread():
        for number in EXIT_CODES:
            signal.signal(number, _stop_now)


def ignore_stop_signals() -> None:
    """After a run a signal stopped: a second signal is ignored, as during the run."""
    for number in EXIT_CODES:
        signal.signal(number, signal.SIG_IGN)


def _stop_now(signum: int, frame: FrameType | None) -> NoReturn:
    ignore_stop_signals()
    received = signal.Signals(signum)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"safetynet: stopped by {received.name}\n")
        sys.stderr.flush()
    os._exit(EXIT_CODES[received])
