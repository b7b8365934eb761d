"""`safetynet reconcile`: audit the container against the table; repair only what is safe.

Exit codes (`blob_safetynet.cli.exitcodes`): 0 when the container and the table agree, 1 while findings
remain (committed orphans are never deleted without a plan), 2 on bad usage or a refused repair
(wrong or unbound database, a plan over its limits), 3 when a service cannot be reached, 4 when
one fails mid-run, 130 or 143 when SIGINT or SIGTERM stopped `--apply-plan` between two blobs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.storage.blob import ContainerClient

from blob_safetynet.cli.commands import plan_file
from blob_safetynet.cli.commands.common import (
    CommandError,
    UsageError,
    ascii_int,
    capped,
    fail,
    log_progress,
)
from blob_safetynet.cli.commands.interrupt import stop_signals
from blob_safetynet.cli.commands.reconcile_inventory import (
    add_inventory_options,
    read_inventory_options,
    reconcile_by_inventory,
)
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_target_options,
    classify,
    open_target,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.reconcile.listing import (
    MAX_ORPHAN_SHARE,
    ROLL_FORWARD,
    SHARE_FLOOR,
    ListedBlob,
    Reconciliation,
    RepairRefusedError,
    apply_plan,
    identified_advice,
    plan_orphan_deletion,
    reconcile,
)
from blob_safetynet.settings import appsettings, untrusted
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.redaction import printable
from blob_safetynet.store.documents import DocumentStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser(
        "reconcile", help="audit container against table; repair what is safe (lists blobs)"
    )
    add_target_options(parser)
    parser.add_argument(
        "--older-than",
        default=env(appsettings.CUTOFF.name, appsettings.CUTOFF.default),
        help="judge only blobs and rows older than this (use the sweeper's cutoff)",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="seal pending or retired blobs of Ready rows; delete pending or retired orphans under their "
        "tag guard. Committed orphans are only reported",
    )
    parser.add_argument(
        "--write-plan",
        type=Path,
        metavar="FILE",
        help="write a plan to delete the committed orphans found (nothing is deleted)",
    )
    parser.add_argument(
        "--include-identified",
        action="store_true",
        help="with --write-plan: also plan committed blobs whose metadata names a document no "
        f"row has (left out by default: run `{ROLL_FORWARD}` first)",
    )
    parser.add_argument(
        "--apply-plan",
        type=Path,
        metavar="FILE",
        help="delete the committed orphans a plan lists, each re-checked (needs --max-delete)",
    )
    parser.add_argument(
        "--max-delete",
        type=ascii_int,
        metavar="N",
        help="refuse a plan that deletes more than N blobs",
    )
    parser.add_argument(
        "--max-share",
        type=float,
        metavar="F",
        help="refuse a plan deleting more than this share of the container (default "
        f"{MAX_ORPHAN_SHARE}, but never fewer than {SHARE_FLOOR} blobs)",
    )
    add_inventory_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object, also on errors")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    log_progress()
    try:
        try:
            _check_plan_output(args)
            plan = _read_plan(args) if args.apply_plan else None
            older_than = datetime.now(UTC) - appsettings.CUTOFF.duration(
                args.older_than, "--older-than"
            )
            inventory = read_inventory_options(args)
        except SettingsError as error:
            raise UsageError(str(error)) from None
        store, container = open_target(args)
        try:
            if plan is not None:
                return _apply(store, container, plan, args)
            if inventory is not None:
                result = reconcile_by_inventory(
                    inventory, store, container, older_than, args.repair
                )
            else:
                result = reconcile(store, container, older_than, repair=args.repair)
            written = None
            if args.write_plan is not None:
                written = plan_orphan_deletion(
                    store, container, result, include_identified=args.include_identified
                )
                _write_plan(args.write_plan, written)
        except RepairRefusedError as error:
            raise UsageError(f"refused: {error}") from None
        except TARGET_ERRORS as error:
            raise classify(error, args, started=True) from None
    except CommandError as error:
        return fail("reconcile", error.code, str(error), args.json)
    _print(result, args.json, plan=written, plan_path=args.write_plan)
    return ExitCode.FINDINGS if result.unresolved else ExitCode.OK


def _apply(
    store: DocumentStore, container: ContainerClient, plan: dict[str, Any], args: argparse.Namespace
) -> int:
    """Apply the plan; SIGINT or SIGTERM stops it between two blobs (exit 130 or 143)."""
    with stop_signals() as stop:
        result = apply_plan(store, container, plan, args.max_delete, args.max_share, stop.requested)
    _print(result, args.json, applied=True)
    if result.stopped is not None:
        share = "" if args.max_share is None else f" --max-share {args.max_share:g}"
        print(
            f"safetynet reconcile: stopped by {result.stopped} between two blobs; to finish "
            "the plan, run the same command again (the same --db and container options, "
            f"--apply-plan {printable(str(args.apply_plan))} --max-delete {args.max_delete}"
            f"{share}): it deletes the blobs still listed",
            file=sys.stderr,
        )
        return stop.exit_code
    return ExitCode.FINDINGS if result.errors else ExitCode.OK


def _check_plan_output(args: argparse.Namespace) -> None:
    """Refuse an unwritable --write-plan, or one that is the database or the plan applied,
    before anything is read or repaired."""
    if args.write_plan is None and args.include_identified:
        raise SettingsError("--include-identified plans deletions: it needs --write-plan")
    plan_file.check_output(args.write_plan, "--write-plan", args.db, args.apply_plan)


def _write_plan(path: Path, plan: dict[str, Any]) -> None:
    plan_file.write(path, plan, "--write-plan")


def _read_plan(args: argparse.Namespace) -> dict[str, Any]:
    if args.max_delete is None or args.max_delete < 1:
        raise SettingsError("--apply-plan needs --max-delete N (a whole number, at least 1)")
    if args.max_share is not None and not 0 < args.max_share <= 1:  # also refuses nan
        raise SettingsError("--max-share must be above 0 and at most 1")
    shown = printable(str(args.apply_plan))
    plan = plan_file.read(args.apply_plan, "--apply-plan", "reconcile")
    entries = plan.get("delete")
    for number, entry in enumerate(entries if isinstance(entries, list) else [], start=1):
        if isinstance(entry, dict) and "last_modified" in entry:
            try:
                untrusted.utc_time(entry["last_modified"], f"entry {number}'s last_modified")
            except untrusted.UntrustedInputError as error:
                raise SettingsError(f"--apply-plan: '{shown}': {error}") from None
    return plan


def _print(
    result: Reconciliation,
    as_json: bool,
    plan: dict[str, Any] | None = None,
    applied: bool = False,
    plan_path: Path | None = None,
) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "orphans": [{"blob": b.name, "state": b.state} for b in result.orphans],
                    "identified": [_identified_json(b) for b in result.identified],
                    "dangling": [d.id for d in result.dangling],
                    "unsealed": [d.id for d in result.unsealed],
                    "repaired": result.repaired,
                    "errors": capped(result.errors),
                    "error_count": len(result.errors),
                    "plan": plan,
                    "stopped": result.stopped,
                }
            )
        )
        return
    # Names come from the container and the table: escaped, so none can forge a line.
    for blob in result.orphans:
        print(f"orphan blob {printable(blob.name)} (state={printable(blob.state) or 'untagged'})")
    for blob in result.identified:
        print(printable(identified_advice(blob)))
    for document in result.dangling:
        print(
            f"Ready row {printable(document.id)} ({printable(document.name)}) points to missing "
            f"blob {printable(document.blob_name)}"
        )
    for document in result.unsealed:
        print(
            f"Ready row {printable(document.id)} ({printable(document.name)}) has a blob not "
            f"tagged committed ({printable(document.blob_name)})"
        )
    for name in result.repaired:
        print(f"{'deleted' if applied else 'repaired'} {printable(name)}")
    if result.stopped is not None:
        print(f"stopped ({result.stopped}) after {len(result.repaired)} deleted")
    for error in capped(result.errors):
        print(f"error: {error}")
    if len(result.errors) > len(capped(result.errors)):
        print(f"... and {len(result.errors) - len(capped(result.errors))} more errors")
    if plan is not None:
        print(json.dumps(plan, indent=2))
        count = len(plan["delete"])
        shown = printable(str(plan_path))
        print(
            f"plan to delete {count} committed orphan(s) written to {shown}; review it, then "
            f"run reconcile --apply-plan {shown} --max-delete {count}"
        )
    elif result.committed_orphans and not applied:
        print(
            f"{len(result.committed_orphans)} committed orphan(s) kept: a committed blob is "
            "only deleted through --write-plan, review, then --apply-plan --max-delete N"
        )
    if result.identified and not applied:
        planned = plan is not None and any("identity" in entry for entry in plan["delete"])
        print(
            f"{len(result.identified)} committed blob(s) hold documents no row has"
            + (" (planned: --include-identified)" if planned else " (kept out of any plan)")
            + f": if the database was restored to an earlier time, run `{ROLL_FORWARD}` "
            "first; it rebuilds their rows"
        )
    if result.clean and not applied:
        print("container and table agree")


def _identified_json(blob: ListedBlob) -> dict[str, Any]:
    claimed = blob.identity
    return {
        "blob": blob.name,
        "document": None if claimed is None else claimed.document_id,
        "name": None if claimed is None or claimed.name_cut else claimed.name,
        "identity_problem": blob.identity_problem,
    }
