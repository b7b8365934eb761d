"""The upload protocol on real Azurite and real databases."""

from __future__ import annotations

import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.crash import PUT_STEPS, SimulatedCrash, crash_after
from blob_safetynet.protocol.upload import (
    InvalidNameError,
    ProtocolError,
    ReservationExpiredError,
    UploadProtocol,
)
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore, NameConflictError
from blob_safetynet.store.tables import BlobRecordKind, Status


def blob_state(container: ContainerClient, name: str) -> str:
    return container.get_blob_client(name).get_blob_tags()[STATE_TAG]


def test_put_publishes_a_sealed_blob(protocol: UploadProtocol, container: ContainerClient) -> None:
    """A completed put leaves a Ready row whose blob holds the bytes and says committed."""
    document = protocol.put("invoice.pdf", b"%PDF-1.7", ".pdf")
    assert document.status is Status.READY
    assert document.blob_name.endswith(".pdf")
    assert protocol.read("invoice.pdf") == b"%PDF-1.7"
    assert blob_state(container, document.blob_name) == COMMITTED


def test_reserved_document_is_invisible_to_readers(protocol: UploadProtocol) -> None:
    """Readers see nothing until the row is published."""
    document = protocol.reserve("draft.txt", ".txt")
    protocol.upload(document, b"half done")
    with pytest.raises(ProtocolError):
        protocol.read("draft.txt")


def test_upload_streams_a_file_object(protocol: UploadProtocol, container: ContainerClient) -> None:
    """A stream is uploaded as-is and tagged pending until sealed."""
    document = protocol.reserve("stream.bin", ".bin")
    payload = bytes(range(256)) * 4096
    assert protocol.upload(document, io.BytesIO(payload), len(payload))
    assert blob_state(container, document.blob_name) == PENDING
    assert container.download_blob(document.blob_name).readall() == payload


@pytest.mark.parametrize("step", PUT_STEPS)
def test_retry_after_crash_completes_without_overwriting(
    step: str,
    protocol_factory: Callable[..., UploadProtocol],
    container: ContainerClient,
    store: DocumentStore,
) -> None:
    """Retrying with the same id and bytes after a crash at any step publishes them once."""
    reservation = protocol_factory().reserve("report.txt", ".txt")
    if step != "reserve":
        with pytest.raises(SimulatedCrash):
            protocol_factory(checkpoint=crash_after(step)).complete(reservation.id, b"first")
    blob = container.get_blob_client(reservation.blob_name)
    etag_before = blob.get_blob_properties().etag if blob.exists() else None

    finished = protocol_factory().put("report.txt", b"first", ".txt", document_id=reservation.id)

    assert finished.status is Status.READY
    assert store.count() == 1
    assert blob.download_blob().readall() == b"first"
    if etag_before is not None:
        assert blob.get_blob_properties().etag == etag_before


def test_concurrent_reservations_of_one_name_have_one_winner(
    protocol: UploadProtocol, container: ContainerClient, store: DocumentStore
) -> None:
    """50 concurrent puts of one name: one publishes, 49 get a conflict, no blob is orphaned."""

    def attempt(i: int) -> str:
        try:
            protocol.put("contended.txt", f"writer {i}".encode(), ".txt")
        except NameConflictError:
            return "conflict"
        return "won"

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(attempt, range(50)))
    assert outcomes.count("won") == 1
    assert outcomes.count("conflict") == 49
    rows = store.all()
    assert [d.status for d in rows] == [Status.READY]
    assert list(list_blobs(container)) == [rows[0].blob_name]


def test_replace_switches_and_retires_old_bytes(
    protocol: UploadProtocol, container: ContainerClient, store: DocumentStore
) -> None:
    """After a replace the row points at the new sealed bytes; the old blob is retired, recorded."""
    original = protocol.put("cv.txt", b"v1", ".txt")
    replaced = protocol.replace(original.id, b"v2", ".txt")
    assert protocol.read("cv.txt") == b"v2"
    assert set(list_blobs(container)) == {original.blob_name, replaced.blob_name}
    assert blob_state(container, replaced.blob_name) == COMMITTED
    assert blob_state(container, original.blob_name) == RETIRED
    assert [(r.blob_name, r.kind) for r in store.records()] == [
        (original.blob_name, BlobRecordKind.RETIRED)
    ]


def test_delete_removes_row_and_records_blob(
    protocol: UploadProtocol, container: ContainerClient, store: DocumentStore
) -> None:
    """A deleted document's row goes at once; its blob is retired and recorded for the sweeper."""
    document = protocol.put("gone.txt", b"bye", ".txt")
    protocol.delete(document.id)
    assert store.count() == 0
    assert blob_state(container, document.blob_name) == RETIRED
    assert [r.blob_name for r in store.records(BlobRecordKind.RETIRED)] == [document.blob_name]


def test_swept_reservation_cannot_be_completed(
    protocol: UploadProtocol, store: DocumentStore
) -> None:
    """Completing a reservation whose row was swept fails instead of publishing."""
    document = protocol.reserve("late.txt", ".txt")
    with store.engine.begin() as conn:
        conn.execute(store.table.delete())
    with pytest.raises(ReservationExpiredError):
        protocol.complete(document.id, b"too late")


@pytest.mark.parametrize(
    ("name", "extension"),
    [("", ".txt"), ("x" * 1025, ".txt"), ("tab\there", ".txt"), ("ok", "pdf"), ("ok", ".p/df")],
)
def test_invalid_names_are_refused_before_any_write(
    name: str, extension: str, protocol: UploadProtocol, store: DocumentStore
) -> None:
    """Empty, overlong or control-character names and malformed extensions are refused."""
    with pytest.raises(InvalidNameError):
        protocol.put(name, b"data", extension)
    assert store.count() == 0


def test_unreachable_blob_endpoint_is_reported(store: DocumentStore) -> None:
    """An endpoint with nothing listening fails the upload with a connection error."""
    service = BlobServiceClient(
        "http://127.0.0.1:1/devstoreaccount1", retry_total=0, connection_timeout=2
    )
    protocol = UploadProtocol(store, service.get_container_client("documents"))
    document = protocol.reserve("offline.txt", ".txt")
    with pytest.raises(ServiceRequestError):
        protocol.upload(document, b"data")
