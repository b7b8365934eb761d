"""`safetynet sweep`: remove abandoned uploads once.

Exit 0 ok (also when another sweeper holds the lease), 1 a row failed, the lease was lost or
is stuck, 2 bad usage or a container bound to another database.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from safetynet.commands.target import TARGET_ERRORS, add_target_options, describe, open_target
from sweeper.heartbeat import write_heartbeat
from sweeper.lease import SweepLeaseHeldError, SweepLeaseStuckError
from sweeper.settings import SweepSettings, parse_bool, parse_duration
from sweeper.sweep import ContainerBindingError, Sweeper, SweepReport

EXIT_OK, EXIT_FAILED_ROWS, EXIT_USAGE = 0, 1, 2


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, the shape log collectors ingest without parsing rules."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if hasattr(record, "sweep"):
            entry["sweep"] = record.sweep
        return json.dumps(entry)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser("sweep", help="delete abandoned uploads under the tag guard")
    add_target_options(parser)
    parser.add_argument(
        "--cutoff",
        default=env("SAFETYNET_CUTOFF", "15m"),
        help="age after which a Pending row is abandoned: 90s, 15m, 2h, 1d (env SAFETYNET_CUTOFF)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        # A string default goes through `type` at parse time: a bad env value is a usage error.
        default=env("SAFETYNET_CONCURRENCY", "4"),
        help="Blob Batches in flight, 1-64 (env SAFETYNET_CONCURRENCY)",
    )
    parser.add_argument(
        "--lease",
        action="store_const",
        const="true",
        default=env("SAFETYNET_LEASE", "false"),
        help="hold a blob lease so one sweeper runs at a time, for databases without SKIP LOCKED "
        "(env SAFETYNET_LEASE=true|false)",
    )
    parser.add_argument(
        "--retired-grace",
        default=env("SAFETYNET_RETIRED_GRACE", "1h"),
        help="how long a replaced or deleted document's old blob stays readable before it is "
        "deleted (env SAFETYNET_RETIRED_GRACE)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="report what would change; change nothing, lock nothing",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    _configure_logging()
    try:
        settings = SweepSettings(
            cutoff=parse_duration(args.cutoff, "--cutoff"),
            container=args.container,
            concurrency=args.concurrency,
            dry_run=args.dry_run,
            use_lease=parse_bool(args.lease, "SAFETYNET_LEASE"),
            retired_grace=parse_duration(args.retired_grace, "--retired-grace"),
        )
        store, container = open_target(args)
        progress = _print_progress if sys.stderr.isatty() and not args.json else None
        report = Sweeper(store, container, settings, on_progress=progress).run()
    except SweepLeaseHeldError as error:
        print(f"safetynet sweep: {error}", file=sys.stderr)
        return EXIT_OK
    except SweepLeaseStuckError as error:
        print(f"safetynet sweep: lease stuck: {error}", file=sys.stderr)
        return EXIT_FAILED_ROWS
    except ContainerBindingError as error:
        print(f"safetynet sweep: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TARGET_ERRORS as error:
        print(f"safetynet sweep: {describe(error, args)}", file=sys.stderr)
        return EXIT_USAGE
    if not settings.dry_run:
        write_heartbeat(container, report.as_dict(), source="cli")
    _print_report(report, args.json)
    return EXIT_FAILED_ROWS if report.errors else EXIT_OK


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    if not sys.stderr.isatty():
        handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger("safetynet")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO if not sys.stderr.isatty() else logging.WARNING)


def _print_progress(report: SweepReport) -> None:
    print(
        f"\rexamined {report.examined}  deleted {report.deleted_blobs}  "
        f"rolled forward {report.rolled_forward}  errors {len(report.errors)}",
        end="",
        file=sys.stderr,
        flush=True,
    )


def _print_report(report: SweepReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict()))
        return
    prefix = "dry run, would have: " if report.dry_run else ""
    print(
        f"{prefix}examined {report.examined} stale rows: deleted {report.deleted_blobs} blobs, "
        f"{report.missing_blobs} never landed, rolled forward {report.rolled_forward}, "
        f"deleted {report.deleted_rows} rows, {report.retired_deleted} retired blobs and "
        f"{report.abandoned_replacements} abandoned replacements deleted, "
        f"{len(report.errors)} errors"
    )
    for error in report.errors:
        print(f"  error: {error}")
    for warning in report.warnings:
        print(f"  warning: {warning}")
