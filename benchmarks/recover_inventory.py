"""`safetynet recover`'s dry run from Blob Inventory against the listing, at a 1,000,000-row table.

The estate of `benchmarks.recover` (SQLite rows, the recovery double in a process of its own in
front of Azurite, 100 documents deleted behind the protocol and kept soft-deleted there), with no
added round trip. Timed, as `recover --write-plan` makes it: the listing path (`make_plan`: List
Blobs with include=deleted,snapshots,versions,tags merged with the table) and the inventory
path (`make_plan_from_inventory`: the recover rule's newest run found, its manifest checked, its
Parquet report downloaded, sorted and merged with the table; each of the 100 candidates listed
live under its name and judged) over the same container of SMALL intact documents, both in
this run; then the inventory path alone over a table and report of ROWS rows (the intact rows
only in the table and the report: the report says their blobs are there, so nothing reads
them, which is the point of the path). The report is written as the service writes a run
(testkit/inventory.py's layout and the recover rule's fields) into an Azurite container.
Both plans must find the same 100 rows. Runnable alone:
`python -m benchmarks recover_inventory` (`SAFETYNET_BENCH_RECOVER_INVENTORY_ROWS` sets ROWS,
`SAFETYNET_BENCH_RECOVER_INVENTORY_SMALL` the container listed).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks import machine
from benchmarks.recover import SIZE, blob_name, estate, ready_row
from blob_safetynet.embedded.azurite import Azurite, create_unique_container
from blob_safetynet.recover.inventory import make_plan_from_inventory
from blob_safetynet.recover.plan import make_plan
from blob_safetynet.settings.vocabulary import RECOVER_INVENTORY_RULE
from blob_safetynet.store.documents import DocumentStore
from testkit.inventory import recover_fields, recover_schema, recover_spec, upload_run

ROWS: Final = int(os.environ.get("SAFETYNET_BENCH_RECOVER_INVENTORY_ROWS", "1000000"))
SMALL: Final = int(os.environ.get("SAFETYNET_BENCH_RECOVER_INVENTORY_SMALL", "10000"))
LOST: Final = 100
FILE_ROWS: Final = 500_000
"""Rows a report file: a large run writes several files."""
INSERT_BATCH: Final = 50_000
PROJECTED: Final = 1_000_000
MAX_AGE: Final = timedelta(days=1)


@dataclass(frozen=True)
class Plan:
    label: str
    rows: int
    seconds: float
    lost: int

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


@dataclass(frozen=True)
class Measured:
    listing: Plan
    inventory_small: Plan
    inventory_large: Plan
    setup_s: float
    load: tuple[float, float]


def report_bytes(container: str, first: int, stop: int, lost: int) -> list[bytes]:
    """The recover rule's report of documents `first`..`stop`: the first `lost` deleted (a
    soft-deleted base blob each, 7 days left), the others live, in files of FILE_ROWS rows."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = recover_schema(False)
    now = datetime.now(UTC)
    files = []
    for start in range(first, stop, FILE_ROWS):
        end = min(start + FILE_ROWS, stop)
        count = end - start
        deleted = [n < lost for n in range(start, end)]
        columns = {
            "Name": pa.array([f"{container}/{blob_name(n)}" for n in range(start, end)]),
            "Last-Modified": pa.array([now] * count, pa.timestamp("ms", "UTC")),
            "Etag": pa.array([f"0x{n:X}" for n in range(start, end)]),
            "Content-Length": pa.array([SIZE] * count, pa.int64()),
            "Content-MD5": pa.nulls(count, pa.string()),
            "BlobType": pa.array(["BlockBlob"] * count),
            "Deleted": pa.array(deleted),
            "RemainingRetentionDays": pa.array([7 if d else None for d in deleted], pa.int64()),
            "Snapshot": pa.nulls(count, pa.string()),
        }
        buffer = io.BytesIO()
        pq.write_table(pa.table(columns, schema=schema), buffer)
        files.append(buffer.getvalue())
    return files


def write_report(
    container: ContainerClient, destination: ContainerClient, rows: int, lost: int
) -> None:
    datas = report_bytes(container.container_name, 0, rows, lost)
    fields = recover_fields(False)
    upload_run(container, destination, recover_spec(container, False), datas, rows, fields)


def add_rows(store: DocumentStore, first: int, stop: int) -> None:
    """Ready rows for documents `first`..`stop` (their blobs are never read: the report says
    they are there with the row's length)."""
    now = datetime.now(UTC)
    with store.engine.begin() as conn:
        for start in range(first, stop, INSERT_BATCH):
            conn.execute(
                store.table.insert(),
                [
                    ready_row(number, now, "0" * 64)
                    for number in range(start, min(start + INSERT_BATCH, stop))
                ],
            )


def timed(label: str, rows: int, work: Any) -> Plan:
    started = time.perf_counter()
    plan = work()
    return Plan(label, rows, time.perf_counter() - started, len(plan["rows"]))


def from_inventory(
    store: DocumentStore, container: ContainerClient, destination: ContainerClient
) -> dict[str, Any]:
    return make_plan_from_inventory(store, container, destination, RECOVER_INVENTORY_RULE, MAX_AGE)


def measure() -> Measured:
    load_before = os.getloadavg()[0]
    with Azurite() as azurite, tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir)
        direct = BlobServiceClient.from_connection_string(azurite.connection_string)
        small_total = LOST + SMALL
        with estate(azurite, folder, LOST, SMALL) as (store, container, _):
            destination = create_unique_container(direct, "inv")
            write_report(container, destination, small_total, LOST)
            listing = timed("listing", small_total, lambda: make_plan(store, container))
            inventory_small = timed(
                "inventory", small_total, lambda: from_inventory(store, container, destination)
            )
            destination.delete_container()
        with estate(azurite, folder, LOST) as (store, container, _):
            started = time.perf_counter()
            destination = create_unique_container(direct, "inv")
            add_rows(store, LOST, ROWS)
            write_report(container, destination, ROWS, LOST)
            setup = time.perf_counter() - started
            inventory_large = timed(
                "inventory", ROWS, lambda: from_inventory(store, container, destination)
            )
            destination.delete_container()
    return Measured(
        listing, inventory_small, inventory_large, setup, (load_before, os.getloadavg()[0])
    )


def render(m: Measured) -> str:
    def row(plan: Plan) -> str:
        return (
            f"| {plan.label} | {plan.rows:,} | {plan.seconds:.1f} s | {plan.rate:,.0f} | "
            f"{plan.lost} |"
        )

    found = {p.lost for p in (m.listing, m.inventory_small, m.inventory_large)}
    same = (
        "All three plans found the same"
        if found == {LOST}
        else f"The plans found {sorted(found)}, expected"
    )
    large = m.inventory_large
    measured_at = "measured" if large.rows >= PROJECTED else "projected from the measured rate"
    at_million = PROJECTED / large.rate
    listing_million = PROJECTED / m.listing.rate
    return f"""## Recover from Blob Inventory: the dry run against the listing

{__doc__.split(chr(10), 1)[1].strip()}

Command: `.venv/bin/python -m benchmarks recover_inventory`.

| candidates from | rows | dry run | rows/s | lost rows planned |
| --- | ---: | ---: | ---: | ---: |
{row(m.listing)}
{row(m.inventory_small)}
{row(large)}

{same} {LOST} lost rows. At 1,000,000 rows the inventory path's dry run takes
{at_million:.0f} s ({measured_at}; {large.rate:,.0f} rows/s: the report's download, sort and
spill, the table read in blob-name order a page of 1,000 at a time, and one live listing per
candidate); the listing path, at its rate here ({m.listing.rate:,.0f} rows/s, every name
listed with its kept copies), is projected to {listing_million / 60:.1f} min, and more at a
real round trip (the Recover section: one List Blobs page per 5,000 names, one after another).
The report is as old as its run (daily; `--inventory-max-age` refuses an older one): a loss
after the run is found by the next run or by the listing path. Setting up the large table and report took {m.setup_s:.0f} s (not timed above).
Load average (1 min) {m.load[0]:.1f} before and {m.load[1]:.1f} after the run. Measured on
{machine.describe()}."""


def run() -> str:
    return render(measure())
