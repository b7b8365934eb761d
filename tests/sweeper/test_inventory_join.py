"""The inventory join against a reference join made of dicts, on generated data."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from blob_safetynet.reconcile.inventory import (
    MISSING,
    UNSEALED,
    copy_blocks,
    copy_rows,
    joined,
    table_chunks,
)
from blob_safetynet.reconcile.inventory_report import _unsealed, sorted_chunks
from blob_safetynet.reconcile.listing import INTERNAL_PREFIX
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecordKind, Status
from testkit.inventory import parquet_bytes

CONTAINER = "documents"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CUTOFF_MS = (NOW - EPOCH) // timedelta(milliseconds=1)
PIECES = (
    "a",
    "A",
    "z",
    "Z",
    "é",
    "E",
    "ß",
    "日本",
    "\U0001f600",
    "ÿ",
    "/",
    "-",
    ".",
    "0",
    ",",
    '"',
)
"""Name parts whose byte order ("C") differs from a case-folded or accent-aware order, and
characters CSV quotes."""

Finding = tuple[str, str]


def names(rng: random.Random, count: int) -> list[str]:
    made: set[str] = set()
    while len(made) < count:
        made.add("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4))))
    return sorted(made)


def around_cutoff(rng: random.Random) -> tuple[datetime, int]:
    """A whole millisecond just before, at or after the cutoff, or a day earlier, and its ms."""
    millis = CUTOFF_MS + rng.choice([-1, 0, 1, -86_400_000])
    return EPOCH + timedelta(milliseconds=millis), millis


def generate(
    rng: random.Random, store: DocumentStore, folder: Path
) -> tuple[dict[str, tuple[int, bool]], dict[str, tuple[str, int]], set[str], list[Path]]:
    """A report (three Parquet files, repeats and other containers' blobs included) and a
    table (rows and crash-window records) over the same names, each name given a random fate;
    returns what the reference join reads."""
    report: dict[str, tuple[int, bool]] = {}
    table: dict[str, tuple[str, int]] = {}
    records: set[str] = set()
    report_rows: list[dict[str, object]] = []
    for number, name in enumerate(names(rng, 400)):
        in_report, as_row, as_record = rng.random() < 0.8, rng.random() < 0.7, rng.random() < 0.1
        if in_report:
            modified, modified_ms = around_cutoff(rng)
            state = rng.choice([COMMITTED, COMMITTED, PENDING, RETIRED, ""])
            tags = [(STATE_TAG, state)] if state else []
            row = {"Name": f"{CONTAINER}/{name}", "Last-Modified": modified, "Tags": tags}
            report_rows += [row] * rng.choice([1, 1, 1, 2])
            report[name] = (modified_ms, state in (PENDING, RETIRED))
        if as_row:
            status = rng.choice([Status.READY, Status.READY, Status.PENDING])
            created, created_ms = around_cutoff(rng)
            _insert_row(store, number, name, status, created)
            table[name] = (status.value, created_ms)
        if as_record:
            _insert_record(store, number, name)
            records.add(name)
    report_rows += [
        {"Name": f"other/{CONTAINER}-x", "Last-Modified": NOW - timedelta(days=9), "Tags": []},
        {"Name": f"{CONTAINER}/{INTERNAL_PREFIX}lease", "Last-Modified": NOW, "Tags": []},
    ]
    rng.shuffle(report_rows)
    files = []
    for part in range(3):
        path = folder / f"report-{part}.parquet"
        path.write_bytes(parquet_bytes([_full(row) for row in report_rows[part::3]]))
        files.append(path)
    return report, table, records, files


def _full(row: dict[str, object]) -> dict[str, object]:
    return {
        "Creation-Time": NOW,
        "Etag": "0x1",
        "Content-Length": 1,
        "BlobType": "BlockBlob",
        **row,
    }


def _insert_row(
    store: DocumentStore, number: int, name: str, status: Status, created: datetime
) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            sa.insert(store.table).values(
                id=f"id-{number}",
                name=f"doc-{number}",
                blob_name=name,
                status=status.value,
                created=created,
            )
        )


def _insert_record(store: DocumentStore, number: int, name: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            sa.insert(store.blobs).values(
                blob_name=name,
                document_id=f"id-{number}",
                kind=BlobRecordKind.INTENT.value,
                recorded_utc=NOW,
            )
        )


def reference(
    report: dict[str, tuple[int, bool]], table: dict[str, tuple[str, int]], records: set[str]
) -> tuple[int, set[Finding]]:
    """The join as dicts say it: orphan, missing and unsealed suspects, and the blob count."""
    found: set[Finding] = set()
    for name, (modified, _) in report.items():
        if name not in table and name not in records and modified < CUTOFF_MS:
            found.add(("orphan", name))
    for name, (status, created) in table.items():
        if status != Status.READY.value or created >= CUTOFF_MS:
            continue
        if name not in report:
            found.add((MISSING, name))
        elif report[name][1]:
            found.add((UNSEALED, name))
    return len(report), found


@pytest.mark.parametrize("seed", [1, 2])
def test_the_join_finds_what_the_reference_join_finds(
    store: DocumentStore, tmp_path: Path, seed: int
) -> None:
    """On a generated report and table with every kind of finding, names that sort apart in
    other collations and windows of a few rows, the join's suspects and blob count are the
    reference join's."""
    rng = random.Random(seed)
    report, table, records, files = generate(rng, store, tmp_path)
    chunks = sorted_chunks(files, CONTAINER, tmp_path, run_rows=17, fan_in=3)
    rows = table_chunks(store, chunk_rows=13, block_bytes=300)

    windows = list(joined(chunks, rows, CUTOFF_MS))

    got = {("orphan", n) for w in windows for n in w.orphans}
    got |= {(kind, n) for w in windows for n, kind in w.rows}
    count, expected = reference(report, table, records)
    assert {kind for kind, _ in expected} == {"orphan", MISSING, UNSEALED}
    assert sum(w.blobs for w in windows) == count
    assert got == expected


def test_copy_blocks_end_where_rows_end() -> None:
    """The COPY rows are gathered into blocks of at least the size asked, whole rows each."""
    rows = [f"row {n}\n".encode() for n in range(50)]

    blocks = list(copy_blocks(rows, 20))

    assert b"".join(blocks) == b"".join(rows)
    assert all(len(block) >= 20 and block.endswith(b"\n") for block in blocks[:-1])


def test_the_unsealed_flag_is_map_lookups_first_state() -> None:
    """On maps with repeated, missing and null state entries, null maps and a slice, a row is
    unsealed exactly when map_lookup's first `state` value is pending or retired."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = random.Random(3)
    keys, values = [STATE_TAG, "x", "State"], [PENDING, RETIRED, COMMITTED, "", None]
    maps = [
        None
        if rng.random() < 0.1
        else [(rng.choice(keys), rng.choice(values)) for _ in range(rng.randint(0, 3))]
        for _ in range(500)
    ]
    column = pa.array(maps, pa.map_(pa.string(), pa.string())).slice(7, 480)

    got = _unsealed(pa.chunked_array([column.slice(0, 200), column.slice(200)]))

    state = pc.fill_null(pc.map_lookup(column, STATE_TAG, "first"), "")
    assert got.to_pylist() == pc.is_in(state, value_set=pa.array([PENDING, RETIRED])).to_pylist()


@pytest.mark.postgres
def test_a_copy_failing_midway_raises_its_error_after_its_rows(postgres_url: str) -> None:
    """COPY's rows read straight from libpq end with the query's own error, not a short table."""
    import psycopg

    store = DocumentStore.from_url(postgres_url)
    query = "COPY (SELECT 10 / (5000 - n) FROM generate_series(1, 6000) AS n) TO STDOUT"
    got: list[bytes] = []
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        with (
            pytest.raises(psycopg.errors.DivisionByZero),
            raw.cursor() as cursor,
            cursor.copy(query) as copy,
        ):
            got.extend(bytes(row) for row in copy_rows(copy, raw.pgconn))
    store.engine.dispose()
    assert len(got) == 4999
