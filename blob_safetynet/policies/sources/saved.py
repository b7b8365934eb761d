"""One saved file of ARM JSON as the offline audit reads it: bounded, decoded as the Azure CLI
or PowerShell wrote it, read as ARM reads JSON (`arm_json`), with what a report says of it kept
beside the document: the SHA-256 of the bytes read, and the line each object starts on, so a
finding can point at the resource in the committed file (SARIF's physical location).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from blob_safetynet.policies.adapters.arm_json import ArmObject, SpellingError
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.redaction import printable

MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""A whole subscription's template export is a few MB; anything larger is not an export."""
MAX_DEPTH: Final = 64
"""ARM nests child resources at most five levels deep (child-resource-name-type), each level
a few objects; a lifecycle rule's filters are eight levels into its resource."""


class SavedFileError(ValueError):
    """The file cannot be read as JSON; the message names it."""


@dataclass
class Saved:
    """A file's JSON, the file as read, and where each of its objects starts."""

    document: object
    file: untrusted.InputFile
    objects: list[tuple[Any, int]] = field(default_factory=list)
    """Each object of `document` and the offset of its `{` (the list keeps them alive, so
    their ids stay theirs)."""
    breaks: list[int] = field(default_factory=list)
    """The offset of each line feed of the text."""

    def __post_init__(self) -> None:
        self._offsets = {id(item): offset for item, offset in self.objects}

    def line_of(self, item: object) -> int | None:
        """The 1-based line `item` (an object of this document) starts on; None for anything
        else (an object built after reading)."""
        offset = self._offsets.get(id(item))
        return None if offset is None else bisect.bisect_right(self.breaks, offset) + 1


def load(path: Path) -> Saved:
    """The JSON in `path` (`-`: standard input), read as ARM reads it (`arm_json`): at most
    MAX_FILE_BYTES and MAX_DEPTH levels, UTF-8 (a BOM allowed) or UTF-16 with a BOM (what
    PowerShell's `>` writes)."""
    shown = printable(str(path))
    try:
        data = untrusted.read_input(path, shown, max_bytes=MAX_FILE_BYTES)
    except untrusted.UntrustedInputError as error:
        raise SavedFileError(str(error)) from None
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        raise SavedFileError(f"{shown}: not UTF-8 or UTF-16 text") from None
    objects: list[tuple[Any, int]] = []
    try:
        document = untrusted.load_json(
            text,
            shown,
            max_bytes=MAX_FILE_BYTES,
            max_depth=MAX_DEPTH,
            pairs=ArmObject,
            located=objects,
        )
    except untrusted.UntrustedInputError as error:
        raise SavedFileError(str(error)) from None
    except SpellingError as error:
        raise SavedFileError(f"{shown}: {error}") from None
    breaks = _line_feeds(text)
    file = untrusted.InputFile.of("--from-file", str(path), data)
    return Saved(document, file, objects, breaks)


def _line_feeds(text: str) -> list[int]:
    found, at = [], text.find("\n")
    while at >= 0:
        found.append(at)
        at = text.find("\n", at + 1)
    return found
