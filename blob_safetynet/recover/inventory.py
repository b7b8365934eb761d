"""`recover --inventory`: the plan's candidates from a Blob Inventory report instead of a listing.

The data account has two inventory rules (blob_safetynet/infra/inventory.py): reconcile's,
which lists base blobs only (reconcile refuses a report with deleted blobs, snapshots or
versions), and recover's (`safetynetrecover`), with `includeDeleted`, `includeSnapshots` and,
when versioning is on, `includeBlobVersions`, so each name's report rows show its live blob and
every copy the nets keep (https://learn.microsoft.com/azure/storage/blobs/blob-inventory). The
run is found, checked and sorted by reconcile's reader (`blob_safetynet.reconcile.inventory_report`:
the newest complete run, its manifest checksum, its files' sizes and row count, rows sorted by
name in spilled runs, so memory stays flat), with a rule check and a projection of recover's
own.

The report is a candidate list, never the judge. Its rows and the table are merged by blob
name (`plan.merge_by_name`); a Ready row is a candidate when the report shows its blob missing,
of another length, or with a kept copy (the protocol never writes a name twice), and, with
`verify_bytes`, every row is. Each candidate's name is then listed live (one List Blobs with
include=deleted,snapshots,versions under that name, as `recover_one` does) and the listing
path's own `plan.judge` decides on what the service holds now: a blob restored, changed or
deleted since the run, or a row newer than the run, is judged as it is now, and a copy the
report shows that the service no longer keeps is named on its row (`gone_since_report`), never
tried. A row the report shows intact is not read: a loss after the run is found by the next run
or by the listing path. The apply (`plan.apply_plan`) is the same as for a listed plan.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from azure.storage.blob import ContainerClient

from blob_safetynet.reconcile.inventory_report import (
    NAME,
    InventoryConfigError,
    InventoryError,
    InventoryRun,
    Projection,
    download,
    find_run,
    protocol_blobs,
    scope_problems,
    sorted_chunks,
)
from blob_safetynet.reconcile.listing import RepairRefusedError
from blob_safetynet.recover.nets import (
    DELETED,
    SNAPSHOT,
    VERSION,
    BlobNets,
    KeptCopy,
    LiveBlob,
    read_nets,
)
from blob_safetynet.recover.plan import (
    RowPlan,
    Target,
    build_plan,
    judge,
    merge_by_name,
    rows_by_blob_name,
)
from blob_safetynet.settings.vocabulary import (
    RECOVER_INVENTORY_RULE,
    RECOVER_VERSION_FIELDS,
)
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content, Document

CONTENT_LENGTH: Final = "Content-Length"
IS_DELETED: Final = "Deleted"
RETENTION_DAYS: Final = "RemainingRetentionDays"
SNAPSHOT_FIELD: Final = "Snapshot"
VERSION_ID: Final = "VersionId"
IS_CURRENT: Final = "IsCurrentVersion"
READ_FIELDS: Final = (NAME, CONTENT_LENGTH, IS_DELETED, RETENTION_DAYS, SNAPSHOT_FIELD)
"""The report's fields recover reads; with versions, RECOVER_VERSION_FIELDS too."""
FLAGS: Final = ("includeDeleted", "includeSnapshots")


class CorruptReportError(InventoryError):
    """A report file of the run cannot be read as the rule's Parquet report (not Parquet, a
    value of the wrong type): no candidate is taken from it."""


class RecoverRule:
    """The check `find_run` applies to a run's ruleDefinition: one that cannot stand in for a
    listing with its kept copies is refused (InventoryConfigError); the last definition
    accepted says whether the report holds versions."""

    def __init__(self) -> None:
        self.versions = False

    def __call__(self, definition: object, container: str, name: str) -> None:
        if not isinstance(definition, dict):
            raise InventoryConfigError(f"inventory manifest {name} has no ruleDefinition")
        filters = definition.get("filters") or {}
        fields = definition.get("schemaFields") or []
        problems = scope_problems(definition, container)
        problems += [f"{flag} is not true" for flag in FLAGS if filters.get(flag) is not True]
        versions = filters.get("includeBlobVersions") is True
        wanted = READ_FIELDS + (RECOVER_VERSION_FIELDS if versions else ())
        missing = [f for f in wanted if f not in fields]
        if missing:
            problems.append(f"its schemaFields lack {', '.join(missing)}")
        if problems:
            raise InventoryConfigError(
                f"inventory rule of {name} cannot serve recover (it needs a rule like "
                f"{RECOVER_INVENTORY_RULE!r}, with the kept copies): {'; '.join(problems)}"
            )
        self.versions = versions


def projection(versions: bool) -> Projection:
    """Each report row of a protocol blob: name, length, deleted, days left, snapshot, and with
    versions the version id and whether it is current."""
    return Projection(
        READ_FIELDS + (RECOVER_VERSION_FIELDS if versions else ()),
        lambda table, container: _rows(table, container, versions),
    )


def _rows(table: Any, container: str, versions: bool) -> Any:
    import pyarrow as pa

    table, names = protocol_blobs(table, container)
    empty = pa.nulls(table.num_rows, pa.string())
    return pa.table(
        {
            "name": names,
            "length": table[CONTENT_LENGTH].cast(pa.int64()),
            "deleted": _flag(table[IS_DELETED]),
            "days": table[RETENTION_DAYS].cast(pa.int64()),
            "snapshot": table[SNAPSHOT_FIELD].cast(pa.string()),
            "version": table[VERSION_ID].cast(pa.string()) if versions else empty,
            "current": _flag(table[IS_CURRENT])
            if versions
            else pa.nulls(table.num_rows, pa.bool_()),
        }
    )


def _flag(column: Any) -> Any:
    """A boolean column, from booleans or from their text: the page names the fields without
    their Parquet types."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_boolean(column.type):
        return column
    return pc.equal(pc.utf8_lower(column.cast(pa.string())), "true")


@dataclass
class _Entry:
    """One name's rows in the report, as the nets would list them."""

    live: int | None = None
    """The live blob's length; None when the report shows none."""
    copies: list[KeptCopy] | None = None

    def nets(self) -> BlobNets:
        live = None if self.live is None else LiveBlob(self.live, "", None, "")
        return BlobNets(live, self.copies or [])


def report_nets(chunks: Iterable[Any]) -> Iterator[tuple[str, BlobNets]]:
    """(name, its live blob and kept copies as the report shows them) per name, in name order,
    from `sorted_chunks`' tables; a name's rows may span two tables and may repeat."""
    name: str | None = None
    entry = _Entry()
    for chunk in chunks:
        columns = [
            chunk[c].to_pylist()
            for c in ("name", "length", "deleted", "days", "snapshot", "version", "current")
        ]
        for row_name, length, deleted, days, snapshot, version, current in zip(
            *columns, strict=True
        ):
            if row_name != name:
                if name is not None:
                    yield name, entry.nets()
                name, entry = row_name, _Entry()
            copy = _copy(length, bool(deleted), days, snapshot, version, current)
            if copy is None:
                entry.live = length
            elif entry.copies is None:
                entry.copies = [copy]
            elif copy not in entry.copies:
                entry.copies.append(copy)
    if name is not None:
        yield name, entry.nets()


def _copy(
    length: int,
    deleted: bool,
    days: int | None,
    snapshot: str | None,
    version: str | None,
    current: bool | None,
) -> KeptCopy | None:
    """The kept copy a report row shows, or None for the live blob (as `nets._add` reads a
    listing's item)."""
    if snapshot:
        kind, ident = SNAPSHOT, snapshot
    elif version and not current:
        kind, ident = VERSION, version
    elif deleted:
        kind, ident = DELETED, ""
    else:
        return None
    return KeptCopy(kind, ident, length, None, days, deleted, None)


def candidate(nets: BlobNets, content: Content | None) -> bool:
    """Whether the report makes a row's blob look lost: missing, another length, or a kept copy
    of its name (the listing path's `judge` reads bytes only then, too)."""
    live = nets.live
    return live is None or content is None or live.length != content.length or bool(nets.copies)


def plan_from_report(
    store: DocumentStore,
    container: ContainerClient,
    chunks: Iterable[Any],
    verify_bytes: bool = False,
) -> list[RowPlan]:
    """A RowPlan for each Ready row the report makes a candidate and the live listing of its
    name judges lost, with the report's copies the service no longer keeps on it."""

    def decide(document: Document, content: Content | None, reported: BlobNets) -> RowPlan | None:
        if not (verify_bytes or candidate(reported, content)):
            return None
        name = document.blob_name
        live = read_nets(container, prefix=name).get(name, BlobNets())
        row = judge(container, document, content, live, verify_bytes)
        if row is not None:
            kept = {(c.kind, c.ident) for c in live.copies}
            row.gone = [_label(c) for c in reported.copies if (c.kind, c.ident) not in kept]
        return row

    return list(merge_by_name(rows_by_blob_name(store), report_nets(chunks), decide))


def _label(copy: KeptCopy) -> str:
    days = "" if copy.days_left is None else f", {copy.days_left} day(s) left in the report"
    return f"{copy.kind} {copy.ident}".strip() + days


def make_plan_from_inventory(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    rule: str,
    max_age: timedelta,
    *,
    verify_bytes: bool = False,
    horizon_days: int = 2,
    now: datetime | None = None,
) -> dict[str, Any]:
    """`plan.make_plan`'s plan, its candidates from the newest usable run of `rule` in
    `destination`. InventoryConfigError for a run of a rule that cannot serve recover,
    CorruptReportError for a report that cannot be read, InventoryError for no usable run."""
    if not container.exists():
        raise RepairRefusedError(
            f"container {container.container_name!r} does not exist: plan without --inventory, "
            "which finds a deleted container and restores it first"
        )
    when = now or datetime.now(UTC)
    check = RecoverRule()
    run = find_run(destination, rule, container.container_name, when, max_age, check)
    with tempfile.TemporaryDirectory(prefix="safetynet-recover-inventory-") as folder:
        work = Path(folder)
        chunks = sorted_chunks(
            download(destination, run, work),
            container.container_name,
            work,
            run.object_count,
            projection=projection(check.versions),
        )
        import pyarrow as pa

        try:
            rows = plan_from_report(store, container, chunks, verify_bytes)
        except pa.ArrowException as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise CorruptReportError(
                f"the inventory run {run.prefix} cannot be read as the rule's Parquet report: "
                f"{first}"
            ) from None
    target = Target.of(store, container)
    return build_plan(target, rows, None, horizon_days, when, _source(rule, run))


def _source(rule: str, run: InventoryRun) -> Mapping[str, Any]:
    return {
        "from": "inventory",
        "rule": rule,
        "run": run.prefix,
        "run_started_utc": run.started.isoformat(),
        "objects": run.object_count,
    }
