"""`safetynet sweep`: remove abandoned uploads once. Exit codes: `blob_safetynet.cli.exitcodes`.

0 ok (also when another sweeper holds the lease), 1 a row failed or the lease is stuck, 2 bad
usage, a container bound to another database or an unbound pair the first sweep cannot prove,
3 a service could not be reached, 4 the database or the lease failed mid-run (the report says
what finished), 130 or 143 stopped by SIGINT or SIGTERM between chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from blob_safetynet.cli.commands.common import (
    CommandError,
    UsageError,
    ascii_int,
    capped,
    fail,
    log_progress,
    summarised,
)
from blob_safetynet.cli.commands.interrupt import StopSignals, stop_signals
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_target_options,
    classify,
    open_target,
)
from blob_safetynet.cli.conventions import terminal_progress
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError, SweepSettings
from blob_safetynet.settings.redaction import printable
from blob_safetynet.sweeper.binding import ContainerBindingError
from blob_safetynet.sweeper.heartbeat import write_heartbeat
from blob_safetynet.sweeper.lease import (
    SweepLeaseHeldError,
    SweepLeaseLostError,
    SweepLeaseStuckError,
)
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    names = appsettings
    env = os.environ
    parser = subparsers.add_parser("sweep", help="delete abandoned uploads under the tag guard")
    add_target_options(parser)
    parser.add_argument(
        "--cutoff",
        default=names.CUTOFF.read(env),
        help="age after which a Pending row is abandoned: 90s, 15m, 2h, 1d "
        f"(env {names.CUTOFF.name})",
    )
    parser.add_argument(
        "--concurrency",
        type=ascii_int,
        # A string default goes through `type` at parse time: a bad env value is a usage error.
        default=names.CONCURRENCY.read(env),
        help=f"Blob Batches in flight, 1-64 (env {names.CONCURRENCY.name})",
    )
    parser.add_argument(
        "--lease",
        action="store_const",
        const="true",
        default=names.LEASE.read(env),
        help="hold a blob lease so one sweeper runs at a time, for databases without SKIP LOCKED "
        f"(env {names.LEASE.name}=true|false)",
    )
    parser.add_argument(
        "--retired-grace",
        default=names.RETIRED_GRACE.read(env),
        help="how long a replaced or deleted document's old blob stays readable before it is "
        f"deleted (env {names.RETIRED_GRACE.name})",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="report what would change; change nothing, lock nothing",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object, also on errors")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    log_progress()
    with stop_signals() as stop:
        return _run(args, stop)


def _run(args: argparse.Namespace, stop: StopSignals) -> int:
    try:
        try:
            settings = SweepSettings(
                cutoff=appsettings.CUTOFF.duration(args.cutoff, "--cutoff"),
                container=args.container,
                concurrency=args.concurrency,
                dry_run=args.dry_run,
                use_lease=appsettings.LEASE.boolean(args.lease),
                retired_grace=appsettings.RETIRED_GRACE.duration(
                    args.retired_grace, "--retired-grace"
                ),
            )
        except SettingsError as error:
            raise UsageError(str(error)) from None
        store, container = open_target(args)
        progress = ProgressLine() if terminal_progress(args) and not args.json else None
        sweeper = Sweeper(
            store,
            container,
            settings,
            on_progress=progress.show if progress else None,
            stop_requested=stop.requested,
            container_checked=True,  # open_target read its properties
        )
        try:
            try:
                report = sweeper.run()
            finally:
                if progress is not None:
                    progress.end()
        except ContainerBindingError as error:
            raise UsageError(str(error)) from None
        except SweepLeaseStuckError as error:
            raise CommandError(ExitCode.FINDINGS, f"lease stuck: {error}") from None
        except SweepLeaseLostError as error:
            raise CommandError(ExitCode.SERVICE_FAILED, f"lease lost mid-run: {error}") from None
        except TARGET_ERRORS as error:
            raise classify(error, args, started=True) from None
    except SweepLeaseHeldError as error:
        # Another sweeper is running: skipping is the lease working, not a fault.
        print(f"safetynet sweep: {error}", file=sys.stderr)
        if args.json:
            print(json.dumps({"skipped": "lease held by another sweeper", "examined": 0}))
        return ExitCode.OK
    except CommandError as error:
        return fail("sweep", error.code, str(error), args.json)
    if not settings.dry_run:
        write_heartbeat(
            container, report.as_dict(), source="cli", table=store.layout.qualified_name
        )
    _print_report(report, args.json)
    if report.interrupted is not None:
        print(f"safetynet sweep: {report.stopped}; claims and lease released", file=sys.stderr)
        return stop.exit_code
    if report.stopped is not None:
        # What finished is in the report; the rest is a service failing mid-run, not a row.
        print(f"safetynet sweep: stopped mid-run: {printable(report.stopped)}", file=sys.stderr)
        return ExitCode.SERVICE_FAILED
    return ExitCode.FINDINGS if report.errors else ExitCode.OK


class ProgressLine:
    """One line on a terminal, rewritten after each chunk and ended before anything follows."""

    def __init__(self) -> None:
        self.shown = False

    def show(self, report: SweepReport) -> None:
        print(
            f"\rexamined {report.examined}  deleted {report.deleted_blobs}  "
            f"rolled forward {report.rolled_forward}  errors {len(report.errors)}",
            end="",
            file=sys.stderr,
            flush=True,
        )
        self.shown = True

    def end(self) -> None:
        if self.shown:
            print(file=sys.stderr, flush=True)
            self.shown = False


def _print_report(report: SweepReport, as_json: bool) -> None:
    if as_json:
        summary = summarised(report.as_dict())
        if report.stopped is not None and report.interrupted is None:
            code = ExitCode.SERVICE_FAILED
            summary["error"] = {
                "exit_code": int(code),
                "kind": code.name.lower(),
                "message": f"stopped mid-run: {report.stopped}",
            }
        print(json.dumps(summary))
        return
    prefix = "dry run, would have: " if report.dry_run else ""
    if report.interrupted is not None:
        prefix = f"stopped ({report.interrupted}) after finishing its chunk: {prefix}"
    print(
        f"{prefix}examined {report.examined} stale rows: deleted {report.deleted_blobs} blobs, "
        f"{report.missing_blobs} never landed, rolled forward {report.rolled_forward}, "
        f"deleted {report.deleted_rows} rows, {report.retired_deleted} retired blobs and "
        f"{report.abandoned_replacements} abandoned replacements deleted, "
        f"{len(report.errors)} errors"
    )
    for label, items in (("error", report.errors), ("warning", report.warnings)):
        for item in capped(items):
            print(f"  {label}: {item}")
        if len(items) > len(capped(items)):
            print(f"  ... and {len(items) - len(capped(items))} more {label}s")
