"""Issue 17 on Azurite with SQLite and PostgreSQL: the row describes the bytes stored, no sealed
blob is left without a record, one clock stamps time, every failure names its document.

Lost answers go through the blob fault proxy; a lost COMMIT through a proxy in front of a real
PostgreSQL (testkit/pg_proxy.py).
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.crash import BLOCK, RacingStream
from blob_safetynet.protocol.upload import (
    ContentMismatchError,
    OperationFailedError,
    ReservationExpiredError,
    UploadFailedError,
    UploadProtocol,
)
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecordKind, Status
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import Fault, LatencyProxy
from testkit.pg_proxy import postgres_proxy
from tests.conftest import RunCli
from tests.sweeper.conftest import CUTOFF

STAGED = os.urandom(3 * BLOCK)
"""Three blocks: uploaded with Put Block x3 and Put Block List by a `staged` client."""
SKEW = timedelta(hours=2)


def sweep_at(store: DocumentStore, container: ContainerClient, ahead: timedelta) -> Sweeper:
    """A sweeper whose clock runs `ahead` of this machine's (the database server's too), on a
    pair bound as one deployment (as `safetynet binding bind` binds it)."""
    binding.bind(store, container)
    return Sweeper(
        store, container, SweepSettings(cutoff=CUTOFF), clock=lambda: datetime.now(UTC) + ahead
    )


def client_through(
    endpoint: str, container: ContainerClient, *, retries: int = 0, staged: bool = False
) -> ContainerClient:
    """The test's container through `endpoint`; `staged` uploads anything over 4 KiB in blocks."""
    sizes = {"max_single_put_size": BLOCK, "max_block_size": BLOCK} if staged else {}
    service = BlobServiceClient.from_connection_string(
        endpoint, retry_total=retries, read_timeout=10, **sizes
    )
    return service.get_container_client(container.container_name)


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[LatencyProxy]:
    with LatencyProxy(azurite.port, delay_s=0) as running:
        yield running


def server_of(url: str) -> tuple[str, int]:
    parsed = sa.make_url(url)
    return parsed.host or "127.0.0.1", parsed.port or 5432


def stored(container: ContainerClient, blob_name: str) -> bytes:
    return container.download_blob(blob_name).readall()


# Item 1: the row's recorded content always describes the stored bytes.


@pytest.mark.parametrize(
    ("staged", "lost"), [(False, "PUT"), (True, "PUT comp=blocklist")], ids=["single", "staged"]
)
def test_a_resume_with_other_stream_bytes_after_a_lost_upload_answer_is_refused(
    staged: bool,
    lost: str,
    proxy: LatencyProxy,
    store: DocumentStore,
    container: ContainerClient,
) -> None:
    """The upload landed but its answer was lost; resuming with other stream bytes raises."""
    client = client_through(proxy.connection_string, container, staged=staged)
    proxy.inject(lost, Fault(reset="after"))
    with pytest.raises(UploadFailedError) as failed:
        UploadProtocol(store, client).put("doc.bin", io.BytesIO(STAGED), ".bin", length=len(STAGED))
    document_id = failed.value.document_id
    assert document_id is not None
    document = store.get(document_id)
    assert document is not None

    with pytest.raises(ContentMismatchError) as refused:
        UploadProtocol(store, container).complete(document_id, io.BytesIO(STAGED[::-1]))

    assert refused.value.document_id == document_id
    assert stored(container, document.blob_name) == STAGED
    assert store.get(document_id) == document  # still Pending: nothing acknowledged
    finished = UploadProtocol(store, container).complete(document_id, io.BytesIO(STAGED))
    assert finished.status is Status.READY


def test_a_second_writer_with_other_stream_bytes_is_refused_while_the_first_waits(
    proxy: LatencyProxy, store: DocumentStore, container: ContainerClient
) -> None:
    """Two writers on one document, the first one's answer late: the second is refused and the
    first, whose bytes are stored, publishes them."""
    document = UploadProtocol(store, container).reserve("two.bin", ".bin")
    proxy.inject("PUT", Fault(stall_s=1.5))
    first = UploadProtocol(store, client_through(proxy.connection_string, container))
    outcome: list[object] = []
    writer = threading.Thread(
        target=lambda: outcome.append(first.complete(document.id, io.BytesIO(b"first"), 5))
    )
    writer.start()
    blob = container.get_blob_client(document.blob_name)
    deadline = time.monotonic() + 10
    while not blob.exists() and time.monotonic() < deadline:
        time.sleep(0.05)

    with pytest.raises(ContentMismatchError):
        UploadProtocol(store, container).complete(document.id, io.BytesIO(b"other bytes"))

    writer.join()
    assert [getattr(o, "status", o) for o in outcome] == [Status.READY]
    assert stored(container, document.blob_name) == b"first"


def test_complete_on_a_ready_document_with_other_stream_bytes_is_refused(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A retry after publish with another stream raises; the same stream returns the document."""
    protocol = UploadProtocol(store, container)
    document = protocol.put("final.bin", io.BytesIO(b"published"), ".bin")
    with pytest.raises(ContentMismatchError):
        protocol.complete(document.id, io.BytesIO(b"different"))
    assert protocol.complete(document.id, io.BytesIO(b"published")) == document


def test_a_normal_put_makes_no_more_blob_requests(
    proxy: LatencyProxy, store: DocumentStore, container: ContainerClient
) -> None:
    """A put of a stream of known length is one Put Blob and, on Azurite (which ignores the
    seal's condition, found out once beforehand), the seal's three tag calls."""
    client = client_through(proxy.connection_string, container)
    protocol = UploadProtocol(store, client)
    protocol.guards.enforced(client)
    proxy.reset()
    protocol.put("counted.bin", io.BytesIO(b"counted"), ".bin", length=7)
    assert sum(proxy.counts().values()) == 4


# Item 2: no sealed blob is left without a row or a record.


def swept_meanwhile(store: DocumentStore, container: ContainerClient) -> None:
    """While the upload is on its way, a sweep far ahead takes the reservation (no blob yet)."""
    sweep_at(store, container, timedelta(hours=1)).run()


def abandoned_meanwhile(store: DocumentStore, container: ContainerClient) -> None:
    """While the upload is on its way, another process abandons the reservation."""
    (only,) = store.all()
    UploadProtocol(store, container).abandon(only.id)


def assert_retired_then_swept(store: DocumentStore, container: ContainerClient, blob: str) -> None:
    assert [(r.blob_name, r.kind) for r in store.records()] == [(blob, BlobRecordKind.RETIRED)]
    assert container.get_blob_client(blob).get_blob_tags()[STATE_TAG] == RETIRED
    sweep_at(store, container, timedelta(hours=2)).run()
    assert list_blobs(container) == {}
    assert store.records() == []


@pytest.mark.parametrize("race", [swept_meanwhile, abandoned_meanwhile])
def test_a_reservation_gone_before_publish_leaves_a_retired_record(
    race: Callable[[DocumentStore, ContainerClient], None],
    proxy: LatencyProxy,
    store: DocumentStore,
    container: ContainerClient,
) -> None:
    """Upload and seal land after the row vanished: publish raises, and the sealed blob is
    recorded and tagged retired, so the sweeper removes it."""
    proxy.once("PUT", lambda: race(store, container))
    protocol = UploadProtocol(store, client_through(proxy.connection_string, container))
    with pytest.raises(ReservationExpiredError) as raised:
        protocol.put("late.txt", b"late bytes", ".txt")
    assert raised.value.document_id is not None
    (blob,) = list_blobs(container)
    assert_retired_then_swept(store, container, blob)


def test_staged_blocks_committed_after_a_guarded_delete_are_retired(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """A staged upload whose reservation is swept between its blocks ends retired, not orphaned."""
    staged = client_through(azurite.connection_string, container, staged=True)
    data = RacingStream(STAGED, sweep_at(store, container, timedelta(hours=1)).run, at_read=2)
    with pytest.raises(ReservationExpiredError):
        UploadProtocol(store, staged).put("staged.bin", data, ".bin", length=len(STAGED))
    (blob,) = list_blobs(container)
    assert stored(container, blob) == STAGED
    assert_retired_then_swept(store, container, blob)


# Item 7: one clock, the database's.


@pytest.mark.parametrize("skew", [-SKEW, SKEW], ids=["2h behind", "2h ahead"])
def test_a_writer_clock_does_not_stamp_the_reservation(
    skew: timedelta, store: DocumentStore, container: ContainerClient
) -> None:
    """A writer whose clock is 2 h off reserves at the database's time: not swept at once when
    behind, swept after the cutoff when ahead."""
    skewed = UploadProtocol(store, container, clock=lambda: datetime.now(UTC) + skew)
    document = skewed.reserve("skewed.txt", ".txt")
    assert sweep_at(store, container, timedelta(0)).run().examined == 0
    assert sweep_at(store, container, CUTOFF + timedelta(minutes=1)).run().deleted_rows == 1
    assert store.get(document.id) is None


def test_a_writer_two_hours_behind_can_put_and_replace_while_the_sweeper_runs(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A sweep with the database's clock between every step of a slow writer's put and replace
    takes neither its reservation nor its replace's intent."""

    binding.bind(store, container)

    def sweep_now(step: str) -> None:
        Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()

    behind = UploadProtocol(
        store, container, clock=lambda: datetime.now(UTC) - SKEW, checkpoint=sweep_now
    )
    document = behind.put("behind.txt", b"v1", ".txt")
    replaced = behind.replace(document.id, b"v2", ".txt")
    assert behind.read("behind.txt") == b"v2"
    assert replaced.blob_name in list_blobs(container)


# Item 8: a floor for the retired grace.


@pytest.mark.parametrize("text", ["1s", "14m"])
def test_a_retired_grace_under_the_floor_is_refused_with_its_reason(text: str) -> None:
    """`--retired-grace` below 15 minutes is refused, saying why downloads need it."""
    with pytest.raises(SettingsError, match="outlive every download") as refused:
        appsettings.RETIRED_GRACE.duration(text, "--retired-grace")
    assert "--retired-grace" in str(refused.value)
    assert appsettings.RETIRED_GRACE.duration("15m") == timedelta(minutes=15)


def test_sweep_with_a_retired_grace_under_the_floor_exits_2(
    run_cli: RunCli, azurite: Azurite, tmp_path: Path
) -> None:
    """`safetynet sweep --retired-grace 1s` is a usage error naming the option and the floor."""
    code, _, err = run_cli(
        "sweep",
        "--db",
        f"sqlite:///{tmp_path / 'documents.db'}",
        "--connection-string",
        azurite.connection_string,
        "--retired-grace",
        "1s",
    )
    assert code == ExitCode.USAGE
    assert "--retired-grace" in err
    assert "15m" in err
    assert "outlive every download" in err


# Item 9: every failure names its document, a lost reserve COMMIT included.


@pytest.mark.postgres
def test_a_lost_reserve_commit_names_the_document_and_the_retry_resumes(
    postgres_url: str, container: ContainerClient
) -> None:
    """The reservation committed but its answer was lost: put raises UploadFailedError with the
    document id, and a put with that id publishes the one reservation."""
    with postgres_proxy(server_of(postgres_url)) as database:
        store = DocumentStore.from_url(database.url_through(postgres_url))
        store.init_schema()
        protocol = UploadProtocol(store, container)
        database.lose_next_statement_answer()  # the reservation is one INSERT, its own commit
        with pytest.raises(UploadFailedError) as failed:
            protocol.put("lost.txt", b"bytes", ".txt")
        assert database.lost == 1
        document_id = failed.value.document_id
        assert document_id is not None
        assert document_id in str(failed.value)
        assert store.get(document_id) is not None

        document = protocol.put("lost.txt", b"bytes", ".txt", document_id=document_id)

        assert (document.id, document.status) == (document_id, Status.READY)
        assert store.count() == 1
        store.engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("fault", ["drop_next_commit", "lose_next_commit_answer"])
def test_a_failed_content_record_commit_still_refuses_other_bytes(
    fault: str, postgres_url: str, container: ContainerClient
) -> None:
    """The database fails the content record's COMMIT after the upload (never committed, or
    committed and its answer lost): the put fails, a resume with other bytes is refused."""
    with postgres_proxy(server_of(postgres_url)) as database:
        store = DocumentStore.from_url(database.url_through(postgres_url))
        store.init_schema()
        protocol = UploadProtocol(store, container)
        document = protocol.reserve("record.bin", ".bin")
        getattr(database, fault)()
        with pytest.raises(UploadFailedError):
            protocol.put("record.bin", io.BytesIO(b"first"), ".bin", document_id=document.id)
        assert database.lost == 1
        with pytest.raises(ContentMismatchError):
            protocol.complete(document.id, io.BytesIO(b"second"))
        assert stored(container, document.blob_name) == b"first"
        assert protocol.complete(document.id, io.BytesIO(b"first")).status is Status.READY
        store.engine.dispose()


@pytest.mark.postgres
def test_a_lost_delete_commit_names_the_document(
    postgres_url: str, container: ContainerClient
) -> None:
    """A delete whose COMMIT answer is lost raises OperationFailedError with the document id."""
    with postgres_proxy(server_of(postgres_url)) as database:
        store = DocumentStore.from_url(database.url_through(postgres_url))
        store.init_schema()
        protocol = UploadProtocol(store, container)
        document = protocol.put("gone.txt", b"bye", ".txt")
        database.lose_next_commit_answer()
        with pytest.raises(OperationFailedError) as failed:
            protocol.delete(document.id)
        assert failed.value.document_id == document.id
        assert document.id in str(failed.value)
        assert store.get(document.id) is None
        store.engine.dispose()


def test_a_replace_failure_names_the_document(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A blob service that cannot be reached fails replace with the document's id."""
    document = UploadProtocol(store, container).put("named.txt", b"v1", ".txt")
    offline = BlobServiceClient(
        "http://127.0.0.1:1/devstoreaccount1", retry_total=0, connection_timeout=2
    ).get_container_client(container.container_name)
    protocol = UploadProtocol(store, offline)
    with pytest.raises(OperationFailedError) as replacing:
        protocol.replace(document.id, b"v2", ".txt")
    assert replacing.value.document_id == document.id
    assert document.id in str(replacing.value)
    assert isinstance(replacing.value.__cause__, AzureError)
    assert container.get_blob_client(document.blob_name).get_blob_tags()[STATE_TAG] == COMMITTED


def test_a_replace_with_an_invalid_extension_names_the_document(
    store: DocumentStore, container: ContainerClient
) -> None:
    """An extension refused by replace is reported with the document it was meant for."""
    protocol = UploadProtocol(store, container)
    document = protocol.put("ext.txt", b"v1", ".txt")
    with pytest.raises(ValueError, match=f"document {document.id}") as refused:
        protocol.replace(document.id, b"v2", "pdf")
    assert getattr(refused.value, "document_id", None) == document.id


def test_an_invalid_name_says_no_document_was_reserved(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A put refused before its reservation says there is no document yet."""
    with pytest.raises(ValueError, match="no document was reserved"):
        UploadProtocol(store, container).put("", b"x")
    assert store.count() == 0
