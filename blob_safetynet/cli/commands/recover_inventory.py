"""`safetynet recover --inventory`: the plan's candidates from the recover inventory rule's
newest run instead of a listing (blob_safetynet/recover/inventory.py). The reader (pyarrow) is
imported only when the option is given, as for `reconcile --inventory`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from azure.storage.blob import ContainerClient

from blob_safetynet.cli.commands.common import CommandError, UsageError
from blob_safetynet.cli.commands.reconcile_inventory import InventoryOptions, index_note
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.settings.redaction import printable
from blob_safetynet.store.documents import DocumentStore

WHAT = (
    "take the plan's candidates (lost rows, kept copies) from the newest completed run of the "
    "recover inventory rule in CONTAINER; each candidate is still listed live and judged on "
    "what the service holds now, and the apply reads each blob again before writing"
)


def check(args: argparse.Namespace) -> str | None:
    """What makes --inventory unusable with the other options, or None."""
    if args.inventory is not None and args.after_restore:
        return "--inventory plans lost blobs; --after-restore rolls the table forward: drop one"
    return None


def plan_by_inventory(
    options: InventoryOptions,
    store: DocumentStore,
    container: ContainerClient,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The plan from the report; a wrong rule or an unreadable report is exit 2, no usable run
    (none, running, failed, stale, incomplete) exit 3."""
    from blob_safetynet.reconcile.inventory_report import InventoryConfigError, InventoryError
    from blob_safetynet.recover.inventory import CorruptReportError, make_plan_from_inventory

    destination = container._get_blob_service_client().get_container_client(options.container)
    note = index_note(store)
    if note is not None:
        print(f"safetynet recover: note: {note}", file=sys.stderr)
    try:
        return make_plan_from_inventory(
            store,
            container,
            destination,
            options.rule,
            options.max_age,
            verify_bytes=args.verify_bytes,
            horizon_days=args.expiry_horizon,
        )
    except (InventoryConfigError, CorruptReportError) as error:
        raise UsageError(f"--inventory: {error}") from None
    except InventoryError as error:
        raise CommandError(ExitCode.INCOMPLETE, f"--inventory: {error}") from None


def print_source(plan: dict[str, Any]) -> None:
    """One line naming the run a plan's candidates came from (nothing for a listed plan)."""
    source = plan.get("candidates") or {}
    if source.get("from") == "inventory":
        print(
            f"candidates from inventory run {printable(str(source.get('run')))} (started "
            f"{printable(str(source.get('run_started_utc')))}), each judged on a live listing "
            "of its name"
        )
