"""Reconcile from Azure Blob Inventory: the service's daily report replaces the container listing.

The run itself, its manifest and the sorted reading of its rows are in
`blob_safetynet.reconcile.inventory_report`.

The report is read with pyarrow rather than DuckDB: the join needs the rows in blob-name order
and nothing else, which pyarrow does in bounded memory (sorted runs of at most RUN_ROWS rows
spilled to Arrow IPC files, then merged) with one dependency and no SQL engine to tune; DuckDB
would sort too, but as a second database next to the documents table. pyarrow is the optional
extra `inventory`, imported only here and only when a report is read.

The documents table and the crash-window records are streamed in the same order (byte order:
`COLLATE "C"` on PostgreSQL) and merge-joined with the report a window at a time with Arrow's
vectorized kernels, so memory stays flat whatever the container holds. PostgreSQL streams the
ordered query through `COPY (...) TO STDOUT` as CSV, its rows gathered into 2 MiB blocks that
pyarrow parses whole (`copy_blocks`): faster than a server-side cursor (`fetchmany`) and than
feeding pyarrow's streaming reader a row at a time; ADBC's PostgreSQL driver (binary COPY read
in C++ into Arrow) was measured at 1.2 times the rate for a 26 MB dependency, and rejected
(docs/benchmarks.md). SQLite streams with `stream_results`/`yield_per`. A pair the report makes look wrong is never reported
from the report: the blob is read live (its properties and tags) and its row again, and the
listing path's own rules (`blob_safetynet.reconcile.listing.Judge`) decide on what is there now. So a blob
changed or deleted since the run, or a row whose blob came after it, is judged as it is now.
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.reconcile.inventory_report import (
    _count_below,
    _last,
    _next_rows,
    download,
    find_run,
    sorted_chunks,
)
from blob_safetynet.reconcile.listing import (
    Judge,
    ListedBlob,
    Reconciliation,
    check_binding,
    listed_blob,
    row_judged,
)
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status

_RECORD: Final = "record"


def table_chunks(
    store: DocumentStore, chunk_rows: int = 100_000, block_bytes: int | None = None
) -> Iterator[Any]:
    """Every row and crash-window record as Arrow tables (name, status or "record", created in
    ms), in the report's byte order, streamed: COPY from a server-side query on PostgreSQL, in
    blocks of about `block_bytes` (COPY_BLOCK unless given)."""
    if store.engine.dialect.name == "postgresql":
        yield from _copy_chunks(store, block_bytes or COPY_BLOCK)
        return
    import pyarrow as pa

    with store.engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=chunk_rows).execute(
            _table_query(store, by_bytes=False)
        )
        for rows in result.partitions():
            names, statuses, created = zip(*rows, strict=True)
            yield pa.table(
                {
                    "name": pa.array(names, pa.string()),
                    "status": pa.array(statuses, pa.string()),
                    "created": pa.array([_millis(c) for c in created], pa.int64()),
                }
            )


def _table_query(store: DocumentStore, by_bytes: bool) -> sa.Select[Any]:
    t, b = store.table.c, store.blobs.c
    created: sa.ColumnElement[Any] = t.created
    if by_bytes:
        created = sa.cast(sa.func.floor(sa.extract("epoch", t.created) * 1000), sa.BigInteger)
    rows = sa.select(t.blob_name.label("name"), t.status.label("status"), created.label("created"))
    records = sa.select(b.blob_name, sa.literal(_RECORD), sa.null())
    both = sa.union_all(rows, records).subquery()
    key: sa.ColumnElement[str] = both.c.name
    if by_bytes:
        key = sa.collate(key, "C")
    return sa.select(both.c.name, both.c.status, both.c.created).order_by(key)


def _millis(value: datetime | None) -> int | None:
    if value is None:
        return None
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return int(aware.timestamp() * 1000)


COPY_BLOCK: Final = 2 << 20
"""Bytes of COPY's rows parsed at once, about 33,000 rows. The read-ahead holds up to four
blocks (two queued, one waiting, one filling) and their tables while the report is still being
spilled: with 8 MiB blocks the 10 M join peaked at 321 MiB against 230 at 1 M, with 2 MiB at
255 and 255 (docs/benchmarks.md)."""


def _copy_chunks(store: DocumentStore, block_bytes: int) -> Iterator[Any]:
    """The ordered query through COPY ... TO STDOUT as CSV, parsed by pyarrow a block at a time."""
    query = _table_query(store, by_bytes=True).compile(
        dialect=store.engine.dialect, compile_kwargs={"literal_binds": True}
    )
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        with (
            raw.cursor() as cursor,
            cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv)") as copy,
        ):
            for block in copy_blocks(copy_rows(copy, raw.pgconn), block_bytes):
                yield _parse_csv(block)


def copy_rows(copy: Any, pgconn: Any) -> Iterator[Any]:
    """COPY TO's rows: those libpq has already received taken straight from it
    (`PGconn.get_copy_data` without waiting, one C call a row,
    https://www.psycopg.org/psycopg3/docs/api/pq.html), the others through psycopg's `read`,
    which waits for them. 0.4 CPU s a million rows against 0.7 to 0.8 for iterating the copy.

    libpq's -1 ends the COPY; its final result is then read here (a failed query's error is
    raised as psycopg raises it), since psycopg's own reader did not see the end."""
    import psycopg
    from psycopg import pq

    get = pgconn.get_copy_data
    while True:
        size, data = get(1)
        if size > 0:
            yield data
        elif size < 0:
            break
        elif row := copy.read():
            yield row
        else:
            return
    while (result := pgconn.get_result()) is not None:
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result)


def copy_blocks(rows: Iterable[Any], size: int) -> Iterator[bytearray]:
    """COPY's rows gathered into blocks of about `size` bytes, each ending where a row ends.

    PostgreSQL sends COPY TO STDOUT's data one row a message
    (https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY: "messages sent
    from the backend will always correspond to single data rows"), so a block is whole rows
    and parses alone; appending each row costs one C call instead of the Python copying a
    file-like reader would do per row (288,000 against 690,000 rows/s measured here).
    """
    block = bytearray()
    for row in rows:
        block += row
        if len(block) >= size:
            yield block
            block = bytearray()
    if block:
        yield block


def _parse_csv(block: bytearray) -> Any:
    import pyarrow as pa
    import pyarrow.csv as csv

    return csv.read_csv(
        pa.BufferReader(pa.py_buffer(block)),
        read_options=csv.ReadOptions(
            column_names=["name", "status", "created"], block_size=len(block) + 1
        ),
        parse_options=csv.ParseOptions(newlines_in_values=True),
        convert_options=csv.ConvertOptions(
            column_types={"name": pa.string(), "status": pa.string(), "created": pa.int64()}
        ),
    )


def read_ahead(source: Iterator[Any], depth: int = 2) -> ReadAhead:
    """`source` read ahead by a thread started at once, at most `depth` items (`ReadAhead`)."""
    return ReadAhead(source, depth)


class ReadAhead(Iterator[Any]):
    """A stream read ahead by a thread started at once: the database sorts and sends the
    table while the report is being sorted here (started at the first item instead, the
    table's query waited for the whole report to be spilled). The source's errors are raised
    here; `close` stops the thread (the join closes it however it ends)."""

    _DONE: Final = object()

    def __init__(self, source: Iterator[Any], depth: int = 2) -> None:
        self._ahead: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._source = source
        self._worker = threading.Thread(target=self._fill, name="inventory-table", daemon=True)
        self._worker.start()

    def _offer(self, item: Any) -> bool:
        """Queue `item` unless the consumer has gone; False once it has."""
        while not self._stop.is_set():
            try:
                self._ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self) -> None:
        try:
            for item in self._source:
                if not self._offer(item):
                    return
            self._offer(self._DONE)
        except BaseException as error:
            self._offer(error)
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def __next__(self) -> Any:
        if self._stop.is_set():
            raise StopIteration
        item = self._ahead.get()
        if item is self._DONE:
            self.close()
            raise StopIteration
        if isinstance(item, BaseException):
            self.close()
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._worker.join()


def _aligned(left: Iterator[Any], right: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """Windows of two name-ordered table streams covering the same names, in order: a name is
    never split between two windows."""
    import pyarrow as pa

    def refill(carry: Any, stream: Iterator[Any]) -> tuple[Any, bool]:
        more = _next_rows(stream)
        if more is None:
            return carry, True
        return (more if carry is None else pa.concat_tables([carry, more])), False

    lefts, left_done = refill(None, left)
    rights, right_done = refill(None, right)
    while not (left_done and right_done):
        bound = min(_last(t) for t, done in ((lefts, left_done), (rights, right_done)) if not done)
        cut_left = _count_below(lefts, bound) if lefts is not None else 0
        cut_right = _count_below(rights, bound) if rights is not None else 0
        yield _head(lefts, cut_left), _head(rights, cut_right)
        lefts, rights = _tail(lefts, cut_left), _tail(rights, cut_right)
        if not left_done and _last(lefts) == bound:
            lefts, left_done = refill(lefts, left)
        if not right_done and _last(rights) == bound:
            rights, right_done = refill(rights, right)
    yield lefts, rights


def _head(table: Any | None, count: int) -> Any | None:
    return None if table is None else table.slice(0, count)


def _tail(table: Any | None, count: int) -> Any | None:
    return None if table is None else table.slice(count)


def reconcile_inventory(
    store: DocumentStore,
    container: ContainerClient,
    chunks: Iterable[Any],
    older_than: datetime,
    repair: bool = False,
) -> Reconciliation:
    """The listing path's findings, from report `chunks` (from `sorted_chunks`) and the table.

    Both are joined a window at a time with vectorized tests for the few suspects; every
    suspect is judged on the blob read now and the row read again, never on the report alone;
    with `repair`, as `blob_safetynet.reconcile.listing.reconcile` repairs.
    """
    if repair:
        check_binding(store, container)
    result = Reconciliation()
    judge = Judge(store, container, older_than, repair, result)
    # Milliseconds round down; the live judgement decides at the edge.
    cutoff_ms = int(older_than.timestamp() * 1000) + 1
    table = read_ahead(table_chunks(store))
    try:
        for window in joined(chunks, table, cutoff_ms):
            result.blob_count += window.blobs
            for name in window.orphans:
                _unreferenced(judge, name)
            for name, _ in window.rows:
                _recheck_row(judge, store, name)
    finally:
        table.close()
    return result


@dataclass(frozen=True)
class Window:
    """One window of the join: its distinct report blobs and the suspects it found."""

    blobs: int
    orphans: list[str]
    """Report blobs older than the cutoff that no row or crash-window record names."""
    rows: list[tuple[str, str]]
    """Ready rows older than the cutoff, in name order, with MISSING (no such blob in the
    report) or UNSEALED (the report's blob is tagged pending or retired)."""


MISSING: Final = "missing"
UNSEALED: Final = "unsealed"


def joined(chunks: Iterable[Any], table: Iterable[Any], cutoff_ms: int) -> Iterator[Window]:
    """The merge-join of report `chunks` (from `sorted_chunks`) and `table` (from
    `table_chunks`), both in byte order, a window at a time; `cutoff_ms` is exclusive."""
    previous: str | None = None
    for blobs, rows in _aligned(iter(chunks), iter(table)):
        blobs, previous = _first_of_each(blobs, previous)
        yield Window(
            0 if blobs is None else blobs.num_rows,
            _orphan_suspects(blobs, rows, cutoff_ms),
            _row_suspects(blobs, rows, cutoff_ms),
        )


def _first_of_each(blobs: Any | None, previous: str | None) -> tuple[Any | None, str | None]:
    """The window's blobs with repeats dropped (also one repeating the last window's last)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if blobs is None or not blobs.num_rows:
        return blobs, previous
    names = blobs["name"]
    before = pa.concat_arrays(
        [pa.array([previous], pa.string()), *names.slice(0, len(names) - 1).chunks]
    )
    fresh = pc.fill_null(pc.not_equal(names, before), True)
    return blobs.filter(fresh), _last(blobs)


def _orphan_suspects(blobs: Any | None, rows: Any | None, cutoff_ms: int) -> list[str]:
    import pyarrow.compute as pc

    if blobs is None or not blobs.num_rows:
        return []
    named = pc.is_in(blobs["name"], value_set=_names(rows))
    suspect = pc.and_(pc.invert(named), pc.less(blobs["last_modified"], cutoff_ms))
    names: list[str] = blobs["name"].filter(suspect).to_pylist()
    return names


def _row_suspects(blobs: Any | None, rows: Any | None, cutoff_ms: int) -> list[tuple[str, str]]:
    """Ready rows old enough whose blob the window lacks or holds pending or retired."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows is None or not rows.num_rows:
        return []
    ready = pc.and_(
        pc.equal(rows["status"], Status.READY.value), pc.less(rows["created"], cutoff_ms)
    )
    found = pc.index_in(rows["name"], value_set=_names(blobs))
    unsealed = pc.fill_null(pc.take(_column(blobs, "unsealed", pa.bool_()), found), True)
    suspect = pc.fill_null(pc.and_(ready, unsealed), False)
    names: list[str] = rows["name"].filter(suspect).to_pylist()
    missing: list[bool] = pc.is_null(found).filter(suspect).to_pylist()
    return [
        (name, MISSING if gone else UNSEALED) for name, gone in zip(names, missing, strict=True)
    ]


def _column(table: Any | None, name: str, type_: Any = None) -> Any:
    import pyarrow as pa

    if table is None:
        return pa.array([], type_ or pa.string())
    return table[name].combine_chunks()


def _names(table: Any | None) -> Any:
    return _column(table, "name")


def _unreferenced(judge: Judge, name: str) -> None:
    live = live_blob(judge.container, name)
    if live is not None:
        judge.blob(live, referenced=judge.store.is_referenced(name))


def _recheck_row(judge: Judge, store: DocumentStore, name: str) -> None:
    # The report made it a suspect; the judge reads the blob's state and the row again, so a
    # live read of the blob here would only repeat that read.
    document = store.document_for_blob(name)
    if document is not None and row_judged(document, judge.older_than):
        judge.confirm(document)


def live_blob(container: ContainerClient, name: str) -> ListedBlob | None:
    """The blob as it is now (properties and state tag), or None when it is gone."""
    client = container.get_blob_client(name)
    try:
        properties = client.get_blob_properties()
        tags = client.get_blob_tags()
    except ResourceNotFoundError:
        return None
    return listed_blob(name, tags, properties, properties.etag.strip('"'))


def reconcile_from_inventory(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    rule: str,
    older_than: datetime,
    max_age: timedelta,
    repair: bool = False,
) -> Reconciliation:
    """Find the newest usable run of `rule` in `destination`, download it, join it, judge."""
    run = find_run(destination, rule, container.container_name, datetime.now(UTC), max_age)
    with tempfile.TemporaryDirectory(prefix="safetynet-inventory-") as folder:
        work = Path(folder)
        files = download(destination, run, work)
        chunks = sorted_chunks(files, container.container_name, work, run.object_count)
        return reconcile_inventory(store, container, chunks, older_than, repair)
