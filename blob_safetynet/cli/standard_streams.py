"""Standard output that cannot be written ends the run one way: one line on stderr, exit 5.

The reader of a pipe that leaves (`safetynet ... | head -1`), a stdout closed before the start
(`>&-`), a full disk behind a redirection: whichever write meets it, the command's own exit
code and a silently cut output are never what the caller sees. `StandardOutput` is the run's
stdout: every write reaches the descriptor whole or raises, the first failure is kept (also
when a command catches it) and the descriptor is pointed at os.devnull so no later flush fails
again. `console_main` and `main` read that failure and say it once (`say_unwritable`).

Standard library only: `blob_safetynet.cli.main` imports it before the command's modules.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import TextIO, cast


def closed() -> OSError:
    """What a write meets when the process started with descriptor 1 closed (`>&-`): Python
    then sets sys.stdout to None (https://docs.python.org/3/library/sys.html#sys.__stdout__)."""
    return OSError(errno.EBADF, "standard output is closed")


def internal_error(error: BaseException) -> str:
    """The line an error no command handled ends the run with (exit 5)."""
    return f"internal error, please report it: {type(error).__name__}: {error}"


class StandardOutput:
    """A run's sys.stdout, under the `ScrubbingStream`: writes reach `stream` whole or raise.

    An unbuffered stream (`python -u`, PYTHONUNBUFFERED) is a TextIOWrapper straight over the
    raw FileIO, which keeps no count of a partial write: of 580,883 bytes written into a pipe
    whose reader left, 65,536 arrived and the rest was dropped without an error
    (https://github.com/python/cpython/issues/85393). Such a stream is written here with
    `os.write` until every byte is out; a buffered one already retries (BufferedWriter)."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self._descriptor = _unbuffered_descriptor(stream)
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.failure is not None:
            raise self.failure
        try:
            if self._stream is None:
                raise closed()
            if self._descriptor is None:
                self._stream.write(text)
            else:
                self._write_whole(self._descriptor, text)
        except OSError as error:
            self._failed(error)
            raise
        return len(text)

    def flush(self) -> None:
        if self.failure is not None or self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as error:
            self._failed(error)
            raise

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def _write_whole(self, descriptor: int, text: str) -> None:
        assert self._stream is not None
        if os.linesep != "\n":
            text = text.replace("\n", os.linesep)
        data = memoryview(text.encode(self.encoding, self._stream.errors or "strict"))
        while data:
            data = data[os.write(descriptor, data) :]

    def _failed(self, error: OSError) -> None:
        self.failure = self.failure or error
        silence(self._stream)


def _unbuffered_descriptor(stream: TextIO | None) -> int | None:
    """The descriptor of a text stream written straight through to a FileIO, else None."""
    if stream is None or not isinstance(getattr(stream, "buffer", None), io.FileIO):
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError):
        return None


def silence(stream: TextIO | None) -> None:
    """Point `stream`'s descriptor at os.devnull, so what is still buffered for it is dropped
    without another error (as the note on SIGPIPE advises:
    https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, cast(TextIO, stream).fileno())
        finally:
            os.close(devnull)


def flush_standard_streams() -> OSError | None:
    """Flush the process's stdout and stderr; the first error, if any. A stream that cannot be
    flushed is silenced, so no later flush fails again."""
    failure = None
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except OSError as error:
            failure = failure or error
            silence(stream)
    return failure


def say_unwritable(error: OSError) -> None:
    """The one line of a run whose stdout could not be written, on stderr if it can be."""
    flush_standard_streams()
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(f"safetynet: {_printable(internal_error(error))}", file=sys.stderr, flush=True)
    flush_standard_streams()


def _printable(text: str) -> str:
    from blob_safetynet.settings.redaction import printable

    return printable(text)
