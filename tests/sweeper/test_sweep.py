"""The sweeper on Azurite with SQLite and PostgreSQL: every row class, concurrency, failures."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper.lease import SweepLease, SweepLeaseHeldError
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from tests.sweeper.conftest import CUTOFF, stale_rows_in

StaleRows = Callable[..., list[Document]]
SweeperFactory = Callable[..., Sweeper]


def blob_names(container: ContainerClient) -> set[str]:
    """The protocol's blobs, without the toolkit's own markers under `.safetynet/`."""
    return set(list_blobs(container))


def test_every_row_class_ends_in_its_state(
    store: DocumentStore,
    container: ContainerClient,
    protocol: UploadProtocol,
    stale_rows: StaleRows,
    sweeper_factory: SweeperFactory,
) -> None:
    """Stale pending blobs go, missing blobs are fine, sealed ones roll forward, the rest stay."""
    with_blob = stale_rows(3, prefix="with-blob")
    without_blob = stale_rows(2, with_blobs=False, prefix="no-blob")
    sealed = stale_rows(2, prefix="sealed")
    for document in sealed:
        container.get_blob_client(document.blob_name).set_blob_tags({STATE_TAG: COMMITTED})
    fresh = protocol.reserve("fresh.txt", ".txt")
    protocol.upload(fresh, b"still uploading")
    ready = protocol.put("ready.txt", b"published", ".txt")

    report = sweeper_factory().run()

    assert (report.examined, report.deleted_blobs, report.missing_blobs) == (7, 3, 2)
    assert (report.rolled_forward, report.deleted_rows, report.errors) == (2, 5, [])
    statuses = {d.name: d.status for d in store.all()}
    assert statuses == {
        "sealed-0": Status.READY,
        "sealed-1": Status.READY,
        "fresh.txt": Status.PENDING,
        "ready.txt": Status.READY,
    }
    assert blob_names(container) == {d.blob_name for d in (*sealed, fresh, ready)}
    assert not {d.blob_name for d in (*with_blob, *without_blob)} & blob_names(container)


def test_second_sweep_changes_nothing(
    stale_rows: StaleRows, sweeper_factory: SweeperFactory
) -> None:
    """Sweeping is idempotent: the run after a complete sweep finds nothing to do."""
    stale_rows(10)
    sweeper_factory().run()
    assert sweeper_factory().run() == SweepReport()


def test_dry_run_changes_nothing(
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: StaleRows,
    sweeper_factory: SweeperFactory,
) -> None:
    """A dry run reports the same counts a real sweep would produce and changes no row or blob."""
    stale_rows(4)
    stale_rows(1, with_blobs=False, prefix="never")
    rows_before, blobs_before = store.all(), blob_names(container)
    preview = sweeper_factory(SweepSettings(cutoff=CUTOFF, dry_run=True)).run()
    assert (store.all(), blob_names(container)) == (rows_before, blobs_before)
    real = sweeper_factory().run()
    assert preview.as_dict() | {"dry_run": False} == real.as_dict()


def test_interrupted_sweep_converges(
    store: DocumentStore, stale_rows: StaleRows, container: ContainerClient
) -> None:
    """A sweep killed after its first chunk is finished by the next run."""
    stale_rows(300)

    def die_after_first_chunk(report: SweepReport) -> None:
        raise KeyboardInterrupt

    # Small chunks keep the contention of a large run: 16 chunks for 4 sweepers to share.
    settings = SweepSettings(cutoff=CUTOFF, chunk_size=32)
    interrupted = Sweeper(store, container, settings, on_progress=die_after_first_chunk)
    with pytest.raises(KeyboardInterrupt):
        interrupted.run()
    assert 0 < store.count() < 300
    Sweeper(store, container, settings).run()
    assert store.count() == 0
    assert blob_names(container) == set()


def test_batches_respect_the_256_limit(
    stale_rows: StaleRows, sweeper_factory: SweeperFactory
) -> None:
    """More blobs than one Blob Batch may carry are split and all swept."""
    stale_rows(300)
    report = sweeper_factory(SweepSettings(cutoff=CUTOFF, chunk_size=300)).run()
    assert (report.deleted_blobs, report.deleted_rows, report.errors) == (300, 300, [])


def test_leased_blob_fails_alone_and_stays_pending(
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: StaleRows,
    sweeper_factory: SweeperFactory,
) -> None:
    """A blob the sweeper cannot delete (412 lease, not a tag) is an error, not a roll-forward."""
    stuck, *others = stale_rows(5)
    lease = container.get_blob_client(stuck.blob_name).acquire_lease(lease_duration=60)
    try:
        report = sweeper_factory(SweepSettings(cutoff=CUTOFF, max_attempts=1)).run()
    finally:
        lease.release()
    assert report.deleted_blobs == len(others)
    assert len(report.errors) == 1
    assert stuck.id in report.errors[0]
    assert [(d.id, d.status) for d in store.all()] == [(stuck.id, Status.PENDING)]


def test_missing_container_stops_before_any_row_changes(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """Sweeping a container that does not exist raises instead of treating blobs as never landed."""
    stale_rows(3, with_blobs=False)
    missing = ContainerClient.from_container_url(
        container.url + "-missing", credential=container.credential
    )
    with pytest.raises(ResourceNotFoundError):
        Sweeper(store, missing, SweepSettings(cutoff=CUTOFF)).run()
    assert store.count() == 3


def test_lease_keeps_a_second_sweeper_out(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """With leases on, a sweeper started while another holds the lease does nothing."""
    stale_rows(3)
    settings = SweepSettings(cutoff=CUTOFF, use_lease=True)
    with SweepLease(container), pytest.raises(SweepLeaseHeldError):
        Sweeper(store, container, settings).run()
    assert store.count() == 3
    assert Sweeper(store, container, settings).run().deleted_rows == 3


@pytest.mark.postgres
def test_four_sweepers_share_the_work_on_postgres(
    postgres_url: str, container: ContainerClient
) -> None:
    """4 concurrent sweepers over 500 stale rows in 16 chunks: each row once, no errors, Ready
    untouched."""
    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    # Half never landed: Azurite's delete cost grows with the container, and a double delete
    # still shows, as a 404 counted beyond the 250 expected.
    stale_rows_in(store, container, 250)
    stale_rows_in(store, container, 250, with_blobs=False, prefix="never")
    protocol = UploadProtocol(store, container)
    ready = [protocol.put(f"keep-{i}.txt", b"keep", ".txt") for i in range(20)]
    # Small chunks keep the contention of a large run: 16 chunks for 4 sweepers to share.
    settings = SweepSettings(cutoff=CUTOFF, chunk_size=32)

    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda _: Sweeper(store, container, settings).run(), range(4)))

    assert sum(r.examined for r in reports) == 500
    assert sum(r.deleted_blobs for r in reports) == 250
    assert sum(r.missing_blobs for r in reports) == 250
    assert sum(r.deleted_rows for r in reports) == 500
    assert all(r.errors == [] for r in reports)
    assert sum(1 for r in reports if r.examined) > 1
    assert {(d.name, d.status) for d in store.all()} == {(d.name, Status.READY) for d in ready}
    assert blob_names(container) == {d.blob_name for d in ready}
    assert all(
        container.get_blob_client(d.blob_name).get_blob_tags()[STATE_TAG] == COMMITTED
        for d in ready
    )
    store.engine.dispose()


def test_cutoff_is_respected(
    store: DocumentStore, stale_rows: StaleRows, container: ContainerClient
) -> None:
    """Rows younger than the cutoff are not examined."""
    stale_rows(2)
    report = Sweeper(store, container, SweepSettings(cutoff=timedelta(hours=2))).run()
    assert report.examined == 0
    assert store.count(Status.PENDING) == 2
