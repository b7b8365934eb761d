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
from typing import Any, Final

import sqlalchemy as sa
from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks import machine
from blob_safetynet.embedded.azurite import PROJECT_ROOT, Azurite
from blob_safetynet.reconcile.inventory import reconcile_inventory, table_chunks
from blob_safetynet.reconcile.inventory_report import sorted_chunks
from blob_safetynet.store.documents import DocumentStore
from testkit.inventory import report_schema
from testkit.scratch_db import admin_url_from_environment

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
TARGET_RSS_MIB: Final = 400
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


BENCH_DATABASE: Final = "safetynet_bench_inventory"
"""Kept between runs: one schema per size, filled once (a 10 M fill is minutes, not a run's)."""
FILLED: Final = "bench_filled"


def cached_table(size: int) -> str:
    """The URL of a schema whose documents table names the report's `size` blobs, filled now
    unless an earlier run filled it completely (its `bench_filled` row says so)."""
    admin_url = admin_url_from_environment()
    _ensure_database(admin_url)
    database_url = (
        sa.make_url(admin_url).set(database=BENCH_DATABASE).render_as_string(hide_password=False)
    )
    schema = f"inventory_{size}"
    url = (
        sa.make_url(database_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    engine = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            done = conn.execute(
                sa.text("SELECT to_regclass(:t) IS NOT NULL"), {"t": f"{schema}.{FILLED}"}
            ).scalar()
            if (
                done
                and conn.execute(sa.text(f"SELECT size FROM {schema}.{FILLED}")).scalar() == size
            ):
                upgrade_cached(url)
                return url
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    finally:
        engine.dispose()
    fill_table(url, size)
    return url


def upgrade_cached(url: str) -> None:
    """What `db upgrade` adds to a table filled by an earlier version (the byte-order index,
    built concurrently: 14 s at 10 M rows), so every run joins the table as the product has it."""
    store = DocumentStore.from_url(url)
    try:
        for change in store.upgrade_schema():
            print(f"inventory bench: added {change}", file=sys.stderr)
    finally:
        store.engine.dispose()


def _ensure_database(admin_url: str) -> None:
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if not conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": BENCH_DATABASE}
            ).scalar():
                conn.execute(sa.text(f'CREATE DATABASE "{BENCH_DATABASE}"'))
    finally:
        admin.dispose()


def fill_table(url: str, size: int) -> None:
    """`size` Ready rows naming the report's blobs, made on the server (generate_series) into
    the real schema's table with its indexes dropped, which are built again afterwards (one
    sort each instead of 10 M random inserts into four B-trees: minutes instead of 20)."""
    store = DocumentStore.from_url(url)
    store.init_schema()
    layout = store.layout
    table = f'"{layout.table}"'
    columns = ", ".join(
        f'"{c}"'
        for c in (layout.id, layout.name, layout.blob_name, layout.status, layout.created_utc)
    )
    with store.engine.begin() as conn:
        constraints = conn.execute(
            sa.text(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = CAST(:t AS regclass) AND contype IN ('p', 'u')"
            ),
            {"t": layout.table},
        ).all()
        indexes = conn.execute(
            sa.text(
                "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid "
                "WHERE x.indrelid = CAST(:t AS regclass) AND NOT EXISTS "
                "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)"
            ),
            {"t": layout.table},
        ).all()
        for name, _ in indexes:
            conn.execute(sa.text(f'DROP INDEX "{name}"'))
        for name, _ in constraints:
            conn.execute(sa.text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
        conn.execute(sa.text("SET LOCAL synchronous_commit = off"))
        conn.execute(sa.text("SET LOCAL maintenance_work_mem = '256MB'"))
        conn.execute(
            sa.text(
                f"INSERT INTO {table} ({columns}) "
                "SELECT md5('id' || n)::uuid::text, 'doc-' || n, md5(n::text) || '.bin', "
                "'Ready', now() - interval '1 day' FROM generate_series(0, :last) AS n"
            ),
            {"last": size - 1},
        )
        for name, definition in constraints:
            conn.execute(sa.text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'))
        for _, definition in indexes:
            conn.execute(sa.text(definition))
        conn.execute(sa.text(f"CREATE TABLE {FILLED} (size bigint NOT NULL)"))
        conn.execute(sa.text(f"INSERT INTO {FILLED} VALUES (:size)"), {"size": size})
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM ANALYZE {table}"))
    store.engine.dispose()


@dataclass(frozen=True)
class Join:
    size: int
    seconds: float
    rss_mib: float
    blobs: int
    findings: int
    cpu_seconds: float
    load: float
    """The 1-minute load average when the join ended (the machine is shared)."""

    @property
    def rate(self) -> float:
        return self.size / self.seconds


def measure_join(url: str, size: int, files: list[Path], baseline: bool = False) -> Join:
    """The join in a child process: its wall time, CPU time and peak RSS; with `baseline`, the
    previous join (`previous_join`)."""
    flag = ["--baseline"] if baseline else []
    command = [
        sys.executable,
        "-m",
        "benchmarks.inventory",
        "--child",
        *flag,
        url,
        *map(str, files),
    ]
    child = subprocess.run(  # noqa: S603 - this interpreter, this module
        command, check=True, capture_output=True, text=True, cwd=PROJECT_ROOT
    )
    figures = json.loads(child.stdout)
    return Join(
        size,
        figures["seconds"],
        figures["rss_kib"] / 1024,
        figures["blobs"],
        figures["findings"],
        figures["cpu"],
        os.getloadavg()[0],
    )


def previous_join() -> None:
    """Put back the join as it was before issue 35's third round: every COPY row read through
    psycopg's iterator, the merge's and the join's cuts found by scanning the whole slice, the
    state tag found with `map_lookup`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from blob_safetynet.reconcile import inventory, inventory_report

    def count_at_most(table: Any, bound: str) -> int:
        return int(pc.sum(pc.less_equal(table["name"], bound)).as_py() or 0)

    def count_below(table: Any, bound: str) -> int:
        return int(pc.sum(pc.less(table["name"], bound)).as_py() or 0)

    def unsealed(tags: Any) -> Any:
        states = pc.fill_null(pc.map_lookup(tags, "state", "first"), "")
        return pc.is_in(states, value_set=pa.array(["pending", "retired"]))

    def copy_rows(copy: Any, pgconn: Any) -> Any:
        return copy

    inventory_report._count_at_most = count_at_most
    inventory_report._count_below = count_below
    inventory._count_below = count_below  # type: ignore[attr-defined]
    inventory_report._unsealed = unsealed
    inventory.copy_rows = copy_rows


def child(url: str, files: list[str], baseline: bool) -> None:
    """Run one join and print its figures (the parent reads them)."""
    import resource

    if baseline:
        previous_join()
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
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_kib": usage.ru_maxrss,
                "blobs": result.blob_count,
                "findings": findings,
                "cpu": usage.ru_utime + usage.ru_stime,
            }
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


def _checks(joins: list[Join]) -> list[tuple[str, float, str, str]]:
    """Each target: its name, the measured value's verdict test, measured and its text."""
    small, large = joins[0], joins[-1]
    return [
        (
            f"peak RSS at {large.size:,} within {TARGET_FLAT}x of {small.size:,}",
            TARGET_FLAT - large.rss_mib / small.rss_mib,
            f"{large.rss_mib / small.rss_mib:.2f}x",
            "",
        ),
        (
            f"peak RSS at most {TARGET_RSS_MIB} MiB",
            TARGET_RSS_MIB - large.rss_mib,
            f"{large.rss_mib:.0f} MiB",
            "",
        ),
        (
            f"at least {TARGET_RATE:,} blobs/s joined",
            large.rate - TARGET_RATE,
            f"{large.rate:,.0f} blobs/s",
            "",
        ),
        (
            f"projected {PROJECTED:,} under {TARGET_100M_S // 60} min",
            TARGET_100M_S - PROJECTED / large.rate,
            f"{PROJECTED / large.rate / 60:.1f} min",
            "",
        ),
    ]


def render(joins: list[Join], baselines: list[Join], listed_per_s: float) -> str:
    large = joins[-1]
    projected = PROJECTED / large.rate
    listing = PROJECTED / listed_per_s
    rows = "\n".join(
        f"| {j.size:,} | {name} | {j.seconds:.1f} | {j.rate:,.0f} | {j.cpu_seconds:.1f} | "
        f"{j.size / j.cpu_seconds:,.0f} | {j.rss_mib:.0f} | {j.findings} | {j.load:.2f} |"
        for pair in zip(joins, baselines, strict=True)
        for name, j in zip(("this join", "previous join"), pair, strict=True)
    )
    verdicts = "\n".join(
        f"| {name} | {got} | {base} | {joins[-1].load:.2f} | {_verdict(margin >= 0)} |"
        for (name, margin, got, _), (_, _, base, _) in zip(
            _checks(joins), _checks(baselines), strict=True
        )
    )
    return f"""## Reconcile from Blob Inventory

Machine: {machine.describe()}. Command: `python -m benchmarks inventory` (sizes from
`SAFETYNET_BENCH_INVENTORY_SIZES`, default `1000000,10000000`). Synthetic Parquet reports
(testkit/inventory.py's schema, names in hash order, {FILE_ROWS:,} rows a file, cached under
build/bench-inventory/) joined with a PostgreSQL documents table of the same size (kept
between runs in database `{BENCH_DATABASE}`, one schema a size)
(`blob_safetynet.reconcile.inventory_report.sorted_chunks` + `reconcile_inventory`: sort in runs, spill, merge, stream
the table in `COLLATE "C"` order, join); each join in a child process, peak RSS its
`ru_maxrss`, CPU its user + system time. The previous join (before issue 35's third round:
every COPY row through psycopg's iterator, the cuts found by scanning whole slices, the state
tag by `map_lookup`; on the same indexed table, with the same spilling thread) runs in the same run as the baseline. Every blob is sealed and named, so no live call is made: the download of
the report from the account is not included. Load: the 1-minute load average when each join
ended, on 2 cores shared with other sessions: peak RSS does not depend on it, wall-clock rates
do (blobs per CPU second much less so). Listing: List Blobs with tags, 5,000 a page, from
Azurite on loopback ({LISTED_BLOBS:,} blobs), at {listed_per_s:,.0f} blobs/s.

| blobs | join | s | blobs/s | CPU s | blobs per CPU s | peak RSS MiB | findings | load |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
{rows}

| target | measured | baseline | load | verdict |
| --- | --- | --- | --- | --- |
{verdicts}

Listing {PROJECTED:,} blobs at the measured rate would take {listing / 3600:.1f} h on loopback
(Azure's round trips only add to that; pages are sequential, each needs the previous page's
marker), holding every name in memory; the inventory join projects to {projected / 60:.1f} min
at the {large.size:,}-blob rate.
"""


def run() -> str:
    CACHE.mkdir(parents=True, exist_ok=True)
    joins, baselines = [], []
    for size in SIZES:
        files = report(size)
        url = cached_table(size)
        for joined, baseline in ((baselines, True), (joins, False)):
            joined.append(measure_join(url, size, files, baseline=baseline))
            print(f"benchmarks.inventory: {joined[-1]}", file=sys.stderr)
    return render(joins, baselines, listing_rate())


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
    url = cached_table(size)
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
    if len(sys.argv) > 3 and sys.argv[1:3] == ["--child", "--baseline"]:
        child(sys.argv[3], sys.argv[4:], baseline=True)
    elif len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:], baseline=False)
    elif len(sys.argv) == 3 and sys.argv[1] == "--phases":
        print(phases(int(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "--report-alone":
        print(report_alone(int(sys.argv[2])))
    else:
        print(run())
