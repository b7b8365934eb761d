"""Entry point of the `safetynet` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from safetynet.commands import audit, db, demo, function, reconcile, sweep, verify

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="safetynet",
        description="Keep a database row and an Azure blob in step: protocol, sweeper, policies.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (demo, db, sweep, reconcile, audit, verify, function):
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    exit_code: int = args.handler(args)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
