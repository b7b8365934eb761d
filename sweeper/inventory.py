"""Reconcile from Azure Blob Inventory: the service's daily report replaces the container listing.

Layout, manifest and checksum as Microsoft documents them
(https://learn.microsoft.com/azure/storage/blobs/blob-inventory#inventory-output): a run of rule
R writes `<destination>/YYYY/MM/DD/HH-MM-SS/R/` (the time the run started) holding the report
files, `R-manifest.json` (created with `"status": "Pending"`, set to `Succeeded` or `Failed` when
the run ends) and `R-manifest.checksum`, the MD5 of the manifest, whose presence marks the run
complete. The report's rows come in no particular order and may, rarely, repeat a blob; Parquet
dates are `timestamp_millis`; `Name` is the blob's path after its container's name.

The report is read with pyarrow rather than DuckDB: the join needs the rows in blob-name order
and nothing else, which pyarrow does in bounded memory (sorted runs of at most RUN_ROWS rows
spilled to Arrow IPC files, then merged) with one dependency and no SQL engine to tune; DuckDB
would sort too, but as a second database next to the documents table. pyarrow is the optional
extra `inventory`, imported only here and only when a report is read.

The documents table and the crash-window records are streamed in the same order (a server-side
cursor on PostgreSQL, in byte order: `COLLATE "C"`) and merge-joined with the report, so memory
stays flat whatever the container holds. A pair the report makes look wrong is never reported
from the report: the blob is read live (its properties and tags) and its row again, and the
listing path's own rules (`sweeper.reconcile.Judge`) decide on what is there now. So a blob
changed or deleted since the run, or a row whose blob came after it, is judged as it is now.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from sweeper.reconcile import INTERNAL_PREFIX, Judge, ListedBlob, Reconciliation, check_binding
from sweeper.store import DocumentStore, Status
from sweeper.vocabulary import PENDING, RETIRED, STATE_TAG

NAME: Final = "Name"
LAST_MODIFIED: Final = "Last-Modified"
ETAG: Final = "Etag"
TAGS: Final = "Tags"
READ_FIELDS: Final = (NAME, LAST_MODIFIED, ETAG, TAGS)
"""The report's fields the join reads; the policy asks for these and a few more (infra)."""
SUCCEEDED: Final = "Succeeded"
RUN_ROWS: Final = 500_000
"""Rows sorted in memory at once before they are spilled as one sorted run."""
MERGE_BATCH: Final = 2_048
"""Rows each spilled run holds in memory while the runs are merged."""
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


@dataclass(frozen=True)
class Entry:
    """One row of the report: what the join needs, times as milliseconds since 1970 UTC."""

    name: str
    last_modified_ms: int
    etag: str
    state: str


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
    raw = destination.get_blob_client(manifest_name).download_blob().readall()
    manifest = _parse_manifest(raw, manifest_name)
    status = manifest.get("status")
    if status != SUCCEEDED:
        skipped.append(f"{prefix} is {status!r}")
        return None
    checksum_name = manifest_name.removesuffix(".json") + ".checksum"
    try:
        checksum = destination.get_blob_client(checksum_name).download_blob().readall()
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


def _parse_manifest(raw: bytes, name: str) -> Mapping[str, Any]:
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise InventoryError(f"inventory manifest {name} is not JSON") from None
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
    missing = [f for f in READ_FIELDS if f not in (definition.get("schemaFields") or [])]
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
            destination.get_blob_client(file.blob).download_blob().readinto(handle)
        if path.stat().st_size != file.size:
            raise InventoryError(
                f"inventory file {file.blob} holds {path.stat().st_size} bytes, the manifest "
                f"says {file.size}: the run is incomplete"
            )
        paths.append(path)
    return paths


def sorted_entries(
    files: Iterable[Path],
    container: str,
    spill: Path,
    expected_rows: int | None = None,
    run_rows: int = RUN_ROWS,
) -> Iterator[Entry]:
    """The report's protocol blobs of `container` in name order, each once.

    Reads RUN_ROWS rows at a time, sorts them, spills them to `spill` as one Arrow IPC file,
    then merges the runs. With `expected_rows`, a report holding fewer rows (before filtering;
    repeats may make more) raises InventoryError once all are read, before anything is yielded:
    files went missing or were cut short.
    """
    runs = _spill_runs(files, container, spill, expected_rows, run_rows)
    merged = heapq.merge(*(_read_run(path) for path in runs))
    previous = None
    for entry in merged:
        if entry[0] != previous:
            previous = entry[0]
            yield Entry(*entry)


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
    """The rows of `container`'s protocol blobs: name (container stripped), time, ETag, state."""
    import pyarrow as pa
    import pyarrow.compute as pc

    prefix = f"{container}/"
    table = table.filter(pc.starts_with(table[NAME], prefix))
    names = pc.utf8_slice_codeunits(table[NAME], len(prefix))
    keep = pc.invert(pc.starts_with(names, INTERNAL_PREFIX))
    columns = {
        "name": names,
        "last_modified": pc.cast(table[LAST_MODIFIED], pa.timestamp("ms", "UTC")).cast(pa.int64()),
        "etag": pc.fill_null(table[ETAG].cast(pa.string()), ""),
        "state": _states(table[TAGS]),
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
    try:
        tags = json.loads(text) if text else {}
    except ValueError:
        return ""
    value = tags.get(STATE_TAG, "") if isinstance(tags, dict) else ""
    return value if isinstance(value, str) else ""


def _write_run(table: Any, spill: Path, number: int) -> Path:
    import pyarrow as pa

    path = spill / f"run-{number}.arrow"
    ordered = table.sort_by("name")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, ordered.schema) as writer:
        writer.write_table(ordered, max_chunksize=MERGE_BATCH)
    return path


def _read_run(path: Path) -> Iterator[tuple[str, int, str, str]]:
    import pyarrow as pa

    with pa.OSFile(str(path), "rb") as source:
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            batch = reader.get_batch(index)
            yield from zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True)


def table_in_blob_order(store: DocumentStore) -> Iterator[tuple[str, str, datetime | None]]:
    """(blob name, status or "record", created) of every row and crash-window record, in the
    report's order (code points), streamed: a server-side cursor on PostgreSQL."""
    t, b = store.table.c, store.blobs.c
    rows = sa.select(t.blob_name.label("blob_name"), t.status, t.created)
    records = sa.select(b.blob_name, sa.literal(_RECORD), sa.null())
    both = sa.union_all(rows, records).subquery()
    key: sa.ColumnElement[str] = both.c.blob_name
    if store.engine.dialect.name == "postgresql":
        key = sa.collate(key, "C")
    query = sa.select(both.c.blob_name, both.c.status, both.c.created).order_by(key)
    with store.engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=10_000).execute(query)
        for row in result:
            yield row[0], row[1], row[2]


def reconcile_inventory(
    store: DocumentStore,
    container: ContainerClient,
    entries: Iterable[Entry],
    older_than: datetime,
    repair: bool = False,
) -> Reconciliation:
    """The listing path's findings, from report `entries` (in name order) and the table.

    Every suspect pair is judged on the blob read now and the row read again, never on the
    report alone; with `repair`, as `sweeper.reconcile.reconcile` repairs.
    """
    if repair:
        check_binding(store, container)
    result = Reconciliation()
    judge = Judge(store, container, older_than, repair, result)
    cutoff_ms = int(older_than.timestamp() * 1000)
    blobs = iter(entries)
    blob = next(blobs, None)
    for name, statuses in _groups(table_in_blob_order(store)):
        while blob is not None and blob.name < name:
            _unreferenced(judge, blob, cutoff_ms)
            result.blob_count += 1
            blob = next(blobs, None)
        matched = blob if blob is not None and blob.name == name else None
        if matched is not None:
            result.blob_count += 1
            blob = next(blobs, None)
        if any(_row_suspect(s, created, matched, older_than) for s, created in statuses):
            _recheck_row(judge, store, container, name)
    while blob is not None:
        _unreferenced(judge, blob, cutoff_ms)
        result.blob_count += 1
        blob = next(blobs, None)
    return result


def _groups(
    rows: Iterator[tuple[str, str, datetime | None]],
) -> Iterator[tuple[str, list[tuple[str, datetime | None]]]]:
    """Consecutive rows and records of one blob name, together."""
    name: str | None = None
    group: list[tuple[str, datetime | None]] = []
    for blob_name, status, created in rows:
        if blob_name != name:
            if name is not None:
                yield name, group
            name, group = blob_name, []
        group.append((status, created))
    if name is not None:
        yield name, group


def _row_suspect(
    status: str, created: datetime | None, blob: Entry | None, older_than: datetime
) -> bool:
    """The cheap pre-test of `row_suspect` on the report's data (rows only, not records)."""
    if status != Status.READY.value or (blob is not None and blob.state not in _SUSPECT_STATES):
        return False
    return created is not None and _utc(created) < older_than


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _unreferenced(judge: Judge, blob: Entry, cutoff_ms: int) -> None:
    if blob.last_modified_ms >= cutoff_ms:
        return
    live = live_blob(judge.container, blob.name)
    if live is not None:
        judge.blob(live, referenced=judge.store.is_referenced(blob.name))


def _recheck_row(judge: Judge, store: DocumentStore, container: ContainerClient, name: str) -> None:
    document = store.document_for_blob(name)
    if document is not None:
        judge.row(document, live_blob(container, name))


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
        entries = sorted_entries(files, container.container_name, work, run.object_count)
        return reconcile_inventory(store, container, entries, older_than, repair)
