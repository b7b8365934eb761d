"""The options every command takes, wherever they stand on the command line: `--version`,
`-q`/`--quiet`, `-v`/`--verbose` and `--log-format`.

Their meaning (docs/cli.md, "Options every command takes"):

- default: warnings and errors on stderr; a long command (sweep, reconcile, adopt) also logs
  its progress as INFO records when stderr is not a terminal.
- `-q`: errors only on stderr, no progress (neither records nor the terminal's progress line);
  stdout, the command's result, is unchanged.
- `-v`: safetynet's INFO records (progress) also on a terminal; `-vv` adds its DEBUG records
  and the Azure SDK's INFO records (one per HTTP request, headers redacted by the SDK and
  scrubbed here).
- `--log-format json|text`: one JSON object per record, or plain lines; default JSON when
  stderr is not a terminal, text on one.

safetynet writes no colour or other terminal escape sequence, so `NO_COLOR`
(https://no-color.org) holds whatever it is set to.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from blob_safetynet import package_version
from blob_safetynet.cli.commands.common import CLI_HANDLER, JsonLogFormatter, UsageError

LOG_FORMATS = ("json", "text")
AZURE_LOGGER = "azure"


class _Version(argparse.Action):
    """Prints the package's and the rule set's versions; imports the rules only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_text())
        parser.exit()


def version_text() -> str:
    """`safetynet <version>` and the rule set it judges with."""
    from blob_safetynet.policies.rules import RULES, ruleset_version

    return (
        f"safetynet {package_version()}\n"
        f"rule set {ruleset_version()} ({len(RULES)} rules; the fingerprint changes whenever a "
        "rule, its severity or scope, or a default threshold changes)"
    )


def add_common_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The shared options on `parser`; below the top level their defaults are SUPPRESS, so a
    subcommand's parser never overwrites what was given before the subcommand."""
    default = (lambda value: value) if top else (lambda _: argparse.SUPPRESS)
    group = parser.add_argument_group("options every command takes")
    if top:
        group.add_argument(
            "--version", action=_Version, help="print the package's and the rule set's versions"
        )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default(False),
        help="errors only on stderr, no progress; stdout unchanged",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="progress records also on a terminal; -vv adds debug records and the Azure "
        "SDK's request log",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default(None),
        help="log records as JSON lines or text (default: JSON when stderr is not a terminal)",
    )


def first_word(arguments: Sequence[str]) -> str:
    """The first word that is neither a shared option nor its value: the command's name."""
    words = iter(arguments)
    for word in words:
        if word == "--log-format":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def add_to_every_command(parser: argparse.ArgumentParser) -> None:
    """The shared options on every parser below `parser` (subcommands and their actions)."""
    for sub in _subparsers(parser):
        add_common_options(sub, top=False)
        add_to_every_command(sub)


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from dict.fromkeys(action.choices.values())


@contextmanager
def applied(args: argparse.Namespace) -> Iterator[None]:
    """The log levels and format the options ask for, on the handler `main` installed, for the
    length of the command; the loggers' levels are restored after."""
    if args.quiet and args.verbose:
        raise UsageError("-q/--quiet and -v/--verbose contradict each other; give one")
    handlers = [h for h in logging.getLogger().handlers if h.get_name() == CLI_HANDLER]
    loggers = [logging.getLogger("safetynet"), logging.getLogger(AZURE_LOGGER)]
    levels = [logger.level for logger in loggers]
    for handler in handlers:
        if args.log_format == "json":
            handler.setFormatter(JsonLogFormatter())
        elif args.log_format == "text":
            handler.setFormatter(logging.Formatter())
        handler.setLevel(logging.ERROR if args.quiet else logging.NOTSET)
    if args.verbose:
        loggers[0].setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
    if args.verbose > 1:
        loggers[1].setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def terminal_progress(args: argparse.Namespace) -> bool:
    """Whether a progress line may be drawn on stderr: a terminal, and not --quiet."""
    return sys.stderr.isatty() and not getattr(args, "quiet", False)
