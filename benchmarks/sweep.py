"""The sweeper against its baselines: cloud round trip, request count, table size, overhead.

Four comparisons, each with its baseline and the sweeper measured side by side in this run:

1. Through a loopback proxy adding 10 ms per request (the modeled cloud round trip), the
   sweeper vs a naive loop (one delete-if-exists per row, then one bulk row delete).
2. The blob-service requests the sweeper made in (1), counted by that proxy, by kind.
3. On PostgreSQL, the sweeper's database side with 1,000 stale rows among 1,000 and among
   1,000,000 Ready rows (the blob service is stubbed out so only the database is timed).
4. Directly against Azurite, the sweeper (SQLite) vs a raw batch-delete loop with no database.

Containers stay at 1,000 blobs: Azurite's in-memory delete cost grows with the blobs in its
container (about 270 deletes/s at 500 blobs, 20-60/s at 5,000), so a large container would
measure the emulator, not the sweeper.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import types
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks import machine
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.parsed import MAX_BLOB_BATCH, SweepSettings
from blob_safetynet.settings.vocabulary import PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import DocumentTable, Status
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from testkit.fault_proxy import LatencyProxy
from testkit.scratch_db import admin_url_from_environment, scratch_database

ROWS = 1_000
LARGE_TABLE = 1_000_000
PROXY_DELAY_S = 0.010
OVERHEAD_REPEATS = 5
DATABASE_REPEATS = 9
POSTGRES_ADMIN_URL = admin_url_from_environment()
SETTINGS = SweepSettings(cutoff=timedelta(minutes=15))
STALE_AGE = timedelta(hours=1)
"""Older than SETTINGS.cutoff, so every reserved row below is stale for the sweeper."""

TARGET_SPEEDUP = 5.0
TARGET_REQUESTS = 8
TARGET_FLATNESS = 1.2
TARGET_OVERHEAD = 0.70


@dataclass
class Figure:
    """One comparison as a table row: baseline, candidate, ratio, target, verdict."""

    comparison: str
    baseline: str
    candidate: str
    ratio: str
    target: str
    passed: bool | None
    """None: not measured (the details say why)."""
    why: str = ""
    """For a MISS: what the measurement says about the reason."""

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "MISS", None: "NOT RUN"}[self.passed]


@dataclass
class Section:
    figures: list[Figure] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


# Set-up: stale reservations (a Pending row and its pending-tagged blob), not measured.


def _new_container(service: BlobServiceClient) -> ContainerClient:
    return service.create_container(f"bench{uuid.uuid4().hex[:20]}")


def _upload_pending(container: ContainerClient, count: int) -> list[str]:
    """`count` small blobs tagged pending, as a crashed upload leaves them."""
    names = [f"{uuid.uuid4().hex}.bin" for _ in range(count)]

    def upload(name: str) -> None:
        container.upload_blob(name, b"x", tags={STATE_TAG: PENDING})

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(upload, names))
    return names


def _reserve_stale(store: DocumentStore, blob_names: Sequence[str]) -> None:
    """Pending rows for `blob_names`, inserted in one statement rather than via the protocol."""
    created = datetime.now(UTC) - STALE_AGE
    rows = [
        {
            "id": str(uuid.uuid4()),
            "name": f"stale/{blob}",
            "blob_name": blob,
            "status": Status.PENDING.value,
            "created": created + timedelta(milliseconds=i),
        }
        for i, blob in enumerate(blob_names)
    ]
    with store.engine.begin() as conn:
        conn.execute(store.table.insert(), rows)


def _sqlite_store(directory: Path) -> DocumentStore:
    store = DocumentStore.from_url(f"sqlite:///{directory / f'{uuid.uuid4().hex}.db'}")
    store.init_schema()
    return store


def _remaining(store: DocumentStore, container: ContainerClient) -> tuple[int, int]:
    """(rows, blobs) left after a run, read directly: proof that a timed run did the work."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(store.table)).scalar_one()
    # The sweeper's own marker blobs (its lease, its database binding) are not documents.
    blobs = sum(1 for b in container.list_blobs() if not b.name.startswith(".safetynet/"))
    return int(rows), blobs


def _progress(message: str) -> None:
    """`make bench` takes minutes: say what runs now."""
    print(f"benchmarks.sweep: {message}", file=sys.stderr, flush=True)


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


# The baselines.


def naive_sweep(store: DocumentStore, container: ContainerClient) -> None:
    """Seed 000: delete-if-exists for each stale row in turn, then one bulk row delete."""
    c = store.table.c
    cutoff = datetime.now(UTC) - SETTINGS.cutoff
    with store.engine.begin() as conn:
        rows = conn.execute(
            sa.select(c.id, c.blob_name).where(c.status == Status.PENDING.value, c.created < cutoff)
        ).all()
    for row in rows:
        with suppress(ResourceNotFoundError):
            container.get_blob_client(row.blob_name).delete_blob(delete_snapshots="include")
    with store.engine.begin() as conn:
        conn.execute(store.table.delete().where(c.id.in_([row.id for row in rows])))


def raw_batch_delete(container: ContainerClient, names: Sequence[str]) -> None:
    """The ceiling: Blob Batch deletes at the sweeper's batch size and concurrency, no DB."""
    batches = [names[i : i + MAX_BLOB_BATCH] for i in range(0, len(names), MAX_BLOB_BATCH)]

    def send(batch: Sequence[str]) -> None:
        # Snapshots included as the sweeper does: without it Azurite first counts the blob's
        # snapshots, an extra scan per delete that would flatter the sweeper.
        list(container.delete_blobs(*batch, delete_snapshots="include", raise_on_any_failure=False))

    with ThreadPoolExecutor(SETTINGS.concurrency) as pool:
        list(pool.map(send, batches))


def _sweep(store: DocumentStore, container: ContainerClient) -> SweepReport:
    return Sweeper(store, container, SETTINGS).run()


# 1 and 2: the modeled cloud round trip, and the requests it costs.


def _azurite_cpu(port: int) -> Callable[[], float]:
    """A reader of the emulator's CPU seconds so far (user + system), found by its port.

    Azurite is a single Node process: its CPU time during a run is the emulator's own cost,
    the part of the wall time that a real storage account would not add."""
    marker = f"--blobPort\0{port}\0".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                stat = cmdline.with_name("stat")
                break
        except OSError:
            continue
    else:
        return lambda: float("nan")
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


@dataclass
class _Run:
    seconds: float
    emulator_cpu_s: float
    client_cpu_s: float
    counts: Counter[str]
    left: tuple[int, int]


def _cloud_round_trip(azurite: Azurite, direct: BlobServiceClient, workdir: Path) -> Section:
    section = Section()
    emulator_cpu = _azurite_cpu(azurite.port)
    runs: dict[str, _Run] = {}
    with LatencyProxy(azurite.port, PROXY_DELAY_S) as proxy:
        proxied = BlobServiceClient.from_connection_string(proxy.connection_string)
        for label, action in (("naive", naive_sweep), ("sweeper", _sweep)):
            _progress(f"round trip: {label}")
            container = _new_container(direct)
            store = _sqlite_store(workdir)
            _reserve_stale(store, _upload_pending(container, ROWS))
            through_proxy = proxied.get_container_client(container.container_name)
            proxy.reset()
            cpu_before, own_before = emulator_cpu(), time.process_time()
            elapsed = _timed(partial(action, store, through_proxy))
            runs[label] = _Run(
                elapsed,
                emulator_cpu() - cpu_before,
                time.process_time() - own_before,
                proxy.counts(),
                _remaining(store, container),
            )
            container.delete_container()
    naive, swept = runs["naive"], runs["sweeper"]
    speedup = naive.seconds / swept.seconds
    section.figures.append(
        Figure(
            f"sweep {ROWS:,} stale rows through a {PROXY_DELAY_S * 1000:.0f} ms proxy",
            f"naive loop {naive.seconds:.2f} s",
            f"{swept.seconds:.2f} s",
            f"{speedup:.1f}x faster",
            f">= {TARGET_SPEEDUP:.0f}x faster",
            speedup >= TARGET_SPEEDUP,
            why=(
                f"Azurite itself spent {swept.emulator_cpu_s:.2f} s of CPU during the sweeper's "
                f"{swept.seconds:.2f} s run ({naive.emulator_cpu_s:.2f} s during the naive "
                f"loop's {naive.seconds:.2f} s), and this process (client and proxy threads) "
                f"{swept.client_cpu_s:.2f} s ({naive.client_cpu_s:.2f} s), both measured from "
                "their processes' CPU counters. The emulator's per-delete cost (see below), not "
                "the modeled round trips, sets the sweeper's time."
            ),
        )
    )
    naive_total, requests = sum(naive.counts.values()), sum(swept.counts.values())
    lists = swept.counts.get("GET comp=list", 0)
    section.figures.append(
        Figure(
            f"blob-service requests per {ROWS:,} swept rows",
            f"naive loop {naive_total:,}",
            f"{requests} (List Blobs: {lists})",
            f"{naive_total / requests:.0f}x fewer",
            f"<= {TARGET_REQUESTS}, no List Blobs",
            requests <= TARGET_REQUESTS and lists == 0,
        )
    )
    kinds = sorted(set(naive.counts) | set(swept.counts))
    section.details += [
        f"### Cloud round trip and request count ({ROWS:,} stale rows)",
        "",
        "A threaded loopback proxy (`testkit/fault_proxy.py`) sleeps "
        f"{PROXY_DELAY_S * 1000:.0f} ms before forwarding each request to Azurite, as a round "
        "trip from an Azure Function to storage would cost, and counts requests by method and "
        "`comp=` (List Blobs is `GET comp=list`, Blob Batch `POST comp=batch`). Both runs use "
        f"a SQLite database, {ROWS:,} Pending rows older than the cutoff and their "
        f"`{STATE_TAG}={PENDING}` blobs in a fresh container; every blob-service request of "
        "the timed run goes through the proxy. The naive loop is the cleanup a script would write first: one "
        "delete-if-exists per row in turn, then one bulk row delete. The sweeper runs with its "
        f"defaults ({SETTINGS.batch_size} deletes per Blob Batch, {SETTINGS.concurrency} "
        f"batches in flight, one claim query per {SETTINGS.chunk_size:,} rows).",
        "",
        "| | naive loop | sweeper |",
        "| --- | ---: | ---: |",
        *(
            f"| `{k}` requests | {naive.counts.get(k, 0):,} | {swept.counts.get(k, 0):,} |"
            for k in kinds
        ),
        f"| requests in total | {naive_total:,} | {requests:,} |",
        f"| wall time | {naive.seconds:.2f} s | {swept.seconds:.2f} s |",
        f"| Azurite CPU time during the run | {naive.emulator_cpu_s:.2f} s "
        f"| {swept.emulator_cpu_s:.2f} s |",
        f"| this process's CPU time (client, proxy) | {naive.client_cpu_s:.2f} s "
        f"| {swept.client_cpu_s:.2f} s |",
        f"| rows, blobs left afterwards | {naive.left} | {swept.left} |",
        "",
        "Azurite is one single-threaded Node process whose in-memory delete cost grows with "
        "the blobs it holds, so it spends milliseconds of CPU per delete whether the deletes "
        "arrive one by one or in a batch, and on this 2-core machine it shares the cores with "
        "the client. That cost belongs to the emulator, not to the protocol: the proxy models "
        f"the round trips, and those are what the sweeper removes ({requests} requests instead "
        f"of {naive_total:,}). "
        "The CPU rows are measured, each from its own process's counters; CPU time is not "
        "subtracted from wall time, because on 2 shared cores the processes overlap and wait "
        "on each other and on the modeled round trips.",
        "",
    ]
    return section


# 4: the sweeper's overhead over raw batch deletes, no added latency.


def _overhead(direct: BlobServiceClient, workdir: Path) -> Section:
    section = Section()
    times: dict[str, list[float]] = {"raw": [], "sweeper": []}
    left: list[tuple[int, int]] = []
    for repeat in range(OVERHEAD_REPEATS):
        # Alternate the order so neither side always runs on a warmer emulator.
        order = ("raw", "sweeper") if repeat % 2 == 0 else ("sweeper", "raw")
        for label in order:
            _progress(f"overhead: {label}, repeat {repeat + 1} of {OVERHEAD_REPEATS}")
            container = _new_container(direct)
            names = _upload_pending(container, ROWS)
            if label == "raw":
                times["raw"].append(_timed(partial(raw_batch_delete, container, names)))
            else:
                store = _sqlite_store(workdir)
                _reserve_stale(store, names)
                times["sweeper"].append(_timed(partial(_sweep, store, container)))
                left.append(_remaining(store, container))
            container.delete_container()
    raw_rate = ROWS / statistics.median(times["raw"])
    sweep_rate = ROWS / statistics.median(times["sweeper"])
    share = sweep_rate / raw_rate
    section.figures.append(
        Figure(
            f"overhead: {ROWS:,} blobs straight to Azurite, no added latency",
            f"raw batch loop {raw_rate:,.0f} blobs/s",
            f"{sweep_rate:,.0f} blobs/s",
            f"{share:.0%} of raw",
            f">= {TARGET_OVERHEAD:.0%} of raw",
            share >= TARGET_OVERHEAD,
        )
    )
    section.details += [
        f"### Overhead ({ROWS:,} blobs, {OVERHEAD_REPEATS} repeats, median)",
        "",
        f"The raw loop sends `delete_blobs` in batches of {MAX_BLOB_BATCH} from "
        f"{SETTINGS.concurrency} threads (snapshots included, as the sweeper asks) with no "
        "database and no tag condition; the sweeper does the same work plus its claim query, "
        "the tag guard on every delete and the row deletes (SQLite file). Fresh container of "
        f"{ROWS:,} pending-tagged blobs for every run, order alternated between repeats.",
        "",
        f"- raw: {', '.join(f'{t:.2f} s' for t in times['raw'])}",
        f"- sweeper: {', '.join(f'{t:.2f} s' for t in times['sweeper'])}"
        f" (rows, blobs left: {', '.join(map(str, left))})",
        "",
    ]
    return section


# 3: the database side on PostgreSQL, small table vs large table.


class _NoBlobService:
    """Stands in for the container so only the sweeper's database side is timed: every
    tag-guarded delete answers 202 at once, as if the blob service cost nothing."""

    class _Accepted:
        status_code = 202
        headers: dict[str, str] = {}  # noqa: RUF012 - never mutated

    account_name = "no-blob-service"
    container_name = "no-blob-service"

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}

    def get_container_properties(self) -> None:
        return None

    # The sweeper's container-to-database binding marker, kept in memory.
    def get_blob_client(self, name: str) -> _NoBlobService:
        return self

    def get_blob_properties(self) -> Any:
        if not self.metadata:
            raise ResourceNotFoundError("no binding marker yet")
        return types.SimpleNamespace(metadata=self.metadata, etag="marker")

    def get_blob_tags(self) -> dict[str, str]:
        """Every blob is there and pending: what a first sweep's binding evidence reads."""
        return {STATE_TAG: PENDING}

    def upload_blob(self, data: bytes, **options: Any) -> None:
        self.metadata = dict(options.get("metadata") or {})

    def delete_blobs(self, *blobs: object, **_: Any) -> Iterator[_NoBlobService._Accepted]:
        return iter([self._Accepted()] * len(blobs))


def _fill_ready(store: DocumentStore, count: int) -> None:
    """`count` Ready rows generated inside PostgreSQL: a million in seconds, not minutes.

    They are all older than the cutoff, so only the status column of the (status, created)
    index separates them from stale rows: the hardest case for the claim query."""
    c = store.table.c
    g = sa.func.generate_series(1, count).column_valued("g")
    key = sa.literal("ready-") + sa.cast(g, sa.Text)
    rows = sa.select(
        key,
        key,
        key + ".bin",
        sa.literal(Status.READY.value),
        sa.func.now() - STALE_AGE - sa.func.make_interval(0, 0, 0, 0, 0, 0, g),
    )
    with store.engine.begin() as conn:
        conn.execute(
            store.table.insert().from_select([c.id, c.name, c.blob_name, c.status, c.created], rows)
        )


def _vacuum(store: DocumentStore) -> None:
    """Clear the previous repeat's dead rows so every repeat starts from the same table."""
    table = store.engine.dialect.identifier_preparer.format_table(store.table)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"VACUUM ANALYZE {table}")


def _claim_plan(store: DocumentStore) -> str:
    """EXPLAIN ANALYZE of the exact claim statement the sweeper sends, caught on the wire."""
    caught: list[tuple[str, Any]] = []

    def catch(_c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FOR UPDATE" in statement and not caught:
            caught.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", catch)
    try:
        _sweep(store, cast(ContainerClient, _NoBlobService()))
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", catch)
    statement, parameters = caught[0]
    # That sweep emptied the stale rows; put them back so the plan shows a real claim.
    _reserve_stale(store, [f"{uuid.uuid4().hex}.bin" for _ in range(ROWS)])
    _vacuum(store)
    with store.engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF) {statement}", parameters
        ).scalars()
        text = "\n".join(plan)
        conn.rollback()
    return text


def _database_flatness() -> Section:
    section = Section()
    try:
        with scratch_database(POSTGRES_ADMIN_URL, prefix="safetynet_bench") as url:
            return _measure_flatness(url)
    except sa.exc.OperationalError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        section.figures.append(
            Figure(
                f"database side: {ROWS:,} stale among {ROWS:,} vs {LARGE_TABLE:,} Ready rows",
                "-",
                "-",
                "-",
                f"<= {TARGET_FLATNESS}x slower",
                None,
            )
        )
        section.details += [
            "### Database cost vs table size",
            "",
            f"Not run: PostgreSQL at {sa.make_url(POSTGRES_ADMIN_URL).render_as_string()} "
            f"is unreachable ({reason}). Set SAFETYNET_TEST_POSTGRES_URL.",
            "",
        ]
        return section


def _measure_flatness(url: str) -> Section:
    section = Section()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            version = conn.execute(sa.text("SHOW server_version")).scalar_one()
            for schema in ("small", "large"):
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        stores = {
            size: DocumentStore(engine, DocumentTable(schema=schema))
            for size, schema in ((ROWS, "small"), (LARGE_TABLE, "large"))
        }
        fill_s = 0.0
        _progress(f"database: filling {LARGE_TABLE:,} Ready rows")
        for size, store in stores.items():
            store.init_schema()
            fill_s += _timed(partial(_fill_ready, store, size))
        # One stand-in per table: each is bound to its own database, as a real container is.
        no_blobs = {size: cast(ContainerClient, _NoBlobService()) for size in stores}
        times: dict[int, list[float]] = {size: [] for size in stores}
        # One unrecorded warm-up per table, then interleaved repeats so drift hits both.
        _progress(f"database: {DATABASE_REPEATS} repeats")
        for repeat in range(DATABASE_REPEATS + 1):
            for size, store in stores.items():
                _reserve_stale(store, [f"{uuid.uuid4().hex}.bin" for _ in range(ROWS)])
                _vacuum(store)
                start = time.perf_counter()
                report = _sweep(store, no_blobs[size])
                elapsed = time.perf_counter() - start
                if report.deleted_rows != ROWS:
                    raise RuntimeError(f"database benchmark swept {report.deleted_rows} rows")
                if repeat:
                    times[size].append(elapsed)
        plan = _claim_plan(stores[LARGE_TABLE])
    finally:
        engine.dispose()
    small_s = statistics.median(times[ROWS])
    large_s = statistics.median(times[LARGE_TABLE])
    ratio = large_s / small_s
    section.figures.append(
        Figure(
            f"database side: {ROWS:,} stale among {ROWS:,} vs {LARGE_TABLE:,} Ready rows",
            f"{small_s * 1000:.0f} ms among {ROWS:,}",
            f"{large_s * 1000:.0f} ms among {LARGE_TABLE:,}",
            f"{ratio:.2f}x",
            f"<= {TARGET_FLATNESS}x slower",
            ratio <= TARGET_FLATNESS,
        )
    )
    section.details += [
        f"### Database cost vs table size (PostgreSQL {version}, {DATABASE_REPEATS} repeats, median)",
        "",
        "A scratch database (created and dropped by the run) holds two tables: "
        f"{ROWS:,} and {LARGE_TABLE:,} Ready rows (filled with `generate_series` in "
        f"{fill_s:.0f} s, all older than the cutoff). Each repeat adds {ROWS:,} stale Pending "
        "rows, runs VACUUM ANALYZE (not timed) and times a full sweep: the claim queries and "
        "row deletes the sweeper sends, with the blob service replaced by a stub that accepts "
        "every delete at once, so only the database is measured. One warm-up per table, then "
        "the repeats alternate between the tables.",
        "",
        f"- among {ROWS:,}: {', '.join(f'{t * 1000:.0f}' for t in times[ROWS])} ms",
        f"- among {LARGE_TABLE:,}: {', '.join(f'{t * 1000:.0f}' for t in times[LARGE_TABLE])} ms",
        "",
        f"The sweeper's first claim statement on the {LARGE_TABLE:,}-row table, as sent "
        "(EXPLAIN ANALYZE, rolled back): the (status, created) index finds the stale rows "
        "without touching the Ready ones.",
        "",
        "```text",
        plan,
        "```",
        "",
    ]
    return section


def run() -> str:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="safetynet-bench-") as tmp, Azurite() as azurite:
        direct = BlobServiceClient.from_connection_string(azurite.connection_string)
        cloud = _cloud_round_trip(azurite, direct, Path(tmp))
        overhead = _overhead(direct, Path(tmp))
    database = _database_flatness()
    sections = (cloud, database, overhead)
    figures = [f for s in sections for f in s.figures]
    lines = [
        "## Sweeper",
        "",
        f"`make bench` (this section alone: `python -m benchmarks sweep`, "
        f"{time.perf_counter() - start:.0f} s) on {machine.describe()}.",
        "",
        "| comparison | baseline | sweeper | ratio | target | result |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {f.comparison} | {f.baseline} | {f.candidate} | {f.ratio} | {f.target} "
            f"| {f.verdict} |"
            for f in figures
        ),
        "",
        *(
            f"{f.verdict} on *{f.comparison}*: {f.why}\n"
            for f in figures
            if f.passed is False and f.why
        ),
        f"Why the containers hold only {ROWS:,} blobs: Azurite keeps blobs in memory and its "
        "delete cost grows with the number of blobs in the container (about 270 deletes/s at "
        "500 blobs, 20-60/s at 5,000, single, batched or concurrent alike), so a big container "
        "would time the emulator rather than the sweeper. The sweeper's own cost does not "
        "depend on the container at all (it never lists it); the table-size comparison shows "
        "the database side is flat too.",
        "",
    ]
    for section in sections:
        lines += section.details
    return "\n".join(lines)
