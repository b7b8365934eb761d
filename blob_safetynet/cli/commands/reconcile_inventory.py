"""`safetynet reconcile --inventory`: judge from Blob Inventory's newest run instead of a listing.

The reader (blob_safetynet/reconcile/inventory.py and inventory_report.py, pyarrow) is imported only when the option is given, so the
listing path runs without the `inventory` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta

from azure.storage.blob import ContainerClient

from blob_safetynet.cli.commands.common import CommandError, UsageError
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.reconcile.listing import Reconciliation
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError, check_container_name
from blob_safetynet.settings.vocabulary import DEFAULT_INVENTORY_CONTAINER
from blob_safetynet.store.documents import DocumentStore, IndexState
from blob_safetynet.store.engine import StoreError


@dataclass(frozen=True)
class InventoryOptions:
    container: str
    rule: str
    max_age: timedelta


def add_inventory_options(
    parser: argparse.ArgumentParser,
    rule: appsettings.Setting = appsettings.INVENTORY_RULE,
    what: str = "judge",
    container_from_env: bool = True,
) -> None:
    """--inventory, --inventory-rule (default `rule`) and --inventory-max-age. `recover` passes
    its own rule and reads no container from the environment: SAFETYNET_INVENTORY_CONTAINER,
    set for reconcile, must not switch recover's candidate source unasked."""
    env = os.environ.get
    parser.add_argument(
        "--inventory",
        nargs="?",
        const=DEFAULT_INVENTORY_CONTAINER,
        default=(env(appsettings.INVENTORY_CONTAINER.name) or None) if container_from_env else None,
        metavar="CONTAINER",
        help=f"{what} from the newest completed Blob Inventory run in CONTAINER (default "
        f"{DEFAULT_INVENTORY_CONTAINER}) instead of listing the container",
    )
    parser.add_argument(
        "--inventory-rule",
        default=env(rule.name, rule.default),
        metavar="NAME",
        help=f"the inventory rule whose runs are read (default {rule.default})",
    )
    parser.add_argument(
        "--inventory-max-age",
        default=env(appsettings.INVENTORY_MAX_AGE.name, appsettings.INVENTORY_MAX_AGE.default),
        metavar="DURATION",
        help="refuse a run that started longer ago than this",
    )


def read_inventory_options(args: argparse.Namespace) -> InventoryOptions | None:
    """The checked options, None without --inventory; SettingsError names a bad one."""
    if args.inventory is None:
        return None
    if args.apply_plan:
        raise SettingsError(
            "--apply-plan re-reads each entry from the container itself; drop --inventory"
        )
    check_container_name(args.inventory, "--inventory")
    if importlib.util.find_spec("pyarrow") is None:
        raise SettingsError("--inventory needs pyarrow: install blob-safetynet[inventory]")
    if (
        not args.inventory_rule
        or not args.inventory_rule.isalnum()
        or not args.inventory_rule.isascii()
    ):
        raise SettingsError("--inventory-rule must be a rule name (letters and digits)")
    max_age = appsettings.INVENTORY_MAX_AGE.duration(args.inventory_max_age, "--inventory-max-age")
    return InventoryOptions(args.inventory, args.inventory_rule, max_age)


def reconcile_by_inventory(
    options: InventoryOptions,
    store: DocumentStore,
    container: ContainerClient,
    older_than: datetime,
    repair: bool,
) -> Reconciliation:
    """Reconcile from the inventory; an unusable run is exit 3, a wrong rule or setup exit 2."""
    from blob_safetynet.reconcile import inventory, inventory_report

    destination = container._get_blob_service_client().get_container_client(options.container)
    note = index_note(store)
    if note is not None:
        print(f"safetynet reconcile: note: {note}", file=sys.stderr)
    try:
        return inventory.reconcile_from_inventory(
            store, container, destination, options.rule, older_than, options.max_age, repair
        )
    except inventory_report.InventoryConfigError as error:
        raise UsageError(f"--inventory: {error}") from None
    except inventory_report.InventoryError as error:
        raise CommandError(ExitCode.INCOMPLETE, f"--inventory: {error}") from None


def index_note(store: DocumentStore) -> str | None:
    """One line when PostgreSQL must sort the whole table for the join (no valid byte-order
    index): the join is right without it, only slower. None otherwise, or when the catalog
    cannot be read (the join then reports the database's error itself)."""
    try:
        state = store.byte_order_index_state()
    except StoreError:
        return None
    if state not in (IndexState.MISSING, IndexState.INVALID):
        return None
    return (
        f"index {store.layout.byte_order_index_name} is {state.value}: PostgreSQL sorts the whole "
        "table for the join; `safetynet db upgrade` builds it without blocking writers"
    )
