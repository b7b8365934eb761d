"""Entry point of the `safetynet` console script.

Every command runs with stdout and stderr passed through one `Redactor` (which knows the
secrets on the command line and in the secret-bearing variables), returns a code of the one
exit-code contract, and never ends in a traceback. This module imports only the standard
library and `startup` at the top: `main` installs the signal handlers before anything heavier
loads (`blob_safetynet/cli/startup.py`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

from blob_safetynet.cli.startup import (
    EXIT_CODES,
    ignore_stop_signals,
    stop_at_once,
    stopped_cleanly,
)

if TYPE_CHECKING:
    from blob_safetynet.cli.commands.common import Parser
    from blob_safetynet.cli.standard_streams import StandardOutput
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
    "recover": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.recover"),
        "give back documents deleted or overwritten behind the protocol (plan, then apply)",
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
        "export the rules as Azure Policy definitions and an initiative, or write the CrossGuard pack",
    ),
    "config": (
        lambda: importlib.import_module("blob_safetynet.cli.commands.config"),
        "check a stack's configuration offline (the step before pulumi preview)",
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
    from blob_safetynet.cli.exitcodes import ExitCode
    from blob_safetynet.cli.standard_streams import StandardOutput, say_unwritable
    from blob_safetynet.settings.redaction import ScrubbingStream

    arguments = list(sys.argv[1:] if argv is None else argv)
    redactor = redactor_for(arguments, os.environ)
    stdout, stderr = sys.stdout, sys.stderr
    output = StandardOutput(stdout)
    sys.stdout = cast(TextIO, ScrubbingStream(cast(TextIO, output), redactor))
    sys.stderr = cast(TextIO, ScrubbingStream(stderr or cast(TextIO, _Discarded()), redactor))
    safetynet_logger = logging.getLogger("safetynet")
    level = safetynet_logger.level
    handler = install_logging(redactor)
    try:
        try:
            code = _run(arguments, redactor, output)
        finally:
            with contextlib.suppress(OSError):  # a failure of stdout is kept in `output`
                sys.stdout.flush()
            with contextlib.suppress(OSError):
                sys.stderr.flush()
    except (OSError, SystemExit):  # --json's error object, argparse's --version or --help
        if output.failure is None:
            raise
        code = ExitCode.INTERNAL
    finally:
        logging.getLogger().removeHandler(handler)
        safetynet_logger.setLevel(level)
        sys.stdout, sys.stderr = stdout, stderr
    if output.failure is None:
        return code
    say_unwritable(output.failure)
    return int(ExitCode.INTERNAL)


class _Discarded:
    """stderr when the process started with it closed (`2>&-`): what it would say is dropped."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _run(arguments: list[str], redactor: Redactor, output: StandardOutput) -> int:
    """The command's code; a failure to write stdout is left to `_main` to say, once."""
    from blob_safetynet.cli import conventions
    from blob_safetynet.cli.commands.common import CommandError, error_object, wants_json
    from blob_safetynet.cli.exitcodes import ExitCode
    from blob_safetynet.cli.standard_streams import internal_error
    from blob_safetynet.settings.redaction import printable

    as_json = wants_json(arguments)
    try:
        args = build_parser(_named_command(arguments)).parse_args(arguments)
        args.redactor = redactor
        with conventions.applied(args), contextlib.ExitStack() as args.resources:
            return int(args.handler(args))
    except CommandError as error:
        print(f"safetynet: {error}", file=sys.stderr)
        if as_json:
            print(error_object(error.code, str(error).splitlines()[0]))
        return int(error.code)
    except Exception as error:
        if output.failure is not None:
            return int(ExitCode.INTERNAL)
        message = internal_error(error)
        print(f"safetynet: {printable(redactor.scrub(message))}", file=sys.stderr)
        if as_json:
            print(error_object(ExitCode.INTERNAL, redactor.scrub(message)))
        return int(ExitCode.INTERNAL)


def console_main() -> NoReturn:
    """The `safetynet` console script: `main`, then an exit without the interpreter's teardown.

    Tearing the Azure SDK's and SQLAlchemy's modules down costs a sweep process a fifth of a
    second and has no effect outside it. `os._exit` ends the process "without calling cleanup
    handlers, flushing stdio buffers, etc." and atexit functions "are not called ... when
    os._exit() is called" (https://docs.python.org/3/library/os.html#os._exit,
    https://docs.python.org/3/library/atexit.html), so this does first what of a normal exit
    matters: the atexit handlers (`logging.shutdown`, weakref finalizers, coverage's save), then
    the flush of stdout and stderr. Commands close their own resources before they return
    (database engines disposed, Azurite stopped). While a thread other than the main one is
    alive and not a daemon, `os._exit` would cut its work short: the exit is then the normal
    `sys.exit`, which waits for it (an executor's workers are such threads, and the hooks
    `concurrent.futures` registers with `threading._register_atexit` only join them). A stdout
    that cannot be written, whenever a write or the last flush meets it, ends the run with one
    line and exit 5 (`standard_streams`); a signal after `main` returned ends it at once with
    `stopped by SIG...` and 130 or 143 (`startup.stop_at_once`), never a traceback.
    """
    stop_at_once()
    from blob_safetynet.cli.standard_streams import flush_standard_streams, say_unwritable

    try:
        code = main()
    except SystemExit as stop:  # argparse's exit after --help and --version
        if not (stop.code is None or isinstance(stop.code, int)):
            raise
        code = stop.code or 0
    except OSError as error:  # the line of a stop signal, on a stderr that failed
        say_unwritable(error)
        code = 5
    if code in EXIT_CODES.values():
        ignore_stop_signals()
    if _threads_working():
        sys.exit(code)
    atexit._run_exitfuncs()
    failure = flush_standard_streams()
    if failure is not None:
        say_unwritable(failure)
        code = 5
    os._exit(code)


def _threads_working() -> bool:
    main_thread = threading.main_thread()
    return any(
        thread is not main_thread and not thread.daemon and thread.is_alive()
        for thread in threading.enumerate()
    )


if __name__ == "__main__":
    console_main()
