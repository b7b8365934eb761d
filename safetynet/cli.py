"""Entry point of the `safetynet` console script.

Every command runs with stdout and stderr passed through one `Redactor` (which knows the
secrets on the command line and in the secret-bearing variables), returns a code of the one
exit-code contract, and never ends in a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import TextIO, cast

from safetynet.commands import (
    adopt,
    audit,
    binding,
    db,
    demo,
    function,
    history,
    local,
    reconcile,
    sweep,
    verify,
)
from safetynet.commands.common import (
    CommandError,
    Parser,
    error_object,
    install_logging,
    redactor_for,
    wants_json,
)
from safetynet.exitcodes import ExitCode
from sweeper.redaction import Redactor, ScrubbingStream, printable


def build_parser() -> Parser:
    parser = Parser(
        prog="safetynet",
        description="Keep a database row and an Azure blob in step: protocol, sweeper, policies.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (
        demo,
        local,
        db,
        adopt,
        binding,
        sweep,
        reconcile,
        audit,
        verify,
        history,
        function,
    ):
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
    as_json = wants_json(arguments)
    try:
        args = build_parser().parse_args(arguments)
        args.redactor = redactor
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
