"""What the sweep overlaps (docs/sweeper.md, "What overlaps"): the next chunk's claim with the
current chunk's deletes, and the binding proof's lookups with each other; never a delete with
a check it must wait for."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from azure.storage.blob import BlobLeaseClient, ContainerClient

from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Document
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.lease import LEASE_BLOB
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from tests.sweeper.conftest import CUTOFF

StaleRows = Callable[..., list[Document]]
CHUNK = 10
SETTINGS = SweepSettings(cutoff=CUTOFF, chunk_size=CHUNK, batch_size=4, concurrency=2)


class SentDeletes:
    """The blob names every Blob Batch of `container` carried, in order, across threads."""

    def __init__(self, container: ContainerClient) -> None:
        self.names: list[str] = []
        self._lock = threading.Lock()
        self._send = container.delete_blobs
        self.before_send: Callable[[], None] = lambda: None
        container.delete_blobs = self._record  # type: ignore[method-assign,assignment]

    def _record(self, *requests: dict[str, Any], **options: Any) -> Any:
        with self._lock:
            self.names += [request["name"] for request in requests]
        self.before_send()
        return self._send(*requests, **options)


def claimed_rows(store: DocumentStore) -> int:
    with store.engine.connect() as conn:
        rows = conn.execute(store.table.select().where(store.table.c.claim_token.is_not(None)))
        return len(rows.all())


def existing(container: ContainerClient, documents: Iterable[Document]) -> int:
    return sum(container.get_blob_client(d.blob_name).exists() for d in documents)


def test_the_next_chunk_is_claimed_while_a_chunk_is_in_flight_and_each_blob_deleted_once(
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: StaleRows,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first chunk's deletes wait for the second chunk's claim, which comes while they are
    in flight; every blob's delete is sent exactly once and every row goes."""
    rows = stale_rows(3 * CHUNK + 5)
    second_claim = threading.Event()
    claims: list[int] = []
    claim = store.claim_stale

    def counting_claim(*args: Any, **kwargs: Any) -> list[Document]:
        claims.append(1)
        if len(claims) == 2:
            second_claim.set()
        return claim(*args, **kwargs)

    monkeypatch.setattr(store, "claim_stale", counting_claim)
    sent = SentDeletes(container)
    overlapped: list[bool] = []

    def first_deletes_wait_for_the_next_claim() -> None:
        if not overlapped:
            overlapped.append(second_claim.wait(timeout=10))

    sent.before_send = first_deletes_wait_for_the_next_claim

    report = Sweeper(store, container, SETTINGS).run()

    assert overlapped[0] is True
    assert sorted(sent.names) == sorted(d.blob_name for d in rows)
    assert (report.deleted_rows, report.errors, store.count()) == (len(rows), [], 0)


def test_a_lease_lost_after_a_chunk_stops_before_the_next_chunks_deletes(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """Another sweeper takes the lease once the first chunk is finished: the chunk claimed
    ahead is handed back with none of its blobs sent a delete, and the sweep stops."""
    rows = stale_rows(3 * CHUNK)
    sent = SentDeletes(container)

    def second_sweeper_arrives(report: SweepReport) -> None:
        blob = container.get_blob_client(LEASE_BLOB)
        if blob.get_blob_properties().lease.state == "leased" and report.deleted_rows == CHUNK:
            BlobLeaseClient(blob).break_lease(lease_break_period=0)
            blob.acquire_lease(lease_duration=60)

    settings = SweepSettings(cutoff=CUTOFF, chunk_size=CHUNK, use_lease=True)
    report = Sweeper(store, container, settings, on_progress=second_sweeper_arrives).run()

    assert "lease renewal" in str(report.stopped)
    assert (report.deleted_rows, store.count(), claimed_rows(store)) == (CHUNK, 2 * CHUNK, 0)
    assert len(sent.names) == CHUNK
    assert existing(container, rows) == 2 * CHUNK


def test_a_stop_after_the_claim_ahead_hands_that_chunk_back_untouched(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """A signal that arrives after the next chunk was claimed: the finished chunk stays
    finished, the claimed one is handed back at once, and none of its blobs is deleted."""
    rows = stale_rows(3 * CHUNK)
    finished: list[int] = []

    def stop_once_a_chunk_is_finished() -> str | None:
        return "SIGTERM" if finished else None

    sweeper = Sweeper(
        store,
        container,
        SETTINGS,
        on_progress=lambda report: finished.append(report.deleted_rows),
        stop_requested=stop_once_a_chunk_is_finished,
    )
    report = sweeper.run()

    assert report.interrupted == "SIGTERM"
    assert (report.deleted_rows, store.count(), claimed_rows(store)) == (CHUNK, 2 * CHUNK, 0)
    assert existing(container, rows) == 2 * CHUNK


def test_a_claim_failing_while_a_chunk_is_in_flight_still_finishes_that_chunk(
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: StaleRows,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database fails the claim ahead: the chunk in flight is still finished (its rows
    deleted), then the run stops with the database's error."""
    stale_rows(3 * CHUNK)
    claim = store.claim_stale
    calls: list[int] = []

    def second_claim_fails(*args: Any, **kwargs: Any) -> list[Document]:
        calls.append(1)
        if len(calls) == 2:
            raise StoreError("the database went away")
        return claim(*args, **kwargs)

    monkeypatch.setattr(store, "claim_stale", second_claim_fails)

    report = Sweeper(store, container, SETTINGS).run()

    assert report.stopped == "the database went away"
    assert (report.deleted_rows, store.count(), claimed_rows(store)) == (CHUNK, 2 * CHUNK, 0)


class SampleOnly:
    """A store that holds only the binding evidence `sample`."""

    def __init__(self, sample: list[tuple[str, bool]]) -> None:
        self.sample = sample

    def sample_blobs(self, limit: int) -> list[tuple[str, bool]]:
        return self.sample[:limit]


def test_the_binding_evidence_is_looked_up_at_once_and_judged_in_order(
    container: ContainerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two lookups are in flight together, and of two Ready rows whose blobs are missing the
    reason names the newest, as lookups one after another would."""
    together = threading.Barrier(2, timeout=10)

    def missing_after_both_asked(_: ContainerClient, __: str) -> bool:
        together.wait()
        return False

    monkeypatch.setattr(binding, "_exists", missing_after_both_asked)
    store = SampleOnly([("newest.bin", True), ("older.bin", True)])

    reason = binding.why_unproven(store, container)  # type: ignore[arg-type]

    assert reason == "a Ready row's blob (newest.bin) is not in this container"
