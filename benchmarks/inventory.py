"""Reconcile at scale: the inventory join at 1 M and 10 M blobs against the listing's rate.

`python -m benchmarks inventory` (`make bench` runs it with the rest). Synthetic Blob Inventory
reports (Parquet in the schema of testkit/inventory.py, names in hash order, i.e. no order) are
written once and cached under build/bench-inventory/; each size gets a scratch PostgreSQL
database whose documents table names the same blobs (all Ready and sealed, so the join finds
nothing and makes no live call: what is timed is the sort, the spill, the merge, the table's
server-side cursor and the join). Each join runs in a child process of its own, whose peak RSS
(`ru_maxrss`) is the figure. The listing's rate is measured on Azurite (List Blobs with tags,
5,000 a page) and the listing path's time at 100 M extrapolated from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import sqlalchemy as sa
from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks import machine
from blob_safetynet.embedded.azurite import PROJECT_ROOT, Azurite
from blob_safetynet.reconcile.inventory import reconcile_inventory, table_chunks
from blob_safetynet.reconcile.inventory_report import sorted_chunks
from blob_safetynet.store.documents import DocumentStore
from testkit.inventory import report_schema
from testkit.scratch_db import admin_url_from_environment, scratch_database

SIZES: Final = tuple(
    int(s) for s in os.environ.get("SAFETYNET_BENCH_INVENTORY_SIZES", "1000000,10000000").split(",")
)
CACHE: Final = PROJECT_ROOT / "build" / "bench-inventory"
CONTAINER: Final = "documents"
FILE_ROWS: Final = 2_000_000
"""Rows per Parquet file: a 10 M report is five files, as a large run writes several."""
CHUNK: Final = 250_000
LISTED_BLOBS: Final = 10_000
TARGET_FLAT: Final = 1.2
TARGET_RSS_MIB: Final = 512
TARGET_RATE: Final = 500_000
TARGET_100M_S: Final = 600
PROJECTED: Final = 100_000_000


def blob_name(number: int) -> str:
    return hashlib.md5(str(number).encode(), usedforsecurity=False).hexdigest() + ".bin"


def report(size: int) -> list[Path]:
    """The cached synthetic report of `size` blobs, written now if missing."""
    folder = CACHE / str(size)
    done = folder / "complete"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for start in range(0, size, FILE_ROWS):
            _write_file(
                folder / f"report-{start // FILE_ROWS}.parquet", start, min(size, start + FILE_ROWS)
            )
        done.write_text(str(size))
    return sorted(folder.glob("report-*.parquet"))


def _write_file(path: Path, start: int, stop: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = report_schema()
    modified = datetime(2026, 1, 1, tzinfo=UTC)
    with pq.ParquetWriter(path, schema) as writer:
        for first in range(start, stop, CHUNK):
            numbers = range(first, min(stop, first + CHUNK))
            rows = len(numbers)
            writer.write_table(
                pa.table(
                    {
                        "Name": [f"{CONTAINER}/{blob_name(n)}" for n in numbers],
                        "Creation-Time": pa.array([modified] * rows, pa.timestamp("ms", "UTC")),
                        "Last-Modified": pa.array([modified] * rows, pa.timestamp("ms", "UTC")),
                        "Etag": [f"0x8DE{n:013X}" for n in numbers],
                        "Content-Length": pa.array([1024] * rows, pa.int64()),
                        "BlobType": ["BlockBlob"] * rows,
                        "Tags": pa.array(
                            [[("state", "committed")]] * rows, schema.field("Tags").type
                        ),
                    },
                    schema=schema,
                )
            )


def fill_table(url: str, size: int) -> None:
    """`size` Ready rows naming the report's blobs, made on the server (generate_series)."""
    store = DocumentStore.from_url(url)
    store.init_schema()
    layout = store.layout
    columns = ", ".join(
        f'"{c}"'
        for c in (layout.id, layout.name, layout.blob_name, layout.status, layout.created_utc)
    )
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                f'INSERT INTO "{layout.table}" ({columns}) '
                "SELECT md5('id' || n)::uuid::text, 'doc-' || n, md5(n::text) || '.bin', "
                "'Ready', now() - interval '1 day' FROM generate_series(0, :last) AS n"
            ),
            {"last": size - 1},
        )
        conn.execute(sa.text(f'ANALYZE "{layout.table}"'))
    store.engine.dispose()


@dataclass(frozen=True)
class Join:
    size: int
    seconds: float
    rss_mib: float
    blobs: int
    findings: int

    @property
    def rate(self) -> float:
        return self.size / self.seconds


def measure_join(url: str, size: int, files: list[Path]) -> Join:
    """The join in a child process: its wall time and peak RSS."""
    command = [sys.executable, "-m", "benchmarks.inventory", "--child", url, *map(str, files)]
    child = subprocess.run(  # noqa: S603 - this interpreter, this module
        command, check=True, capture_output=True, text=True, cwd=PROJECT_ROOT
    )
    figures = json.loads(child.stdout)
    return Join(
        size, figures["seconds"], figures["rss_kib"] / 1024, figures["blobs"], figures["findings"]
    )


def child(url: str, files: list[str]) -> None:
    """Run one join and print its figures (the parent reads them)."""
    import resource

    store = DocumentStore.from_url(url)
    # Never called: every blob is sealed and named, so nothing is re-read live.
    container = ContainerClient("https://unused.invalid", CONTAINER)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-inventory-", dir=CACHE) as spill:
        chunks = sorted_chunks([Path(f) for f in files], CONTAINER, Path(spill))
        result = reconcile_inventory(
            store, container, chunks, datetime.now(UTC) - timedelta(minutes=15)
        )
    seconds = time.perf_counter() - started
    findings = len(result.orphans) + len(result.dangling) + len(result.unsealed)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {"seconds": seconds, "rss_kib": rss, "blobs": result.blob_count, "findings": findings}
        )
    )


def listing_rate() -> float:
    """Blobs per second that List Blobs (with tags) returns from Azurite, 5,000 a page."""
    from concurrent.futures import ThreadPoolExecutor

    with Azurite() as azurite:
        service = BlobServiceClient.from_connection_string(azurite.connection_string)
        container = service.create_container(f"bench{uuid.uuid4().hex[:8]}")
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: container.upload_blob(
                        blob_name(n), b"x", tags={"state": "committed"}
                    ),
                    range(LISTED_BLOBS),
                )
            )
        started = time.perf_counter()
        listed = sum(1 for _ in container.list_blobs(include=["tags"], results_per_page=5000))
        seconds = time.perf_counter() - started
    return listed / seconds


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def render(joins: list[Join], listed_per_s: float) -> str:
    small, large = joins[0], joins[-1]
    flat = large.rss_mib / small.rss_mib
    rate = large.rate
    projected = PROJECTED / rate
    listing = PROJECTED / listed_per_s
    rows = "\n".join(
        f"| {j.size:,} | {j.seconds:.1f} | {j.rate:,.0f} | {j.rss_mib:.0f} | {j.findings} |"
        for j in joins
    )
    checks: list[tuple[str, bool, str]] = [
        (
            f"peak RSS at {large.size:,} within {TARGET_FLAT}x of {small.size:,}",
            flat <= TARGET_FLAT,
            f"{flat:.2f}x",
        ),
        (
            f"peak RSS at most {TARGET_RSS_MIB} MiB",
            large.rss_mib <= TARGET_RSS_MIB,
            f"{large.rss_mib:.0f} MiB",
        ),
        (f"at least {TARGET_RATE:,} blobs/s joined", rate >= TARGET_RATE, f"{rate:,.0f} blobs/s"),
        (
            f"projected {PROJECTED:,} under {TARGET_100M_S // 60} min",
            projected <= TARGET_100M_S,
            f"{projected / 60:.1f} min",
        ),
    ]
    verdicts = "\n".join(f"| {name} | {got} | {_verdict(ok)} |" for name, ok, got in checks)
    return f"""## Reconcile from Blob Inventory

Machine: {machine.describe()}. Command: `python -m benchmarks inventory` (sizes from
`SAFETYNET_BENCH_INVENTORY_SIZES`, default `1000000,10000000`). Synthetic Parquet reports
(testkit/inventory.py's schema, names in hash order, {FILE_ROWS:,} rows a file, cached under
build/bench-inventory/) joined with a PostgreSQL documents table of the same size
(`blob_safetynet.reconcile.inventory_report.sorted_chunks` + `reconcile_inventory`: sort in runs, spill, merge, stream
the table in `COLLATE "C"` order, join); each join in a child process, peak RSS its
`ru_maxrss`. Every blob is sealed and named, so no live call is made: the download of the
report from the account is not included. Listing: List Blobs with tags, 5,000 a page, from
Azurite on loopback ({LISTED_BLOBS:,} blobs), at {listed_per_s:,.0f} blobs/s.

| blobs | join s | blobs/s | peak RSS MiB | findings |
| --- | --- | --- | --- | --- |
{rows}

| target | measured | verdict |
| --- | --- | --- |
{verdicts}

Listing {PROJECTED:,} blobs at the measured rate would take {listing / 3600:.1f} h on loopback
(Azure's round trips only add to that; pages are sequential, each needs the previous page's
marker), holding every name in memory; the inventory join projects to {projected / 60:.1f} min
at the {large.size:,}-blob rate.
"""


def run() -> str:
    CACHE.mkdir(parents=True, exist_ok=True)
    joins = []
    for size in SIZES:
        files = report(size)
        with scratch_database(admin_url_from_environment(), prefix="safetynet_bench") as url:
            fill_table(url, size)
            joins.append(measure_join(url, size, files))
    return render(joins, listing_rate())


def report_alone(size: int) -> str:
    """The report side alone (sort, spill, merge), its time and this process's peak RSS."""
    import resource

    files = report(size)
    with tempfile.TemporaryDirectory(prefix="bench-inventory-", dir=CACHE) as spill:
        started = time.perf_counter()
        blobs = sum(c.num_rows for c in sorted_chunks(files, CONTAINER, Path(spill)))
        seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return f"{blobs:,} report rows sorted and merged in {seconds:.1f} s, peak RSS {rss} MiB"


def phases(size: int) -> str:
    """Each side of the join alone, then the whole join, at one size (not in `make bench`)."""
    files = report(size)
    with scratch_database(admin_url_from_environment(), prefix="safetynet_bench") as url:
        fill_table(url, size)
        store = DocumentStore.from_url(url)
        started = time.perf_counter()
        rows = sum(chunk.num_rows for chunk in table_chunks(store))
        table_s = time.perf_counter() - started
        store.engine.dispose()
        with tempfile.TemporaryDirectory(prefix="bench-inventory-", dir=CACHE) as spill:
            started = time.perf_counter()
            blobs = sum(c.num_rows for c in sorted_chunks(files, CONTAINER, Path(spill)))
            report_s = time.perf_counter() - started
        join = measure_join(url, size, files)
    return (
        f"{size:,} blobs: table stream {rows:,} rows in {table_s:.1f} s; report sort and merge "
        f"{blobs:,} rows in {report_s:.1f} s; whole join {join.seconds:.1f} s, {join.rss_mib:.0f} MiB"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "--phases":
        print(phases(int(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "--report-alone":
        print(report_alone(int(sys.argv[2])))
    else:
        print(run())
