"""Factories for the protocol's parts over the shared Azurite and database fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol.upload import Checkpoint, UploadProtocol, no_checkpoint
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status, new_document_id
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import LatencyProxy

CUTOFF = timedelta(minutes=15)


def later() -> datetime:
    """A clock an hour ahead: everything Pending now is stale to a sweeper using it."""
    return datetime.now(UTC) + timedelta(hours=1)


@pytest.fixture
def store(db_url: str) -> Iterator[DocumentStore]:
    documents = DocumentStore.from_url(db_url)
    documents.init_schema()
    yield documents
    documents.engine.dispose()


@pytest.fixture
def protocol_factory(
    store: DocumentStore, container: ContainerClient
) -> Callable[..., UploadProtocol]:
    def make(checkpoint: Checkpoint = no_checkpoint) -> UploadProtocol:
        return UploadProtocol(store, container, checkpoint=checkpoint)

    return make


@pytest.fixture
def protocol(protocol_factory: Callable[..., UploadProtocol]) -> UploadProtocol:
    return protocol_factory()


@pytest.fixture
def sweeper_factory(store: DocumentStore, container: ContainerClient) -> Callable[..., Sweeper]:
    def make(settings: SweepSettings | None = None) -> Sweeper:
        return Sweeper(store, container, settings or SweepSettings(cutoff=CUTOFF))

    return make


def target_options(db_url: str, azurite: Azurite, container: ContainerClient) -> list[str]:
    """The options naming one database and one container, as sweep, reconcile and binding take them."""
    return [
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
    ]


def stale_rows_in(
    store: DocumentStore,
    container: ContainerClient,
    count: int,
    with_blobs: bool = True,
    prefix: str = "stale",
) -> list[Document]:
    """Inserts `count` Pending rows created an hour ago, with pending blobs unless told not to."""
    created = datetime.now(UTC) - timedelta(hours=1)
    documents = [
        Document(new_document_id(), f"{prefix}-{i}", f"{prefix}-{i}.bin", Status.PENDING, created)
        for i in range(count)
    ]
    with store.engine.begin() as conn:
        conn.execute(
            store.table.insert(),
            [
                {
                    "id": d.id,
                    "name": d.name,
                    "blob_name": d.blob_name,
                    "status": d.status.value,
                    "created": d.created_utc,
                }
                for d in documents
            ],
        )
    if with_blobs:
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda d: container.upload_blob(d.blob_name, b"x", tags={STATE_TAG: PENDING}),
                    documents,
                )
            )
    return documents


@pytest.fixture
def stale_rows(store: DocumentStore, container: ContainerClient) -> Callable[..., list[Document]]:
    """`stale_rows(count, with_blobs=True, prefix="stale")` on this test's store and container."""

    def make(count: int, with_blobs: bool = True, prefix: str = "stale") -> list[Document]:
        return stale_rows_in(store, container, count, with_blobs, prefix)

    return make


def age_row(store: DocumentStore, document_id: str, age: timedelta) -> None:
    """Writes the row's created time `age` in the past, as if it had been reserved then."""
    with store.engine.begin() as conn:
        conn.execute(
            store.table.update()
            .where(store.table.c.id == document_id)
            .values(created=datetime.now(UTC) - age)
        )


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[LatencyProxy]:
    """A fault proxy in front of the session's Azurite, with no added latency."""
    with LatencyProxy(azurite.port, delay_s=0) as running:
        yield running
