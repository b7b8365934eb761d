"""The reproductions of issue 8 on Azurite and every database: no path loses a live document."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from azure.core.exceptions import ServiceRequestError
from azure.storage.blob import BlobClient, BlobServiceClient, ContainerClient

from blob_safetynet.embedded.crash import SimulatedCrash, crash_after
from blob_safetynet.protocol.upload import (
    ContentMismatchError,
    ProtocolError,
    ReservationExpiredError,
    UploadFailedError,
    UploadProtocol,
)
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecordKind, Document, Status
from blob_safetynet.sweeper.sweep import Sweeper
from tests.sweeper.conftest import CUTOFF, later, stale_rows_in

StaleRows = Callable[..., list[Document]]


def tags_of(container: ContainerClient, name: str) -> dict[str, str]:
    return container.get_blob_client(name).get_blob_tags()


def sweep(store: DocumentStore, container: ContainerClient, hours_ahead: float = 1) -> Sweeper:
    """A sweeper whose clock runs `hours_ahead` ahead of now."""
    return Sweeper(
        store,
        container,
        SweepSettings(cutoff=CUTOFF),
        clock=lambda: datetime.now(UTC) + timedelta(hours=hours_ahead),
    )


# Item 3: the sweeper never dies of one row.


def test_a_row_with_an_empty_blob_name_does_not_stop_the_sweep(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """A stale row with an empty blob name is reported; the healthy rows of its chunk are swept."""
    healthy = stale_rows(5)
    (broken,) = stale_rows(1, with_blobs=False, prefix="broken")
    with store.engine.begin() as conn:
        conn.execute(store.table.update().where(store.table.c.id == broken.id).values(blob_name=""))

    report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()

    assert (report.deleted_blobs, report.deleted_rows) == (len(healthy), len(healthy))
    assert len(report.errors) == 1
    assert broken.id in report.errors[0]
    assert [d.id for d in store.all()] == [broken.id]
    with store.engine.connect() as conn:  # handed back, not left claimed
        claim = conn.execute(sa.select(store.table.c.claim_token)).scalar_one()
    assert claim is None


# Item 7: roll forward only what is sealed.


@pytest.mark.parametrize("tags", [{}, {STATE_TAG: RETIRED}, {STATE_TAG: "Committed"}])
def test_only_an_exactly_committed_blob_rolls_forward(
    tags: dict[str, str],
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: StaleRows,
) -> None:
    """A stale row whose blob is untagged, retired or `Committed` stays Pending and is reported."""
    (odd,) = stale_rows(1, prefix="odd")
    (sealed,) = stale_rows(1, prefix="sealed")
    container.get_blob_client(odd.blob_name).set_blob_tags(tags)
    container.get_blob_client(sealed.blob_name).set_blob_tags({STATE_TAG: COMMITTED})

    report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()

    assert report.rolled_forward == 1
    assert {d.id: d.status for d in store.all()} == {
        odd.id: Status.PENDING,
        sealed.id: Status.READY,
    }
    assert len(report.errors) == 1
    assert odd.id in report.errors[0]


# Item 8: tags other than `state` survive seal and retire.


def test_seal_and_retire_keep_the_other_tags(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """`tenant` and `retention` set at upload are still there after seal and after retire."""
    extra = {"tenant": "contoso", "retention": "7y"}
    document = protocol.put("tagged.txt", b"v1", ".txt", tags=extra)
    assert tags_of(container, document.blob_name) == {**extra, STATE_TAG: COMMITTED}
    protocol.replace(document.id, b"v2", ".txt", tags=extra)
    assert tags_of(container, document.blob_name) == {**extra, STATE_TAG: RETIRED}


# Items 1 and 6: replace records its crash windows and keeps readers working.


def test_a_reader_of_the_old_bytes_survives_a_replace(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A download started before a replace finishes after it, and after a sweep within the grace."""
    payload = os.urandom(64 * 1024)
    document = protocol.put("big.bin", payload, ".bin")
    chunked = BlobClient.from_blob_url(
        f"{container.url}/{document.blob_name}",
        credential=container.credential,
        max_single_get_size=4096,
        max_chunk_get_size=4096,
    )
    download = chunked.download_blob()  # first chunk fetched; the rest is read later

    protocol.replace(document.id, b"v2", ".bin")
    Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()

    assert download.readall() == payload
    assert protocol.read("big.bin") == b"v2"


def test_retired_blob_is_deleted_after_the_grace_period(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """The sweeper deletes a replaced document's old blob once its grace period has passed."""
    document = protocol.put("cv.txt", b"v1", ".txt")
    replaced = protocol.replace(document.id, b"v2", ".txt")
    assert sweep(store, container, hours_ahead=0).run().retired_deleted == 0
    report = sweep(store, container, hours_ahead=2).run()
    assert (report.retired_deleted, report.errors) == (1, [])
    assert set(list_blobs(container)) == {replaced.blob_name}
    assert store.records() == []


@pytest.mark.parametrize("step", ["replace.intent", "replace.upload", "replace.seal"])
def test_replace_crash_before_switch_leaves_a_record_the_sweeper_clears(
    step: str, protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A replace that died before its switch leaves an intent; the sweeper removes its blob."""
    document = protocol.put("cv.txt", b"v1", ".txt")
    crashing = UploadProtocol(store, container, checkpoint=crash_after(step))
    with pytest.raises(SimulatedCrash):
        crashing.replace(document.id, b"v2", ".txt")
    assert [r.kind for r in store.records()] == [BlobRecordKind.INTENT]

    report = sweep(store, container).run()

    assert report.errors == []
    assert report.abandoned_replacements == 1
    assert set(list_blobs(container)) == {document.blob_name}
    assert protocol.read("cv.txt") == b"v1"
    assert store.records() == []


@pytest.mark.parametrize("sweeper_progress", ["finished", "claimed only"])
def test_replace_stalled_past_the_cutoff_fails_and_keeps_the_old_version(
    sweeper_progress: str, store: DocumentStore, container: ContainerClient
) -> None:
    """A sweep during a stalled replace wins: the replace raises, the document keeps v1."""
    document = UploadProtocol(store, container).put("cv.txt", b"v1", ".txt")

    def stall(step: str) -> None:
        if step != "replace.seal":
            return
        if sweeper_progress == "finished":
            sweep(store, container).run()
        else:  # a sweeper that claimed the intent and is still deleting its blob
            now = later()
            store.claim_records(BlobRecordKind.INTENT, now, 10, "sweeper", now, now)

    with pytest.raises(ReservationExpiredError) as raised:
        UploadProtocol(store, container, checkpoint=stall).replace(document.id, b"v2", ".txt")

    assert raised.value.document_id == document.id
    assert UploadProtocol(store, container).read("cv.txt") == b"v1"
    sweep(store, container, hours_ahead=2).run()
    assert set(list_blobs(container)) == {document.blob_name}


def test_delete_keeps_the_blob_for_readers_until_the_grace_ends(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A deleted document's blob is still downloadable until a sweep after the grace period."""
    document = protocol.put("gone.txt", b"bye", ".txt")
    protocol.delete(document.id)
    sweep(store, container, hours_ahead=0).run()
    assert container.download_blob(document.blob_name).readall() == b"bye"
    assert sweep(store, container, hours_ahead=2).run().retired_deleted == 1
    assert list_blobs(container) == {}


# Item 9: the protocol API.


@pytest.fixture
def new_york_clock() -> Iterator[Callable[[], datetime]]:
    """The process runs in New York time and the application's clock says local time."""
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield lambda: datetime.now().astimezone()
    if previous is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = previous
    time.tzset()


def test_a_local_clock_does_not_make_a_fresh_upload_stale(
    new_york_clock: Callable[[], datetime], store: DocumentStore, container: ContainerClient
) -> None:
    """Timestamps from a non-UTC clock are stored as UTC: a fresh reservation is not swept."""
    protocol = UploadProtocol(store, container, clock=new_york_clock)
    document = protocol.reserve("fresh.txt", ".txt")
    protocol.upload(document, b"uploading")
    report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()
    assert report.examined == 0
    assert store.get(document.id) is not None
    stored = store.get(document.id)
    assert stored is not None
    assert abs(stored.created_utc - datetime.now(UTC)) < timedelta(minutes=1)


def test_a_retry_with_different_bytes_is_refused(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """A retry of an uploaded document with other bytes raises, naming the document."""
    document = protocol.reserve("report.txt", ".txt")
    protocol.upload(document, b"first")
    with pytest.raises(ContentMismatchError) as raised:
        protocol.complete(document.id, b"second")
    assert raised.value.document_id == document.id
    assert container.download_blob(document.blob_name).readall() == b"first"


def test_a_stream_retry_with_different_bytes_is_refused(protocol: UploadProtocol) -> None:
    """The same check holds for streams, whose hash is computed while they are read."""
    document = protocol.reserve("stream.bin", ".bin")
    protocol.upload(document, io.BytesIO(b"first stream"))
    with pytest.raises(ContentMismatchError):
        protocol.complete(document.id, io.BytesIO(b"other stream"))
    assert protocol.complete(document.id, io.BytesIO(b"first stream")).status is Status.READY


@pytest.mark.parametrize("data", [b"0123456789", io.BytesIO(b"0123456789")])
def test_a_length_that_does_not_match_the_data_is_refused(
    data: bytes | io.BytesIO, protocol: UploadProtocol, container: ContainerClient
) -> None:
    """`length` shorter than the data never seals truncated bytes."""
    with pytest.raises(ContentMismatchError):
        protocol.put("short.txt", data, ".txt", length=4)
    assert all(tags_of(container, n)[STATE_TAG] == PENDING for n in list_blobs(container))
    with pytest.raises(Exception, match="no ready document"):
        protocol.read("short.txt")


def test_a_failed_put_names_its_document_and_abandon_frees_the_name(
    store: DocumentStore, protocol: UploadProtocol
) -> None:
    """A put that fails after reserving carries the document id; abandon releases the name."""
    offline = BlobServiceClient(
        "http://127.0.0.1:1/devstoreaccount1", retry_total=0, connection_timeout=2
    ).get_container_client("documents")
    with pytest.raises(UploadFailedError) as raised:
        UploadProtocol(store, offline).put("invoice.pdf", b"%PDF", ".pdf")
    assert isinstance(raised.value.__cause__, ServiceRequestError)
    document_id = raised.value.document_id
    assert document_id is not None
    assert store.get(document_id) is not None

    assert protocol.abandon(document_id)
    assert store.get(document_id) is None
    assert protocol.put("invoice.pdf", b"%PDF", ".pdf").status is Status.READY


def test_abandon_deletes_the_pending_blob(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Abandoning an uploaded but unsealed reservation removes its blob and its row at once."""
    document = protocol.reserve("draft.txt", ".txt")
    protocol.upload(document, b"draft")
    assert protocol.abandon(document.id)
    assert store.count() == 0
    assert list_blobs(container) == {}


def test_a_dry_run_stamps_and_locks_nothing(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """A dry run writes no claim onto the rows it reads."""
    stale_rows(3)
    Sweeper(store, container, SweepSettings(cutoff=CUTOFF, dry_run=True)).run()
    with store.engine.connect() as conn:
        claims = conn.execute(
            store.table.select().with_only_columns(store.table.c.claim_token)
        ).scalars()
        assert set(claims) == {None}


def test_claims_of_a_dead_sweeper_expire(store: DocumentStore, container: ContainerClient) -> None:
    """Rows claimed by a sweeper that died are swept by the next one once the claim expires."""
    documents = stale_rows_in(store, container, 3)
    now = datetime.now(UTC)
    assert len(store.claim_stale(now, 10, "dead-sweeper", now, now - timedelta(minutes=10))) == 3
    assert Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run().examined == 0
    report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF), clock=later).run()
    assert report.deleted_rows == len(documents)


def test_a_record_naming_a_live_blob_never_deletes_it(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A retired record for a blob a Ready row still uses is reported; the blob is kept."""
    document = protocol.put("live.txt", b"live", ".txt")
    with store.engine.begin() as conn:
        conn.execute(
            store.blobs.insert().values(
                blob_name=document.blob_name,
                document_id=document.id,
                kind=BlobRecordKind.RETIRED.value,
                recorded_utc=datetime.now(UTC) - timedelta(days=1),
            )
        )
    report = sweep(store, container).run()
    assert report.retired_deleted == 0
    assert any(document.id in error for error in report.errors)
    assert protocol.read("live.txt") == b"live"


def test_a_retry_of_a_published_document_with_other_bytes_is_refused(
    protocol: UploadProtocol, store: DocumentStore
) -> None:
    """Once published, a retry with the same id and other bytes raises instead of returning."""
    document = protocol.put("final.txt", b"published", ".txt")
    assert protocol.put("final.txt", b"published", ".txt", document_id=document.id) == document
    with pytest.raises(ContentMismatchError):
        protocol.put("final.txt", b"different", ".txt", document_id=document.id)


def test_replace_records_the_new_content(protocol: UploadProtocol, store: DocumentStore) -> None:
    """After a replace the row's length and hash describe the new bytes."""
    document = protocol.put("cv.txt", b"v1", ".txt")
    protocol.replace(document.id, io.BytesIO(b"version 2"), ".txt")
    content = store.content(document.id)
    assert content is not None
    assert content.length == len(b"version 2")


def test_abandon_refuses_a_sealed_reservation(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A sealed blob holds complete bytes: abandon leaves blob and row for `complete`."""
    document = protocol.reserve("sealed.txt", ".txt")
    protocol.upload(document, b"complete")
    protocol.seal(document)
    with pytest.raises(ProtocolError, match="complete"):
        protocol.abandon(document.id)
    assert protocol.complete(document.id, b"complete").status is Status.READY


def test_a_record_that_fails_is_reported_once_and_the_rest_proceed(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """With one record per chunk, a failing record is reported once and the next is cleared."""
    odd = protocol.put("odd.txt", b"odd", ".txt")
    plain = protocol.put("plain.txt", b"plain", ".txt")
    protocol.delete(odd.id)
    protocol.delete(plain.id)
    container.get_blob_client(odd.blob_name).set_blob_tags({STATE_TAG: "legal-hold"})
    settings = SweepSettings(cutoff=CUTOFF, chunk_size=1)
    report = Sweeper(store, container, settings, clock=lambda: later() + timedelta(hours=1)).run()
    assert report.retired_deleted == 1
    assert len(report.errors) == 1
    assert odd.blob_name in report.errors[0]
    assert set(list_blobs(container)) == {odd.blob_name}
    assert [r.blob_name for r in store.records()] == [odd.blob_name]
