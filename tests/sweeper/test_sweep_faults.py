"""The sweeper under a failing blob service: a loopback proxy answers batches with 503."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import LatencyProxy
from tests.sweeper.conftest import CUTOFF, stale_rows_in

BATCH = "POST comp=batch"


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[LatencyProxy]:
    with LatencyProxy(azurite.port, delay_s=0) as running:
        yield running


@pytest.fixture
def proxied(proxy: LatencyProxy, container: ContainerClient) -> ContainerClient:
    """The test's container reached through the proxy, with the SDK's own retries off."""
    service = BlobServiceClient.from_connection_string(proxy.connection_string, retry_total=0)
    return service.get_container_client(container.container_name)


def test_transient_batch_failures_are_retried(
    proxy: LatencyProxy, proxied: ContainerClient, container: ContainerClient, store: DocumentStore
) -> None:
    """Two 503 answers in a row delay the sweep but lose nothing: every row is swept once."""
    stale_rows_in(store, container, 10)
    proxy.fail_next(BATCH, 2)
    report = Sweeper(store, proxied, SweepSettings(cutoff=CUTOFF), sleep=lambda _: None).run()
    assert (report.deleted_blobs, report.deleted_rows, report.errors) == (10, 10, [])
    assert proxy.counts()[BATCH] == 3


def test_persistent_failure_leaves_rows_pending_and_reported(
    proxy: LatencyProxy, proxied: ContainerClient, container: ContainerClient, store: DocumentStore
) -> None:
    """A service that keeps failing gets each blob reported as an error and no row removed."""
    documents = stale_rows_in(store, container, 3)
    proxy.fail_next(BATCH, 100)
    settings = SweepSettings(cutoff=CUTOFF, max_attempts=3)
    report = Sweeper(store, proxied, settings, sleep=lambda _: None).run()
    assert report.deleted_rows == 0
    assert len(report.errors) == 3
    assert {d.id for d in store.all() if d.status is Status.PENDING} == {d.id for d in documents}
    assert proxy.counts()[BATCH] == 3
    assert len(list_blobs(container)) == 3
