"""`safetynet reconcile`: list (and with --repair, fix) what crash windows left behind.

Exit 0 when the container and the table agree, 1 when findings remain, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime

from safetynet.commands.target import TARGET_ERRORS, add_target_options, describe, open_target
from sweeper.reconcile import Reconciliation, reconcile
from sweeper.settings import parse_duration


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser(
        "reconcile", help="compare container and table; list or repair orphans (lists blobs)"
    )
    add_target_options(parser)
    parser.add_argument(
        "--older-than",
        default=env("SAFETYNET_CUTOFF", "15m"),
        help="judge only blobs and rows older than this (use the sweeper's cutoff)",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="seal pending blobs of Ready rows; delete orphans under their tag guard",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        older_than = datetime.now(UTC) - parse_duration(args.older_than, "--older-than")
        store, container = open_target(args)
        result = reconcile(store, container, older_than, repair=args.repair)
    except TARGET_ERRORS as error:
        print(f"safetynet reconcile: {describe(error, args)}", file=sys.stderr)
        return 2
    _print(result, args.json)
    # Repair fixes orphans and unsealed blobs; a Ready row whose blob is gone needs a human
    # (undelete it from soft delete), so it keeps the exit code at 1.
    unresolved = bool(result.dangling or result.errors) if args.repair else not result.clean
    return 1 if unresolved else 0


def _print(result: Reconciliation, as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "orphans": [{"blob": b.name, "state": b.state} for b in result.orphans],
                    "dangling": [d.id for d in result.dangling],
                    "unsealed": [d.id for d in result.unsealed],
                    "repaired": result.repaired,
                    "errors": result.errors,
                }
            )
        )
        return
    for blob in result.orphans:
        print(f"orphan blob {blob.name} (state={blob.state or 'untagged'})")
    for document in result.dangling:
        print(
            f"Ready row {document.id} ({document.name}) points to missing blob {document.blob_name}"
        )
    for document in result.unsealed:
        print(f"Ready row {document.id} ({document.name}) has a blob still tagged pending")
    for name in result.repaired:
        print(f"repaired {name}")
    for error in result.errors:
        print(f"error: {error}")
    if result.clean:
        print("container and table agree")
