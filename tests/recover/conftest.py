"""A blob endpoint with the nets on (`blob_safetynet.embedded.recovery` in front of Azurite), a container
on it bound to a fresh database, and the protocol writing through it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite, create_unique_container
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.store.documents import DocumentStore
from tests import tree

KilledThenRerun = Callable[[list[str], int, float, float], "subprocess.CompletedProcess[str]"]


@pytest.fixture(params=[False, True], ids=["soft-delete", "versioning"])
def nets(request: pytest.FixtureRequest, azurite: Azurite) -> Iterator[RecoveryDouble]:
    """An account with blob and container soft delete on, and in the second run versioning too."""
    with RecoveryDouble(azurite.port, versioning=request.param) as double:
        yield double


@pytest.fixture
def soft_delete_only(azurite: Azurite) -> Iterator[RecoveryDouble]:
    with RecoveryDouble(azurite.port) as double:
        yield double


@pytest.fixture
def service(nets: RecoveryDouble) -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(nets.connection_string)


@pytest.fixture
def store(db_url: str) -> Iterator[DocumentStore]:
    documents = DocumentStore.from_url(db_url)
    documents.init_schema()
    yield documents
    documents.engine.dispose()


def bound_container(double: RecoveryDouble, store: DocumentStore) -> ContainerClient:
    """A fresh container on `double`, bound to `store`'s database as a first sweep leaves it."""
    service = BlobServiceClient.from_connection_string(double.connection_string)
    container = create_unique_container(service, "r")
    blobs.bind(container, store.database_id())
    return container


@pytest.fixture
def bound(nets: RecoveryDouble, store: DocumentStore) -> Iterator[ContainerClient]:
    container = bound_container(nets, store)
    yield container
    if container.exists():
        container.delete_container()


@pytest.fixture
def protocol(store: DocumentStore, bound: ContainerClient) -> UploadProtocol:
    return UploadProtocol(store, bound)


@pytest.fixture
def killed_then_rerun() -> KilledThenRerun:
    """`(args, seed, low, high)`: the CLI with `args` started four times, each killed (SIGKILL)
    after a pause drawn from [low, high] seconds by `random.Random(seed)` unless it ended
    first, then run once more to its end (its completed process)."""

    def run(
        args: list[str], seed: int, low: float, high: float
    ) -> subprocess.CompletedProcess[str]:
        argv = [*tree.MODULE, *args]
        env = tree.environment()
        rng = random.Random(seed)
        for _ in range(4):
            process = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree.TREE, env=env
            )
            time.sleep(rng.uniform(low, high))
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=300, check=False, cwd=tree.TREE, env=env
        )

    return run
