"""`safetynet audit --stream FILE`, the progress line of a fleet audit, and its reports written
a block at a time.

Each account's verdicts are written as JSON Lines the moment it is judged (one object per
finding, one per read error of that account), flushed, scrubbed like every report; the scope's
own read errors follow at the end. They are the verdicts as judged: suppressions and the
baseline are applied in the end-of-run reports. On a terminal, stderr shows one line that is
rewritten in place: accounts judged, the rate, and the throttled waits so far; when stderr is
not a terminal nothing is printed.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from blob_safetynet.cli.commands.outputs import Output, say_cannot_write
from blob_safetynet.policies.reports.formats import WRITERS, AuditWriter
from blob_safetynet.policies.reports.sarif import iter_sarif
from blob_safetynet.policies.reports.stream import SpooledReport
from blob_safetynet.policies.reports.view import ReportContext
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, ReadError
from blob_safetynet.policies.sources.throttle import SharedThrottle
from blob_safetynet.settings import atomicfile
from blob_safetynet.settings.redaction import Redactor

PROGRESS_EVERY_S = 0.5
BLOCK_CHARS = 1 << 16
"""About how much text is scrubbed and written at once."""


def _error(error: ReadError) -> dict[str, Any]:
    return {
        "type": "error",
        "account": error.account,
        "operation": error.operation,
        "kind": error.kind.value,
        "message": error.message,
    }


class Stream:
    """The JSON Lines file (optional) and the terminal progress line of one audit."""

    def __init__(
        self,
        path: Path | None,
        redactor: Redactor,
        throttle: SharedThrottle,
        terminal: IO[str] | None = None,
    ) -> None:
        self._path = path
        self._redactor = redactor
        self._throttle = throttle
        err = terminal or sys.stderr
        self._terminal = err if err.isatty() else None
        self._file: IO[str] | None = None
        self.failure: OSError | None = None
        """Why the JSON Lines file could not be written (a full disk, EFBIG): the audit goes on
        without it, and the run ends as an output error naming it (`failed_streams`)."""
        self._judged = 0
        self._started = time.monotonic()
        self._shown = 0.0

    @property
    def path(self) -> Path | None:
        return self._path

    def __enter__(self) -> Stream:
        if self._path is not None:
            try:
                self._file = io.TextIOWrapper(atomicfile.create(self._path), encoding="utf-8")
            except OSError as error:
                self.failure = error
        self._started = time.monotonic()
        return self

    def __exit__(self, *_: object) -> None:
        if self._terminal is not None and self._judged:
            self._progress(force=True)
            self._terminal.write("\n")
        self._close()

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.close()
        except OSError as error:
            self.failure = self.failure or error

    def result(self, result: AccountResult) -> None:
        """One account judged: its lines written and flushed, the progress line refreshed."""
        self._judged += 1
        if self._file is not None:
            lines = [
                {
                    "type": "finding",
                    "rule": f.rule.id,
                    "account": f.account,
                    "resource_id": f.resource_id,
                    "outcome": f.outcome.value,
                    "severity": f.severity.value,
                    "message": f.message,
                }
                for f in result.findings
            ]
            lines.extend(_error(e) for e in result.errors)
            self._write(lines)
        self._progress()

    def finish(self, report: AuditReport) -> None:
        """The scope's own read errors (a subscription or group not read), at the end."""
        if self._file is not None:
            self._write([_error(e) for e in report.errors])

    def _write(self, lines: list[dict[str, Any]]) -> None:
        assert self._file is not None
        text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
        try:
            self._file.write(self._redactor.scrub(text))
            self._file.flush()
        except OSError as error:
            self.failure = error
            with contextlib.suppress(OSError):
                self._close()

    def _progress(self, *, force: bool = False) -> None:
        if self._terminal is None:
            return
        now = time.monotonic()
        if not force and now - self._shown < PROGRESS_EVERY_S:
            return
        self._shown = now
        rate = self._judged / max(now - self._started, 1e-9)
        self._terminal.write(
            f"\rsafetynet audit: {self._judged} accounts judged, {rate:.0f}/s, "
            f"{self._throttle.throttled} throttled, {self._throttle.waits} waits"
        )
        self._terminal.flush()


def failed_streams(streams: Sequence[Stream], command: str) -> bool:
    """Whether a --stream file could not be written; each such file named on stderr, why."""
    failed = False
    for stream in streams:
        if stream.failure is not None and stream.path is not None:
            say_cannot_write(command, stream.path, stream.failure, "--stream")
            failed = True
    return failed


def scrubbed(chunks: Iterable[str], redactor: Redactor) -> Iterator[str]:
    """`chunks` scrubbed in blocks of whole lines of about `BLOCK_CHARS`: a secret the redactor
    knows lies within one line of every format (each escapes line breaks in what it quotes)."""
    pending: list[str] = []
    size = 0
    for chunk in chunks:
        pending.append(chunk)
        size += len(chunk)
        if size < BLOCK_CHARS:
            continue
        text = "".join(pending)
        cut = text.rfind("\n") + 1
        if cut:
            yield redactor.scrub(text[:cut])
        pending, size = [text[cut:]], len(text) - cut
    if pending:
        yield redactor.scrub("".join(pending))


def write_streamed(
    outputs: Sequence[Output],
    chunks_of: Callable[[str], Iterable[str]],
    redactor: Redactor,
    command: str,
) -> bool:
    """Each output's chunks (`chunks_of(format)`), scrubbed, to standard output or to a
    temporary file beside its path that replaces it once complete (`atomicfile.replacing`;
    an exception or a signal removes it); False, with the reason on stderr, when a file could
    not be written."""
    written = True
    for output in outputs:
        blocks = scrubbed(chunks_of(output.format), redactor)
        if output.path is None:
            for block in blocks:
                sys.stdout.write(block)
            sys.stdout.flush()
            continue
        try:
            with atomicfile.replacing(output.path) as stream:
                for block in blocks:
                    stream.write(block.encode("utf-8"))
        except OSError as error:
            say_cannot_write(command, output.path, error)
            written = False
    return written


def write_spooled(
    outputs: Sequence[Output],
    report: SpooledReport,
    context: ReportContext,
    category: str | None,
    redactor: Redactor,
) -> bool:
    """Every output of a fleet audit, each written from the spool by `report.WRITERS`."""
    writers: dict[str, AuditWriter] = {
        **WRITERS,
        "sarif": functools.partial(iter_sarif, category=category),
    }
    return write_streamed(outputs, lambda name: writers[name](report, context), redactor, "audit")
