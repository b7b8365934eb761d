"""Faults on the way to the service and the database; each run ends with I1-I6 and nothing lost.

The blob service fails through a loopback fault proxy (500, 503, throttling with Retry-After,
connection resets before or after the request reached Azurite, answers stalled past the
client's timeout); Azurite itself restarts mid-sweep; the sweeper's PostgreSQL backend is
terminated mid-sweep; the sweeper's lease is lost while it sweeps.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobLeaseClient, BlobServiceClient, ContainerClient, LinearRetry

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.invariants import (
    DeleteLog,
    InvariantResult,
    InvariantWatch,
    check_invariants,
)
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.lease import LEASE_BLOB
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from testkit.fault_proxy import INTERNAL_ERROR, SERVER_BUSY, Fault, LatencyProxy, throttled
from tests.sweeper.conftest import CUTOFF, later, stale_rows_in

READ_TIMEOUT_S = 1
FAULTS = {
    "500": INTERNAL_ERROR,
    "503": SERVER_BUSY,
    "throttled, Retry-After 1": throttled(1),
    "reset before the service": Fault(reset="before"),
    "reset after the service": Fault(reset="after"),
    "stall past the timeout": Fault(stall_s=READ_TIMEOUT_S + 0.2),
}


def through(
    endpoint: str, container: ContainerClient, log: DeleteLog, retries: int
) -> ContainerClient:
    """The test's container through `endpoint`, with a short read timeout and fast retries."""
    service = BlobServiceClient.from_connection_string(
        endpoint,
        retry_policy=LinearRetry(backoff=0.2, random_jitter_range=0.1, retry_total=retries),
        read_timeout=READ_TIMEOUT_S,
        raw_request_hook=log,
    )
    return service.get_container_client(container.container_name)


def broken_invariants(results: list[InvariantResult]) -> list[str]:
    return [f"{r.id}: {r.detail}" for r in results if not r.holds]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DocumentStore]:
    """SQLite: the faults here are the blob service's; PostgreSQL's own fault has its test."""
    documents = DocumentStore.from_url(f"sqlite:///{tmp_path / 'documents.db'}")
    documents.init_schema()
    yield documents
    documents.engine.dispose()


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[LatencyProxy]:
    with LatencyProxy(azurite.port, delay_s=0) as running:
        yield running


def published(protocol: UploadProtocol, count: int) -> dict[str, bytes]:
    return {
        protocol.put(f"kept-{i}.txt", f"kept {i}".encode(), ".txt").name: f"kept {i}".encode()
        for i in range(count)
    }


def assert_nothing_lost(protocol: UploadProtocol, kept: dict[str, bytes]) -> None:
    """Every published document still reads back its own bytes."""
    assert {name: protocol.read(name) for name in kept} == kept


def finish_and_check(store: DocumentStore, client: ContainerClient, watch: InvariantWatch) -> None:
    """A clean sweep after the faults: nothing stale left, the next sweep idle, I1-I6 hold."""
    settings = SweepSettings(cutoff=CUTOFF)
    Sweeper(store, client, settings, clock=later).run()
    watch.check("clean sweep")
    second = Sweeper(store, client, settings, clock=later).run()
    final = check_invariants(store, client, watch.previous, later() - CUTOFF, second, [])
    assert broken_invariants(final) == []
    assert [f"{v.moment}: {v.result.id} {v.result.detail}" for v in watch.violations] == []


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
@pytest.mark.parametrize("kind", ["PUT", "PUT comp=tags"])
def test_writers_finish_through_faults_without_overwriting(
    proxy: LatencyProxy,
    store: DocumentStore,
    container: ContainerClient,
    fault: Fault,
    kind: str,
) -> None:
    """An upload or seal that meets a fault is retried by the SDK and completes, bytes intact."""
    log = DeleteLog(container.container_name)
    client = through(proxy.connection_string, container, log, retries=3)
    watch = InvariantWatch(store, client, log)
    protocol = UploadProtocol(store, client, checkpoint=watch.check)
    proxy.inject(kind, fault)
    kept = published(protocol, 3)
    assert_nothing_lost(protocol, kept)
    assert {d.status for d in store.all()} == {Status.READY}
    finish_and_check(store, client, watch)


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_sweeper_finishes_through_faults(
    proxy: LatencyProxy, store: DocumentStore, container: ContainerClient, fault: Fault
) -> None:
    """A batch delete that meets a fault is retried by the sweeper; stale rows go, nothing else."""
    log = DeleteLog(container.container_name)
    client = through(proxy.connection_string, container, log, retries=0)
    kept = published(UploadProtocol(store, container), 3)
    stale_rows_in(store, container, 20)
    watch = InvariantWatch(store, client, log)
    proxy.inject("POST comp=batch", fault, fault)  # the retry meets the fault once more
    report = Sweeper(
        store, client, SweepSettings(cutoff=CUTOFF), sleep=lambda _: None, clock=later
    ).run()
    watch.check("sweep through faults")
    assert (report.deleted_blobs + report.missing_blobs, report.deleted_rows) == (20, 20)
    assert report.errors == []
    assert_nothing_lost(UploadProtocol(store, container), kept)
    finish_and_check(store, client, watch)


def test_azurite_restarted_mid_sweep(store: DocumentStore, tmp_path: Path) -> None:
    """Azurite stopped and started again between two chunks: the sweep (or the next) finishes."""
    with Azurite(location=tmp_path / "azurite") as emulator:
        service = BlobServiceClient.from_connection_string(emulator.connection_string)
        container = service.create_container("restarted")
        log = DeleteLog(container.container_name)
        client = through(emulator.connection_string, container, log, retries=5)
        kept = published(UploadProtocol(store, container), 3)
        stale_rows_in(store, container, 40)
        watch = InvariantWatch(store, client, log)
        restarts = []

        def restart_once(report: SweepReport) -> None:
            if not restarts:
                restarts.append(report.deleted_rows)
                emulator.stop()
                emulator.start()

        settings = SweepSettings(cutoff=CUTOFF, chunk_size=10)
        with contextlib.suppress(AzureError, StoreError):
            Sweeper(store, client, settings, clock=later, on_progress=restart_once).run()
        watch.check("restart mid-sweep")
        assert restarts == [10]
        assert_nothing_lost(UploadProtocol(store, container), kept)
        finish_and_check(store, client, watch)
        assert store.count() == len(kept)


@pytest.mark.postgres
def test_postgres_backend_terminated_mid_sweep(
    proxy: LatencyProxy, postgres_url: str, container: ContainerClient
) -> None:
    """The sweeper's database session killed while its blob batch is in flight: rerun converges."""
    url = sa.make_url(postgres_url)
    marked = url.update_query_dict({"application_name": "sweeper-under-test"})
    store = DocumentStore.from_url(marked.render_as_string(hide_password=False))
    store.init_schema()
    kept = published(UploadProtocol(store, container), 3)
    stale_rows_in(store, container, 20)
    log = DeleteLog(container.container_name)
    client = through(proxy.connection_string, container, log, retries=3)
    watch = InvariantWatch(store, client, log)
    killer = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    terminated: list[int] = []

    def terminate_sweeper_sessions() -> None:
        with killer.connect() as conn:
            terminated.extend(
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = 'sweeper-under-test'"
                    )
                ).scalars()
            )

    proxy.once("POST comp=batch", terminate_sweeper_sessions)
    # A sweep holding its database session across the batch fails on it (StoreError); one
    # that does not reconnects for its next statement. Either way the next sweep converges.
    with contextlib.suppress(StoreError):
        Sweeper(store, client, SweepSettings(cutoff=CUTOFF), clock=later).run()
    watch.check("backend terminated")
    assert terminated
    assert all(terminated)
    assert_nothing_lost(UploadProtocol(store, container), kept)
    finish_and_check(store, client, watch)
    assert store.count() == len(kept)
    killer.dispose()
    store.engine.dispose()


def test_sweeper_whose_lease_renewals_fail(
    proxy: LatencyProxy, store: DocumentStore, container: ContainerClient
) -> None:
    """Renewals refused mid-sweep: the sweeper stops, or runs on and overlaps a second one;
    either way nothing breaks."""
    log = DeleteLog(container.container_name)
    client = through(proxy.connection_string, container, log, retries=0)
    kept = published(UploadProtocol(store, container), 3)
    stale_rows_in(store, container, 30)
    watch = InvariantWatch(store, client, log)
    proxy.inject("PUT comp=lease renew", *[SERVER_BUSY] * 100)
    settings = SweepSettings(cutoff=CUTOFF, chunk_size=10, use_lease=True)
    overlaps: list[SweepReport] = []

    def lose_lease_and_overlap(report: SweepReport) -> None:
        """What a lapsed lease allows: another sweeper takes over while this one still runs."""
        if not overlaps:
            BlobLeaseClient(container.get_blob_client(LEASE_BLOB)).break_lease(0)
            with ThreadPoolExecutor(1) as pool:
                overlaps.append(
                    pool.submit(Sweeper(store, client, settings, clock=later).run).result()
                )

    errors: list[str] = []
    try:
        first = Sweeper(store, client, settings, clock=later, on_progress=lose_lease_and_overlap)
        errors += first.run().errors
    except AzureError as error:
        errors.append(type(error).__name__)
    watch.check("renewals refused")
    stopped = any("lease" in e for e in errors)
    assert stopped or (overlaps and overlaps[0].errors == []), (errors, overlaps)
    assert_nothing_lost(UploadProtocol(store, container), kept)
    finish_and_check(store, client, watch)
    assert store.count() == len(kept)


def test_storage_sdk_retries_throttling_on_its_own_schedule(
    proxy: LatencyProxy, container: ContainerClient
) -> None:
    """azure-storage-blob retries a throttled 503 after its own back-off, not after Retry-After."""
    # Azure Storage throttles with 503 ServerBusy and a Retry-After suggestion
    # (MicrosoftDocs/azure-docs issue 76932); the storage SDK's StorageRetryPolicy
    # (azure/storage/blob/_shared/policies.py) computes its own back-off and never reads the header.
    client = through(proxy.connection_string, container, DeleteLog("unused"), retries=3)
    proxy.inject("PUT", throttled(30))
    started = time.perf_counter()
    client.upload_blob("throttled.bin", b"x")
    assert time.perf_counter() - started < 5
    assert proxy.counts()["PUT"] == 2
