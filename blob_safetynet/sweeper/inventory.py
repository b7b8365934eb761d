"""Reconcile from Azure Blob Inventory: the service's daily report replaces the container listing.

Layout, manifest and checksum as Microsoft documents them
(https://learn.microsoft.com/azure/storage/blobs/blob-inventory#inventory-output): a run of rule
R writes `<destination>/YYYY/MM/DD/HH-MM-SS/R/` (the time the run started) holding the report
files, `R-manifest.json` (created with `"status": "Pending"`, set to `Succeeded` or `Failed` when
the run ends) and `R-manifest.checksum`, the MD5 of the manifest, whose presence marks the run
complete. The report's rows come in no particular order and may, rarely, repeat a blob; Parquet
dates are `timestamp_millis`; `Name` is `<container>/<blob path>` (a rule's prefixes start with
a container name).

The report is read with pyarrow rather than DuckDB: the join needs the rows in blob-name order
and nothing else, which pyarrow does in bounded memory (sorted runs of at most RUN_ROWS rows
spilled to Arrow IPC files, then merged) with one dependency and no SQL engine to tune; DuckDB
would sort too, but as a second database next to the documents table. pyarrow is the optional
extra `inventory`, imported only here and only when a report is read.

The documents table and the crash-window records are streamed in the same order (byte order:
`COLLATE "C"` on PostgreSQL) and merge-joined with the report a window at a time with Arrow's
vectorized kernels, so memory stays flat whatever the container holds. PostgreSQL streams the
ordered query through `COPY (...) TO STDOUT` as CSV, parsed by pyarrow in 8 MiB blocks: nothing
is buffered on either side, and it moves rows about 1.7 times as fast as a server-side cursor
(`fetchmany`) did here; SQLite streams with `stream_results`/`yield_per`. A pair the report makes look wrong is never reported
from the report: the blob is read live (its properties and tags) and its row again, and the
listing path's own rules (`blob_safetynet.sweeper.reconcile.Judge`) decide on what is there now. So a blob
changed or deleted since the run, or a row whose blob came after it, is judged as it is now.
"""

from __future__ import annotations

import base64
import hashlib
import io
import queue
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.sweeper import untrusted
from blob_safetynet.sweeper.reconcile import (
    INTERNAL_PREFIX,
    Judge,
    ListedBlob,
    Reconciliation,
    check_binding,
    row_judged,
)
from blob_safetynet.sweeper.store import DocumentStore, Status
from blob_safetynet.sweeper.vocabulary import PENDING, RETIRED, STATE_TAG

NAME: Final = "Name"
LAST_MODIFIED: Final = "Last-Modified"
ETAG: Final = "Etag"
TAGS: Final = "Tags"
READ_FIELDS: Final = (NAME, LAST_MODIFIED, TAGS)
"""The report's fields the join reads."""
REQUIRED_FIELDS: Final = (NAME, LAST_MODIFIED, ETAG, TAGS)
"""The fields a usable rule must ask for (ETag for a person comparing plans with reports: plan
entries carry the ETag read live); the infra policy asks for these and a few more."""
SUCCEEDED: Final = "Succeeded"
RUN_ROWS: Final = 500_000
"""Rows sorted in memory at once before they are spilled as one sorted run."""
MERGE_BATCH: Final = 16_384
"""Rows each spilled run holds in memory while the runs are merged."""
FAN_IN: Final = 32
"""Runs merged at once: a merge step holds at most FAN_IN x MERGE_BATCH rows."""
MAX_MANIFEST_BYTES: Final = 1024 * 1024
"""A manifest lists a run's files (one per 1,000,000 objects or so) and the rule: a few kB."""
MAX_CHECKSUM_BYTES: Final = 1024
"""The checksum file holds one MD5, as hex or base64."""
MAX_TAGS_TEXT: Final = 16 * 1024
"""A blob has at most 10 tags, keys up to 128 and values up to 256 characters
(https://learn.microsoft.com/azure/storage/blobs/storage-manage-find-blobs#setting-blob-index-tags);
their JSON is at most a few kB."""
_RUN: Final = re.compile(
    r"(\d{4})/(\d{2})/(\d{2})/(\d{2})-(\d{2})-(\d{2})/([^/]+)/\7-manifest\.json"
)
_SUSPECT_STATES: Final = frozenset({PENDING, RETIRED})
_RECORD: Final = "record"


class InventoryError(RuntimeError):
    """No usable inventory run: missing, still running, failed, stale or incomplete."""


class InventoryConfigError(InventoryError):
    """The inventory cannot serve this container as configured (wrong rule, fields, filters)."""


@dataclass(frozen=True)
class InventoryFile:
    blob: str
    size: int


@dataclass(frozen=True)
class InventoryRun:
    """One completed run of the rule, as its manifest describes it."""

    prefix: str
    started: datetime
    object_count: int
    files: tuple[InventoryFile, ...]


def find_run(
    destination: ContainerClient, rule: str, container: str, now: datetime, max_age: timedelta
) -> InventoryRun:
    """The newest completed, succeeded run of `rule` covering `container`, not older than `max_age`.

    Raises InventoryConfigError when the destination does not exist or the rule's definition
    cannot serve the join; InventoryError when no run is usable (none, only running or failed
    ones, a checksum that does not match) or the newest usable one is stale.
    """
    skipped: list[str] = []
    for manifest_name in _manifests(destination, rule):
        run = _completed_run(destination, manifest_name, container, skipped)
        if run is None:
            continue
        age = now - run.started
        if age > max_age:
            raise InventoryError(
                f"the newest completed inventory run of rule {rule!r} started "
                f"{run.started.isoformat()}, {_hours(age)} ago, older than the maximum age "
                f"{_hours(max_age)}{_notes(skipped)}: list the container instead (no --inventory) "
                "or wait for the next run"
            )
        return run
    raise InventoryError(
        f"no completed inventory run of rule {rule!r} in container "
        f"{destination.container_name!r}{_notes(skipped)}"
    )


def _manifests(destination: ContainerClient, rule: str) -> list[str]:
    """Manifest names of `rule`'s runs, newest first (the path starts with the run's time)."""
    try:
        names = [
            name
            for name in destination.list_blob_names()
            if (match := _RUN.fullmatch(name)) and match.group(7) == rule
        ]
    except ResourceNotFoundError:
        raise InventoryConfigError(
            f"inventory container {destination.container_name!r} does not exist"
        ) from None
    return sorted(names, reverse=True)


def _completed_run(
    destination: ContainerClient, manifest_name: str, container: str, skipped: list[str]
) -> InventoryRun | None:
    """The run behind this manifest when it finished and succeeded, else None (noted in `skipped`)."""
    prefix = manifest_name.rsplit("/", 1)[0] + "/"
    raw = _bounded_read(destination, manifest_name, MAX_MANIFEST_BYTES)
    manifest = _parse_manifest(raw, manifest_name)
    status = manifest.get("status")
    if status != SUCCEEDED:
        skipped.append(f"{prefix} is {status!r}")
        return None
    checksum_name = manifest_name.removesuffix(".json") + ".checksum"
    try:
        checksum = _bounded_read(destination, checksum_name, MAX_CHECKSUM_BYTES)
    except ResourceNotFoundError:
        skipped.append(f"{prefix} has no checksum file yet (not complete)")
        return None
    if not _checksum_matches(raw, checksum):
        skipped.append(f"{prefix}'s manifest does not match its checksum")
        return None
    _check_definition(manifest.get("ruleDefinition"), container, manifest_name)
    return InventoryRun(
        prefix=prefix,
        started=_timestamp(manifest.get("inventoryStartTime"), manifest_name),
        object_count=_object_count(manifest, manifest_name),
        files=_files(manifest, manifest_name),
    )


def _bounded_read(destination: ContainerClient, name: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a blob (a ranged read: a huge blob is never fetched
    whole; on an empty blob the range is 416 InvalidRange, https://learn.microsoft.com/rest/api/storageservices/get-blob);
    more than `limit` is an InventoryError."""
    try:
        data = destination.get_blob_client(name).download_blob(offset=0, length=limit + 1).readall()
    except HttpResponseError as error:
        if error.status_code != 416:
            raise
        data = b""
    if len(data) > limit:
        raise InventoryError(f"inventory file {name} is larger than {limit} bytes")
    return data


def _parse_manifest(raw: bytes, name: str) -> Mapping[str, Any]:
    try:
        manifest = untrusted.load_json(
            raw, f"inventory manifest {name}", max_bytes=MAX_MANIFEST_BYTES
        )
    except untrusted.UntrustedInputError as error:
        raise InventoryError(str(error)) from None
    if not isinstance(manifest, dict):
        raise InventoryError(f"inventory manifest {name} is not a JSON object")
    return manifest


def _checksum_matches(manifest: bytes, checksum: bytes) -> bool:
    """Whether the checksum file holds the manifest's MD5, as hex or base64."""
    digest = hashlib.md5(manifest, usedforsecurity=False).digest()
    text = checksum.decode("ascii", "replace").strip().strip('"')
    return text.lower() == digest.hex() or text == base64.b64encode(digest).decode()


def _check_definition(definition: object, container: str, name: str) -> None:
    """Refuse a rule whose report cannot stand in for a listing of `container`."""
    if not isinstance(definition, dict):
        raise InventoryConfigError(f"inventory manifest {name} has no ruleDefinition")
    filters = definition.get("filters") or {}
    problems = []
    if str(definition.get("format", "")).lower() != "parquet":
        problems.append("its format is not parquet")
    if str(definition.get("objectType", "")).lower() != "blob":
        problems.append("its objectType is not blob")
    missing = [f for f in REQUIRED_FIELDS if f not in (definition.get("schemaFields") or [])]
    if missing:
        problems.append(f"its schemaFields lack {', '.join(missing)}")
    if "blockBlob" not in (filters.get("blobTypes") or []):
        problems.append("its blobTypes lack blockBlob")
    for flag in ("includeSnapshots", "includeBlobVersions", "includeDeleted"):
        if filters.get(flag):
            problems.append(f"{flag} is true")
    path = f"{container}/"
    prefixes = filters.get("prefixMatch") or [""]
    if not any(path.startswith(p) for p in prefixes):
        problems.append(f"its prefixMatch does not cover container {container!r}")
    excluded = [
        p for p in filters.get("excludePrefix") or [] if p.startswith(path) or path.startswith(p)
    ]
    if excluded:
        problems.append(f"its excludePrefix leaves out part of container {container!r}")
    if problems:
        raise InventoryConfigError(
            f"inventory rule of {name} cannot serve reconcile: {'; '.join(problems)}"
        )


def _timestamp(value: object, name: str) -> datetime:
    try:
        return datetime.fromisoformat(str(value)).astimezone(UTC)
    except ValueError:
        raise InventoryError(
            f"inventory manifest {name}: inventoryStartTime is not a time"
        ) from None


def _object_count(manifest: Mapping[str, Any], name: str) -> int:
    count = (manifest.get("summary") or {}).get("objectCount")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise InventoryError(f"inventory manifest {name}: summary.objectCount is missing")
    return count


def _files(manifest: Mapping[str, Any], name: str) -> tuple[InventoryFile, ...]:
    files = manifest.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("blob"), str) and isinstance(f.get("size"), int)
        for f in files
    ):
        raise InventoryError(f"inventory manifest {name}: `files` is not a list of blob and size")
    return tuple(InventoryFile(f["blob"], f["size"]) for f in files)


def _hours(value: timedelta) -> str:
    return f"{value.total_seconds() / 3600:.1f} h"


def _notes(skipped: list[str]) -> str:
    return f" (newer runs skipped: {'; '.join(skipped)})" if skipped else ""


def download(destination: ContainerClient, run: InventoryRun, folder: Path) -> list[Path]:
    """The run's report files copied into `folder`; a file of another size is an incomplete run."""
    paths = []
    for number, file in enumerate(run.files):
        path = folder / f"report-{number}.parquet"
        with path.open("wb") as handle:
            destination.get_blob_client(file.blob).download_blob(max_concurrency=4).readinto(handle)
        if path.stat().st_size != file.size:
            raise InventoryError(
                f"inventory file {file.blob} holds {path.stat().st_size} bytes, the manifest "
                f"says {file.size}: the run is incomplete"
            )
        paths.append(path)
    return paths


def sorted_chunks(
    files: Iterable[Path],
    container: str,
    spill: Path,
    expected_rows: int | None = None,
    run_rows: int = RUN_ROWS,
    fan_in: int = FAN_IN,
) -> Iterator[Any]:
    """The report's protocol blobs of `container` as Arrow tables (name, last_modified in ms,
    unsealed: tagged pending or retired), each sorted, in name order from one table to the next (repeats kept).

    Sorts RUN_ROWS rows at a time, spills each sorted run to `spill` as an Arrow IPC file, merges
    them FAN_IN at a time into longer runs until at most FAN_IN are left (so a merge step holds
    FAN_IN slices whatever the report's size), then merges those a slice at a time. With `expected_rows`, a report holding fewer rows (before
    filtering; repeats may make more) raises InventoryError once all are read, before anything
    is yielded: files went missing or were cut short.
    """
    runs = _spill_runs(files, container, spill, expected_rows, run_rows)
    while len(runs) > fan_in:
        runs = [
            _merge_to_file(runs[start : start + fan_in], spill / f"pass-{start}-{len(runs)}.arrow")
            for start in range(0, len(runs), fan_in)
        ]
    yield from _merge_runs([_read_run(path) for path in runs])


def _merge_to_file(runs: list[Path], path: Path) -> Path:
    """Merge sorted run files into one, deleting them."""
    import pyarrow as pa

    with pa.OSFile(str(runs[0]), "rb") as first:
        schema = pa.ipc.open_file(first).schema
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for table in _merge_runs([_read_run(run) for run in runs]):
            writer.write_table(table, max_chunksize=MERGE_BATCH)
    for run in runs:
        run.unlink()
    return path


def _spill_runs(
    files: Iterable[Path], container: str, spill: Path, expected_rows: int | None, run_rows: int
) -> list[Path]:
    import pyarrow as pa

    runs: list[Path] = []
    pending: list[Any] = []
    pending_rows = 0
    total = 0
    for path in files:
        for batch in _batches(path):
            total += batch.num_rows
            table = _protocol_rows(pa.Table.from_batches([batch]), container)
            pending.append(table)
            pending_rows += table.num_rows
            if pending_rows >= run_rows:
                runs.append(_write_run(pa.concat_tables(pending), spill, len(runs)))
                pending, pending_rows = [], 0
    if pending:
        runs.append(_write_run(pa.concat_tables(pending), spill, len(runs)))
    if expected_rows is not None and total < expected_rows:
        raise InventoryError(
            f"the inventory files hold {total} rows, the manifest counts {expected_rows}: "
            "the run is incomplete"
        )
    return runs


def _batches(path: Path) -> Iterator[Any]:
    import pyarrow.parquet as pq

    report = pq.ParquetFile(path)
    missing = [f for f in READ_FIELDS if f not in report.schema_arrow.names]
    if missing:
        raise InventoryError(f"inventory file {path.name} lacks the field(s) {', '.join(missing)}")
    yield from report.iter_batches(batch_size=65_536, columns=list(READ_FIELDS))


def _protocol_rows(table: Any, container: str) -> Any:
    """The rows of `container`'s protocol blobs: name (container stripped), time, unsealed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    prefix = f"{container}/"
    table = table.filter(pc.starts_with(table[NAME], prefix))
    names = pc.utf8_slice_codeunits(table[NAME], len(prefix))
    keep = pc.invert(pc.starts_with(names, INTERNAL_PREFIX))
    unsealed = pc.is_in(_states(table[TAGS]), value_set=pa.array(sorted(_SUSPECT_STATES)))
    columns = {
        "name": names,
        "last_modified": pc.cast(table[LAST_MODIFIED], pa.timestamp("ms", "UTC")).cast(pa.int64()),
        "unsealed": unsealed,
    }
    return pa.table(columns).filter(keep)


def _states(tags: Any) -> Any:
    """The state tag of each row: from a map column, or from a JSON object per row as text.

    Microsoft's page names the Tags field without giving its Parquet type; both shapes are read.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_map(tags.type):
        return pc.fill_null(pc.map_lookup(tags, STATE_TAG, "first"), "")
    return pa.array([_state_from_text(v) for v in tags.cast(pa.string()).to_pylist()], pa.string())


def _state_from_text(text: str | None) -> str:
    """The state tag in one row's Tags text; text too long, too deep or not JSON is an
    InventoryError (a report no blob could have written is not judged)."""
    try:
        tags = untrusted.load_json(text, "a Tags value", max_bytes=MAX_TAGS_TEXT) if text else {}
    except untrusted.UntrustedInputError as error:
        raise InventoryError(f"the inventory report: {error}") from None
    value = tags.get(STATE_TAG, "") if isinstance(tags, dict) else ""
    return value if isinstance(value, str) else ""


def _write_run(table: Any, spill: Path, number: int) -> Path:
    import pyarrow as pa

    path = spill / f"run-{number}.arrow"
    ordered = table.sort_by("name")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, ordered.schema) as writer:
        writer.write_table(ordered, max_chunksize=MERGE_BATCH)
    return path


def _read_run(path: Path) -> Iterator[Any]:
    import pyarrow as pa

    with pa.OSFile(str(path), "rb") as source:
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            yield pa.Table.from_batches([reader.get_batch(index)])


def _merge_runs(runs: list[Iterator[Any]]) -> Iterator[Any]:
    """Sorted runs merged: each step takes every run's rows up to the smallest last name among
    the runs' current slices, and sorts only those."""
    import pyarrow as pa

    current: dict[int, Any] = {}
    for number, run in enumerate(runs):
        first = _next_rows(run)
        if first is not None:
            current[number] = first
    while current:
        bound = min(_last(rows) for rows in current.values())
        taken = []
        for number, rows in list(current.items()):
            count = _count_at_most(rows, bound)
            taken.append(rows.slice(0, count))
            if count < rows.num_rows:
                current[number] = rows.slice(count)
                continue
            refill = _next_rows(runs[number])
            if refill is None:
                del current[number]
            else:
                current[number] = refill
        yield pa.concat_tables(taken).sort_by("name")


def _next_rows(rows: Iterator[Any]) -> Any | None:
    """The next non-empty table of a stream, or None at its end."""
    for table in rows:
        if table.num_rows:
            return table
    return None


def _last(table: Any) -> str:
    last: str = table["name"][table.num_rows - 1].as_py()
    return last


def _count_at_most(table: Any, bound: str) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(pc.less_equal(table["name"], bound)).as_py() or 0)


def _count_below(table: Any, bound: str) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(pc.less(table["name"], bound)).as_py() or 0)


def table_chunks(store: DocumentStore, chunk_rows: int = 100_000) -> Iterator[Any]:
    """Every row and crash-window record as Arrow tables (name, status or "record", created in
    ms), in the report's byte order, streamed: COPY from a server-side query on PostgreSQL."""
    if store.engine.dialect.name == "postgresql":
        yield from _copy_chunks(store)
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


def _copy_chunks(store: DocumentStore) -> Iterator[Any]:
    """The ordered query through COPY ... TO STDOUT as CSV, parsed by pyarrow in blocks."""
    import pyarrow as pa
    import pyarrow.csv as csv

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
            reader = csv.open_csv(
                _CopyStream(copy),
                read_options=csv.ReadOptions(
                    column_names=["name", "status", "created"], block_size=8 << 20
                ),
                parse_options=csv.ParseOptions(newlines_in_values=True),
                convert_options=csv.ConvertOptions(
                    column_types={"name": pa.string(), "status": pa.string(), "created": pa.int64()}
                ),
            )
            for batch in reader:
                yield pa.Table.from_batches([batch])


class _CopyStream(io.RawIOBase):
    """COPY's chunks (a row each) as a readable file whose reads fill the buffer, for
    pyarrow's streaming CSV reader (a short read would end its block)."""

    def __init__(self, copy: Iterable[Any]) -> None:
        self._chunks = iter(copy)
        self._rest = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(target):
            if not self._rest:
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                self._rest = memoryview(chunk).cast("B")
            size = min(len(target) - filled, len(self._rest))
            target[filled : filled + size] = self._rest[:size]
            self._rest = self._rest[size:]
            filled += size
        return filled


def read_ahead(source: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """`source` read ahead by a thread, at most `depth` items: the database sorts and sends
    the table while the report is being sorted here. Its errors are raised here."""
    done = object()
    ahead: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: Any) -> bool:
        """Queue `item` unless the consumer has gone; False once it has."""
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def fill() -> None:
        try:
            for item in source:
                if not offer(item):
                    return
            offer(done)
        except BaseException as error:
            offer(error)

    worker = threading.Thread(target=fill, name="inventory-table", daemon=True)
    worker.start()
    try:
        while (item := ahead.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


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
    with `repair`, as `blob_safetynet.sweeper.reconcile.reconcile` repairs.
    """
    if repair:
        check_binding(store, container)
    result = Reconciliation()
    judge = Judge(store, container, older_than, repair, result)
    # Milliseconds round down; the live judgement decides at the edge.
    cutoff_ms = int(older_than.timestamp() * 1000) + 1
    previous: str | None = None
    for blobs, rows in _aligned(iter(chunks), read_ahead(table_chunks(store))):
        blobs, previous = _first_of_each(blobs, previous)
        result.blob_count += 0 if blobs is None else blobs.num_rows
        for name in _orphan_suspects(blobs, rows, cutoff_ms):
            _unreferenced(judge, name)
        for name in _row_suspects(blobs, rows, cutoff_ms):
            _recheck_row(judge, store, name)
    return result


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


def _row_suspects(blobs: Any | None, rows: Any | None, cutoff_ms: int) -> list[str]:
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
    return names


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
    return ListedBlob(
        name, tags.get(STATE_TAG, ""), properties.last_modified, properties.etag.strip('"')
    )


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
