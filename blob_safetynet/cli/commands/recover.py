"""`safetynet recover`: give back documents whose blobs were deleted or overwritten behind the
protocol, from the nets (blob soft delete, versioning, container soft delete).

Plan, then apply, as `safetynet reconcile` does:

  safetynet recover --db URL --container C --write-plan plan.json    # dry run: judge, print, save
  safetynet recover --db URL --container C --apply-plan plan.json    # restore what it names
  safetynet recover --db URL --container C --apply                   # plan and apply in one run

The dry run writes nothing to the service or the table. Applying refuses a plan made against
another account, endpoint, container, database or table before any write; each row is read
again just before it is restored, and a copy is restored only when its length and SHA-256 equal
the row's. A deleted container is restored first, only while its name is free.

Exit codes (`blob_safetynet.cli.exitcodes`): 0 when nothing is lost or everything was restored,
1 while rows remain lost (no kept copy, copies differ, retention expired, a row's service error),
2 on bad usage or a refused plan, 3 when a service cannot be reached, 4 when one fails mid-run,
6 when a copy the plan needs expires within --expiry-horizon days (dry run: apply it now),
130 or 143 when SIGINT or SIGTERM stopped an apply between two rows.

With `--inventory [CONTAINER]` the plan's candidates come from the newest run of the recover
inventory rule (`safetynetrecover`: deleted blobs, snapshots and versions included) instead of
a listing; the report is only a candidate list: each candidate's name is listed live and judged
on what the service holds now, a copy the report shows but the service no longer keeps is named
on its row and never tried, and the apply reads each blob again before writing. See
docs/operations.md, "Recover from Blob Inventory".

After the database was restored to an earlier time, `--after-restore` rolls the table forward
from the container instead (plan and apply the same way; `--reapply-deletes` deletes again what
was deleted after the restore point, kept by default). See docs/operations.md, "The database
was restored to an earlier time".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from blob_safetynet.cli.commands import plan_file, recover_inventory, recover_restore
from blob_safetynet.cli.commands.common import (
    CommandError,
    UsageError,
    ascii_int,
    capped,
    fail,
    log_progress,
)
from blob_safetynet.cli.commands.reconcile_inventory import (
    add_inventory_options,
    read_inventory_options,
)
from blob_safetynet.cli.commands.recover_tail import apply_and_report, refusals_and_target_errors
from blob_safetynet.cli.commands.target import add_target_options, open_target
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.recover.apply import INTACT, RESTORED, Recovery, apply_plan
from blob_safetynet.recover.plan import expiring, make_plan
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.redaction import printable

DEFAULT_HORIZON_DAYS = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "recover",
        help="give back documents deleted or overwritten behind the protocol (plan, then apply)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    add_target_options(parser)
    parser.add_argument(
        "--write-plan", type=Path, metavar="FILE", help="save the plan (the dry run's output)"
    )
    parser.add_argument(
        "--apply-plan", type=Path, metavar="FILE", help="restore what a saved plan names"
    )
    parser.add_argument(
        "--apply", action="store_true", help="plan and restore in one run (no plan file)"
    )
    parser.add_argument(
        "--verify-bytes",
        action="store_true",
        help="read every live blob and compare its SHA-256 with the row's (finds overwrites of "
        "the same length; costs one download per document)",
    )
    parser.add_argument(
        "--expiry-horizon",
        type=ascii_int,
        default=None,
        metavar="DAYS",
        help="exit 6 when a copy the plan needs has this many retention days left or fewer "
        f"(default {DEFAULT_HORIZON_DAYS})",
    )
    parser.add_argument(
        "--after-restore",
        action="store_true",
        help="the database was restored to an earlier time: roll the table forward from the "
        "container (documents put, replaced and deleted since) instead",
    )
    parser.add_argument(
        "--reapply-deletes",
        action="store_true",
        help="with --after-restore: delete again the documents deleted after the restore "
        "point (default: keep them; nothing acknowledged is lost)",
    )
    add_inventory_options(
        parser, appsettings.RECOVER_INVENTORY_RULE, recover_inventory.WHAT, container_from_env=False
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object, also on errors")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        recover_restore.check_options(args)
    except SettingsError as error:
        return fail("recover", ExitCode.USAGE, str(error), args.json)
    if (problem := recover_inventory.check(args)) is not None:
        return fail("recover", ExitCode.USAGE, problem, args.json)
    if args.after_restore:
        return recover_restore.run(args)
    if args.expiry_horizon is None:
        args.expiry_horizon = DEFAULT_HORIZON_DAYS
    log_progress()
    try:
        try:
            if args.apply and args.apply_plan:
                raise SettingsError("--apply and --apply-plan exclude each other")
            if args.expiry_horizon < 0:
                raise SettingsError("--expiry-horizon must be 0 or more days")
            plan_file.check_output(args.write_plan, "--write-plan", args.db, args.apply_plan)
            inventory = read_inventory_options(args)
            saved = (
                plan_file.read(args.apply_plan, "--apply-plan", "recover")
                if args.apply_plan
                else None
            )
        except SettingsError as error:
            raise UsageError(str(error)) from None
        store, container = open_target(args, container_may_be_gone=True)
        with refusals_and_target_errors(args):
            if saved is not None:
                plan = saved
            elif inventory is not None:
                plan = recover_inventory.plan_by_inventory(inventory, store, container, args)
            else:
                plan = make_plan(
                    store,
                    container,
                    verify_bytes=args.verify_bytes,
                    horizon_days=args.expiry_horizon,
                )
            if args.write_plan is not None and saved is None:
                plan_file.write(args.write_plan, plan, "--write-plan")
            if saved is None and not args.apply:
                return _report_plan(plan, args)
            return apply_and_report(
                args,
                lambda stop: apply_plan(store, container, plan, stop),
                _report_applied,
                lambda result: not result.unresolved,
            )
    except CommandError as error:
        return fail("recover", error.code, str(error), args.json)


def _report_plan(plan: dict[str, Any], args: argparse.Namespace) -> int:
    summary = plan["summary"]
    if args.json:
        print(json.dumps({"plan": plan}))
    else:
        recover_inventory.print_source(plan)
        restore = plan.get("container_restore")
        if restore:
            print(
                f"container {printable(restore['name'])} is deleted and kept (version "
                f"{printable(restore['version'])}, {restore['days_left']} day(s) left); "
                "applying restores it, then its documents"
            )
        for row in plan["rows"]:
            days = "no clock" if row["days_left"] is None else f"{row['days_left']} day(s) left"
            how = row["reason"] or f"from {row['copies'][0]['kind']} ({days})"
            print(
                f"{row['finding']}: {printable(row['name'])} ({printable(row['blob'])}): "
                f"{printable(how)}"
            )
            for gone in row.get("gone_since_report") or []:
                print(f"  in the report, no longer kept: {printable(gone)}")
        print(
            f"{summary['recoverable']} recoverable, {summary['unrecoverable']} not; soonest "
            f"copy expires in {summary['soonest_days_left']} day(s)"
            if summary["soonest_days_left"] is not None
            else f"{summary['recoverable']} recoverable, {summary['unrecoverable']} not"
        )
        if args.write_plan is not None:
            shown = printable(str(args.write_plan))
            print(f"plan written to {shown}; review it, then run recover --apply-plan {shown}")
    if expiring(plan):
        print(
            f"safetynet recover: {expiring(plan)} copy(ies) the plan needs expire within "
            f"{summary['horizon_days']} day(s); apply the plan now",
            file=sys.stderr,
        )
        return ExitCode.EXPIRING
    lost = plan["rows"] or plan.get("container_restore")
    return ExitCode.FINDINGS if lost else ExitCode.OK


def _report_applied(result: Recovery, args: argparse.Namespace) -> None:
    if args.json:
        print(
            json.dumps(
                {
                    "container_restored": result.container_restored,
                    "outcomes": [o.as_dict() for o in result.outcomes],
                    "restored": result.count(RESTORED),
                    "stopped": result.stopped,
                }
            )
        )
        return
    if result.container_restored:
        print(f"container restored (version {printable(result.container_restored)})")
    problems = [o for o in result.outcomes if o.status not in (RESTORED, INTACT)]
    for outcome in result.outcomes:
        if outcome.status in (RESTORED, INTACT):
            print(f"{outcome.status} {printable(outcome.blob)} ({printable(outcome.source or '')})")
    for line in capped([f"{o.status} {o.blob}: {o.detail}" for o in problems]):
        print(line)
    print(f"{result.count(RESTORED)} restored, {len(problems)} left for a person")
    if result.stopped is not None:
        print(
            f"safetynet recover: stopped by {result.stopped} between two rows; run the same "
            "command again to finish",
            file=sys.stderr,
        )
