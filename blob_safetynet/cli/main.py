"""Entry point of the `safetynet` console script.

Every command runs with stdout and stderr passed through one `Redactor` (which knows the
secrets on the command line and in the secret-bearing variables), returns a code of the one
exit-code contract, and never ends in a traceback. This module imports only the standard
library and `startup` at the top: `main` installs the signal handlers before anything heavier
loads (`blob_safetynet/cli/startup.py`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TextIO, cast

from blob_safetynet.cli.startup import stopped_cleanly

if TYPE_CHECKING:
    from blob_safetynet.cli.commands.common import Parser
    from blob_safetynet.settings.redaction import Redactor

COMMANDS: dict[str, tuple[Callable[[], ModuleType], str]] = {
    "demo": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.demo"),
        "replay the protocol's scenarios and the crash matrix on a local Azurite + SQLite",
    ),
    "local": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.local"),
        "run the embedded Azurite (blob service) on 127.0.0.1 until Ctrl-C",
    ),
    "db": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.db"),
        "manage the documents table",
    ),
    "adopt": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.adopt"),
        "bring an existing table and container under the protocol (dry run unless --apply)",
    ),
    "binding": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.binding"),
        "show, bind or unbind a database and its blob container",
    ),
    "sweep": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.sweep"),
        "delete abandoned uploads under the tag guard",
    ),
    "reconcile": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.reconcile"),
        "audit container against table; repair what is safe (lists blobs)",
    ),
    "audit": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.audit"),
        "audit live storage accounts against the policy rules",
    ),
    "verify": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.verify"),
        "prove on the data plane that an account enforces its safety nets",
    ),
    "history": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.history"),
        "each probe's and rule's outcomes over the continuous verification runs",
    ),
    "policy": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.policy"),
        "export the rules as Azure Policy definitions and an initiative",
    ),
    "build-function": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.function"),
        "build the sweeper's Azure Functions zip with Linux x86-64 wheels",
    ),
}
"""Command name -> (its module, imported when called; its help line). Only the command a run
names is imported: the others' dependencies (the audit's ARM clients, Pulumi, ...) never load
(tests/sweeper/test_cli_imports.py holds each command to that, and these help lines to the
modules' own)."""


def build_parser(command: str | None = None) -> Parser:
    """The parser with every command registered, or, given `command`, with that one registered
    and the others listed by name and help line only."""
    from blob_safetynet.cli import conventions
    from blob_safetynet.cli.commands.common import Parser

    parser = Parser(
        prog="safetynet",
        description="Keep a database row and an Azure blob in step: protocol, sweeper, policies.",
    )
    conventions.add_common_options(parser, top=True)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_line) in COMMANDS.items():
        if command is None or command == name:
            module().register(subparsers)
        else:
            subparsers.add_parser(name, help=help_line, add_help=False)
    conventions.add_to_every_command(parser)
    return parser


def _named_command(arguments: Sequence[str]) -> str:
    """The command the arguments name (their first word after the shared options), '' when
    they name none."""
    from blob_safetynet.cli import conventions

    word = conventions.first_word(arguments)
    return word if word in COMMANDS else ""


def main(argv: Sequence[str] | None = None) -> int:
    with stopped_cleanly() as stop:
        return _main(argv)
    assert stop.code is not None
    return stop.code


def _main(argv: Sequence[str] | None) -> int:
    import logging

    from blob_safetynet.cli.commands.common import install_logging, redactor_for
    from blob_safetynet.settings.redaction import ScrubbingStream

    arguments = list(sys.argv[1:] if argv is None else argv)
    redactor = redactor_for(arguments, os.environ)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, ScrubbingStream(stdout, redactor))
    sys.stderr = cast(TextIO, ScrubbingStream(stderr, redactor))
    safetynet_logger = logging.getLogger("safetynet")
    level = safetynet_logger.level
    handler = install_logging(redactor)
    try:
        return _run(arguments, redactor)
    finally:
        logging.getLogger().removeHandler(handler)
        safetynet_logger.setLevel(level)
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr


def _run(arguments: list[str], redactor: Redactor) -> int:
    from blob_safetynet.cli import conventions
    from blob_safetynet.cli.commands.common import CommandError, error_object, wants_json
    from blob_safetynet.cli.exitcodes import ExitCode
    from blob_safetynet.settings.redaction import printable

    as_json = wants_json(arguments)
    try:
        args = build_parser(_named_command(arguments)).parse_args(arguments)
        args.redactor = redactor
        with conventions.applied(args):
            return int(args.handler(args))
    except CommandError as error:
        print(f"safetynet: {error}", file=sys.stderr)
        if as_json:
            print(error_object(error.code, str(error).splitlines()[0]))
        return int(error.code)
    except Exception as error:
        message = f"internal error, please report it: {type(error).__name__}: {error}"
        print(f"safetynet: {printable(redactor.scrub(message))}", file=sys.stderr)
        if as_json:
            print(error_object(ExitCode.INTERNAL, redactor.scrub(message)))
        return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
