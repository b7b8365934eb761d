"""A table and a container bound to each other (as a first sweep leaves them) and a restore
point of the table: what every roll-forward test starts from. Plain Azurite: the roll-forward
needs none of the nets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.store.documents import DocumentStore
from testkit.restore_point import RestorePoint


def bind(store: DocumentStore, container: ContainerClient) -> None:
    blobs.bind(container, store.database_id())
    store.bind_container(f"{container.account_name}/{container.container_name}")


@pytest.fixture
def bound(store: DocumentStore, container: ContainerClient) -> ContainerClient:
    bind(store, container)
    return container


@pytest.fixture
def point(store: DocumentStore, tmp_path: Path) -> RestorePoint:
    return RestorePoint(store, tmp_path / "restore-point.db")


Case = Callable[[str], tuple[DocumentStore, ContainerClient, RestorePoint]]


@pytest.fixture
def case(container_factory: Callable[[], ContainerClient], tmp_path: Path) -> Iterator[Case]:
    """A fresh table at `url` and a fresh container bound to each other, and a restore point."""
    stores: list[DocumentStore] = []

    def make(url: str) -> tuple[DocumentStore, ContainerClient, RestorePoint]:
        store = DocumentStore.from_url(url)
        store.init_schema()
        stores.append(store)
        container = container_factory()
        bind(store, container)
        return store, container, RestorePoint(store, tmp_path / "restore-point.db")

    yield make
    for store in stores:
        store.engine.dispose()
