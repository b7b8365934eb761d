"""The one reader of JSON and timestamps that came from outside the process.

Plan files, heartbeat blobs, lease metadata, Pulumi config values: whoever can write them can
make `json.loads` recurse until RecursionError (a document nested 200,000 levels is 400 kB) or
hand over a time without a UTC offset, which cannot be compared with an aware clock (TypeError).
`load_json` refuses documents over a size limit or nested deeper than `MAX_DEPTH` before
parsing, `read_input` reads an input file (`-`: standard input) no further than its bound and
refuses anything but a regular file before reading it, and `utc_time` refuses naive times; all
raise `UntrustedInputError` (a ValueError) whose message names what was read, never its
content.

Standard library only: it is in the bottom layer (tests/test_boundaries.py).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import json.decoder
import json.scanner
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

STDIN = "-"
"""The file name that means standard input, wherever a command reads a file."""

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects any document the toolkit reads has (plans: 3)."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


@dataclass(frozen=True)
class InputFile:
    """What one input file was, for a report to name: the option that read it, its name as
    given (`-`: standard input), the SHA-256 and size of the bytes read, and, where the file
    itself says so, when what it holds was captured."""

    option: str
    name: str
    sha256: str
    size: int
    captured: datetime | None = None

    @classmethod
    def of(cls, option: str, name: str, data: bytes, captured: datetime | None = None) -> InputFile:
        return cls(option, name, hashlib.sha256(data).hexdigest(), len(data), captured)


class UntrustedInputError(ValueError):
    """A document or value from outside is too big, too deep or malformed; the message names
    it (`what`) and the reason, never its content."""


def nesting_depth(text: str) -> int:
    """How deeply the arrays and objects of a JSON text nest (brackets inside strings ignored)."""
    steps = (_STEP[m.group()] for m in _BRACKET.finditer(_STRING.sub("", text)))
    return max(itertools.accumulate(steps, initial=0))


def load_json(
    data: str | bytes,
    what: str,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    pairs: Callable[[list[tuple[str, Any]]], Any] | None = None,
    located: list[tuple[Any, int]] | None = None,
) -> Any:
    """The JSON value of `data`, refused when larger than `max_bytes`, nested deeper than
    `max_depth`, or not JSON (text that is not UTF-8 included). `pairs` builds each object
    from its (key, value) pairs (`json.loads`'s object_pairs_hook); what it raises passes.
    `located`, when given, receives each object built and the offset of its `{` in the text."""
    if len(data) > max_bytes:
        raise UntrustedInputError(f"{what} is larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise UntrustedInputError(f"{what} is not UTF-8 text") from None
    if nesting_depth(text) > max_depth:
        raise UntrustedInputError(f"{what} nests deeper than {max_depth} levels")
    try:
        if located is None:
            return json.loads(text, object_pairs_hook=pairs)
        return _locating_decoder(pairs, located).decode(text)
    except RecursionError:
        raise UntrustedInputError(f"{what} nests too deeply") from None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise UntrustedInputError(f"{what} is not valid JSON ({where})") from None
    except ValueError as error:
        if type(error) is not ValueError:  # raised by `pairs`: its own words
            raise
        # an integer longer than sys.get_int_max_str_digits()
        raise UntrustedInputError(f"{what} holds a number too long to read") from None


def _locating_decoder(
    pairs: Callable[[list[tuple[str, Any]]], Any] | None, located: list[tuple[Any, int]]
) -> json.JSONDecoder:
    """A decoder that records where each object starts. The C scanner builds objects without a
    hook that sees positions, so this one runs the standard library's own Python scanner
    (`json.scanner.py_make_scanner`) with its object parser wrapped; it reads the same JSON,
    about twice as slowly (11 MB in 1.8 s against 1.0 s here)."""
    decoder = json.JSONDecoder(object_pairs_hook=pairs)

    def parse_object(s_and_end: tuple[str, int], strict: bool, *rest: Any) -> tuple[Any, int]:
        value, end = json.decoder.JSONObject(s_and_end, strict, *rest)  # type: ignore[attr-defined]
        located.append((value, s_and_end[1] - 1))
        return value, end

    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


def read_input(
    path: str | os.PathLike[str], what: str, *, max_bytes: int, stdin: BinaryIO | None = None
) -> bytes:
    """The bytes of an input file, at most `max_bytes` (no more than one byte beyond them is
    read). `-` is standard input. Anything but a regular file (a FIFO, a directory, a device)
    is refused before a byte is read: it is opened without blocking and checked with fstat,
    so a FIFO nobody writes cannot hang the command and /dev/zero cannot fill memory."""
    if os.fspath(path) == STDIN:
        try:
            data = (stdin if stdin is not None else sys.stdin.buffer).read(max_bytes + 1)
        except (OSError, AttributeError, ValueError):  # closed, absent or captured stdin
            raise UntrustedInputError(f"{what}: cannot read standard input") from None
        return _bounded(data, what, max_bytes)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise UntrustedInputError(f"{what}: cannot read it: {_reason(error)}") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise UntrustedInputError(
            f"{what}: not a regular file (a {_file_kind(mode)}); pass a file, or - for "
            "standard input"
        )
    with os.fdopen(descriptor, "rb") as stream:
        try:
            data = stream.read(max_bytes + 1)
        except OSError as error:
            raise UntrustedInputError(f"{what}: cannot read it: {_reason(error)}") from None
    return _bounded(data, what, max_bytes)


def _bounded(data: bytes, what: str, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise UntrustedInputError(f"{what} is larger than {max_bytes} bytes")
    return data


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "directory",
        stat.S_ISFIFO: "FIFO",
        stat.S_ISCHR: "character device",
        stat.S_ISBLK: "block device",
        stat.S_ISSOCK: "socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "special file")


def read_json_file(
    path: str | os.PathLike[str], what: str, *, max_bytes: int, max_depth: int = MAX_DEPTH
) -> Any:
    """`load_json` of an input file's bytes (`read_input`: `-` is standard input)."""
    data = read_input(path, what, max_bytes=max_bytes)
    return load_json(data, what, max_bytes=max_bytes, max_depth=max_depth)


def utc_time(value: object, what: str) -> datetime:
    """The aware time an ISO 8601 text names, refused when it is no text, malformed, or has no
    UTC offset (a naive time means nothing across machines)."""
    if not isinstance(value, str):
        raise UntrustedInputError(f"{what} is not a time")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise UntrustedInputError(f"{what} is not an ISO 8601 time") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UntrustedInputError(f"{what} has no UTC offset (write it as ...+00:00)")
    return moment.astimezone(UTC)
