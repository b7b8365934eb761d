"""Issue 24: the seal and the retire as one guarded tag write where the service evaluates
x-ms-if-tags (the enforcing double in front of Azurite stands in for Azure), and the read-back
workaround only where the service ignores it (Azurite alone, detected once and logged)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.invariants import instant_invariants, snapshot
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import ReservationExpiredError, UploadProtocol
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import LatencyProxy
from testkit.service_doubles import ServiceDouble, tag_guarding_service
from tests.sweeper.conftest import CUTOFF

UPLOAD, TAGS_SET, TAGS_GET = "PUT", "PUT comp=tags", "GET comp=tags"


@pytest.fixture
def enforcing(azurite: Azurite) -> Iterator[ServiceDouble]:
    with tag_guarding_service(azurite.port) as service:
        yield service


def assert_ready_rows_sound(store: DocumentStore, container: ContainerClient) -> None:
    """I1 and I2 (with I3, I6) as they stand now."""
    now = snapshot(container)
    assert [r for r in instant_invariants(store.all(), now, now) if not r.holds] == []


def through(endpoint: str, container: ContainerClient) -> ContainerClient:
    service = BlobServiceClient.from_connection_string(endpoint, retry_total=0)
    return service.get_container_client(container.container_name)


def warmed(
    store: DocumentStore, container: ContainerClient, service: LatencyProxy
) -> UploadProtocol:
    """A protocol whose guards already know the endpoint; the service's counter reset."""
    protocol = UploadProtocol(store, container)
    protocol.guards.enforced(container)
    service.reset()
    return protocol


@pytest.fixture
def guarded(
    store: DocumentStore, container: ContainerClient, enforcing: ServiceDouble
) -> UploadProtocol:
    """The protocol on the test's container through the enforcing double, already probed."""
    return warmed(store, through(enforcing.connection_string, container), enforcing)


def test_a_put_sends_the_upload_and_one_guarded_tag_write(
    guarded: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    enforcing: ServiceDouble,
) -> None:
    """On a service that evaluates the condition, a put is exactly two blob requests."""
    document = guarded.put("a.txt", b"bytes", tags={"tenant": "t1"})
    assert enforcing.counts() == Counter({UPLOAD: 1, TAGS_SET: 1})
    assert container.get_blob_client(document.blob_name).get_blob_tags() == {
        STATE_TAG: COMMITTED,
        "tenant": "t1",
    }
    assert store.get(document.id) == document


def test_a_replace_sends_upload_seal_and_retire(
    guarded: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    enforcing: ServiceDouble,
) -> None:
    """A replace is three blob requests: the new blob's upload and seal, the old one's retire."""
    first = guarded.put("r.txt", b"one")
    enforcing.reset()
    guarded.replace(first.id, b"two")
    assert enforcing.counts() == Counter({UPLOAD: 1, TAGS_SET: 2})
    assert blobs.state_of(container.get_blob_client(first.blob_name)) == RETIRED


def test_a_retire_whose_guess_misses_reads_the_tags_and_keeps_them(
    guarded: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    enforcing: ServiceDouble,
) -> None:
    """The old blob's other tags differ from the replace's: 412, then read, then written kept."""
    first = guarded.put("g.txt", b"one", tags={"tenant": "old"})
    guarded.replace(first.id, b"two", tags={"tenant": "new"})
    assert container.get_blob_client(first.blob_name).get_blob_tags() == {
        STATE_TAG: RETIRED,
        "tenant": "old",
    }


def test_the_seal_is_refused_when_the_state_changed_after_the_upload(
    store: DocumentStore, container: ContainerClient, enforcing: ServiceDouble
) -> None:
    """A blob retired between upload and seal is not sealed: the condition refuses the write
    (dropping the condition seals it: seen red), and the row never turns Ready."""
    guarded = through(enforcing.connection_string, container)
    protocol = warmed(store, guarded, enforcing)

    def retire_it() -> None:
        (name,) = [b.name for b in container.list_blobs() if not b.name.startswith(".")]
        container.get_blob_client(name).set_blob_tags({STATE_TAG: RETIRED})

    enforcing.once(TAGS_SET, retire_it)
    with pytest.raises(ReservationExpiredError) as raised:
        protocol.put("raced.txt", b"bytes")
    document = store.get(str(raised.value.document_id))
    assert document is not None
    assert document.status is Status.PENDING
    assert blobs.state_of(container.get_blob_client(document.blob_name)) == RETIRED
    assert_ready_rows_sound(store, container)


def test_a_sweeper_that_deletes_the_pending_blob_before_the_seal_leaves_nothing_ready(
    store: DocumentStore, container: ContainerClient, enforcing: ServiceDouble
) -> None:
    """The sweep between upload and seal takes blob and row: the seal fails, nothing is Ready."""
    guarded = through(enforcing.connection_string, container)
    protocol = warmed(store, guarded, enforcing)
    sweeper = Sweeper(
        store,
        guarded,
        SweepSettings(cutoff=CUTOFF),
        clock=lambda: datetime.now(UTC) + timedelta(hours=1),
    )
    enforcing.once(TAGS_SET, lambda: sweeper.run())
    with pytest.raises(ReservationExpiredError):
        protocol.put("swept.txt", b"bytes")
    assert store.count(Status.READY) == 0
    assert_ready_rows_sound(store, container)


def test_azurite_alone_gets_the_read_back_and_a_log_line_once(
    store: DocumentStore,
    container: ContainerClient,
    proxy: LatencyProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Azurite ignores the condition: detected once (logged), then each seal reads the state
    before and after its write."""
    plain = through(proxy.connection_string, container)
    protocol = UploadProtocol(store, plain)
    with caplog.at_level(logging.INFO, logger="safetynet.sweeper"):
        protocol.put("one.txt", b"1")
        proxy.reset()
        protocol.put("two.txt", b"2")
    said = [r.message for r in caplog.records if "x-ms-if-tags" in r.message]
    assert len(said) == 1
    assert "ignores x-ms-if-tags" in said[0]
    assert proxy.counts() == Counter({UPLOAD: 1, TAGS_GET: 2, TAGS_SET: 1})


def test_an_azure_endpoint_is_trusted_without_a_probe() -> None:
    """Nothing is sent to decide that an Azure endpoint evaluates the condition."""
    container = ContainerClient("https://nosuchaccount.blob.core.windows.net", "documents")
    assert blobs.TagGuards().enforced(container) is True
    assert not blobs.looks_like_emulator(container)


def test_a_put_of_bytes_sends_two_sql_statements(
    guarded: UploadProtocol, store: DocumentStore
) -> None:
    """The reservation carries the content record, so a put is one INSERT and one UPDATE."""
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement.split()[0].upper())

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        guarded.put("counted.txt", b"bytes")
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    assert statements == ["INSERT", "UPDATE"]
