"""`--output [FORMAT=]PATH`, repeatable: one run, several report files, all checked first.

`--output sarif=audit.sarif --output junit=audit.xml` writes both from one audit; a bare
`--output PATH` takes `--format`'s format (the old form keeps working). Every path is checked
(its folder exists and is writable, it is no folder, no two outputs are the same file, none is
one of the command's inputs) before the command reads or acts on anything, and each file is
written atomically through `blob_safetynet.settings.atomicfile`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from blob_safetynet.cli.commands.common import UsageError
from blob_safetynet.settings import atomicfile
from blob_safetynet.settings.redaction import Redactor, printable


@dataclass(frozen=True)
class Output:
    format: str
    path: Path | None
    """None: standard output."""


def add_output_options(
    parser: argparse.ArgumentParser, formats: Collection[str], run: str
) -> argparse._ArgumentGroup:
    """The `output` group: `--format` and the repeatable `--output [FORMAT=]PATH`."""
    out = parser.add_argument_group("output")
    out.add_argument(
        "--format",
        choices=sorted(formats),
        default="table",
        help="format of standard output and of each bare --output PATH (default table)",
    )
    out.add_argument(
        "--output",
        action="append",
        metavar="[FORMAT=]PATH",
        help=f"write a report file instead of stdout; repeatable, one {run} for all: FORMAT "
        f"is one of {', '.join(sorted(formats))} (default --format)",
    )
    return out


MAX_CATEGORY = 200


def add_sarif_category(group: argparse._ArgumentGroup, default: str) -> None:
    """`--sarif-category NAME`: the code scanning category the SARIF file names itself."""
    group.add_argument(
        "--sarif-category",
        metavar="NAME",
        help="the code scanning category of the SARIF report (its automationDetails.id, with "
        "the trailing / GitHub splits at); upload-sarif's `category` input cannot override an "
        f"id the file holds (default {default})",
    )


def sarif_category(value: str | None) -> str | None:
    """The --sarif-category asked for, or UsageError when it is blank, too long or holds a
    character that is not printable."""
    if value is None:
        return None
    if not value.strip("/ ") or len(value) > MAX_CATEGORY or printable(value) != value:
        raise UsageError(
            f"--sarif-category '{printable(value)}' must be 1-{MAX_CATEGORY} printable "
            "characters, not only slashes or spaces"
        )
    return value


def parse_outputs(
    specs: Sequence[str] | None, default_format: str, formats: Collection[str]
) -> list[Output]:
    """The outputs asked for: stdout in `default_format` when none; UsageError when a format is
    unknown or two outputs are the same file."""
    if not specs:
        return [Output(default_format, None)]
    outputs = [_parse_one(spec, default_format, formats) for spec in specs]
    seen: list[Path] = []
    for output in outputs:
        if output.path is None:
            continue
        if any(os.path.abspath(output.path) == os.path.abspath(p) for p in seen):
            raise UsageError(f"--output '{printable(str(output.path))}' is given twice")
        seen.append(output.path)
    return outputs


def _parse_one(spec: str, default_format: str, formats: Collection[str]) -> Output:
    name, sep, rest = spec.partition("=")
    if sep and name in formats:
        fmt, path = name, rest
    elif sep and name.isalpha() and name.islower():
        known = ", ".join(sorted(formats))
        raise UsageError(
            f"--output {printable(name)}=...: unknown format (one of {known}; for a file "
            "whose name holds '=', write ./ before it)"
        )
    else:
        fmt, path = default_format, spec
    if not path.strip():
        raise UsageError(f"--output '{printable(spec)}' names no file")
    return Output(fmt, Path(path))


def check_outputs(outputs: Sequence[Output], inputs: Sequence[Path | str | None] = ()) -> None:
    """UsageError, before any work, for an output that could not be written or is an input."""
    for output in outputs:
        if output.path is None:
            continue
        try:
            atomicfile.check_output_path(output.path)
            atomicfile.refuse_same(output.path, *inputs)
        except atomicfile.OutputPathError as error:
            raise UsageError(f"--output: {error}") from None


def say_cannot_write(command: str, path: Path, error: OSError, option: str = "--output") -> None:
    """One line on stderr naming the output file that could not be written, and why."""
    reason = error.strerror or type(error).__name__
    print(
        f"safetynet {command}: cannot write {option} '{printable(str(path))}': {reason}",
        file=sys.stderr,
    )


def write_outputs(
    outputs: Sequence[Output], texts: Mapping[str, str], redactor: Redactor, command: str
) -> bool:
    """Each output's text, scrubbed, to its file (atomically) or stdout; False, with the reason
    on stderr, when a file could not be written."""
    written = True
    for output in outputs:
        text = redactor.scrub(texts[output.format])
        if output.path is None:
            sys.stdout.write(text)
            continue
        try:
            atomicfile.write_text(output.path, text)
        except OSError as error:
            say_cannot_write(command, output.path, error)
            written = False
    return written
