"""The sweeper lease on Azurite: enforced per chunk, released without losing the report, watched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import BlobLeaseClient, ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document
from blob_safetynet.sweeper.lease import (
    ACQUIRED,
    HEARTBEAT,
    HOLDER,
    LEASE_BLOB,
    SweepLease,
    SweepLeaseHeldError,
    SweepLeaseStuckError,
)
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from tests.sweeper.conftest import CUTOFF

StaleRows = Callable[..., list[Document]]


def take_over(container: ContainerClient) -> None:
    """A second sweeper breaks the lease and takes it, as it may once renewals stop arriving."""
    blob = container.get_blob_client(LEASE_BLOB)
    BlobLeaseClient(blob).break_lease(lease_break_period=0)
    blob.acquire_lease(lease_duration=60)


def test_a_lost_lease_stops_the_sweep_and_says_so(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """When renewal fails after another sweeper took the lease, no further chunk is swept."""
    stale_rows(30)
    taken: list[bool] = []

    def second_sweeper_arrives(report: SweepReport) -> None:
        if not taken:
            taken.append(True)
            take_over(container)

    settings = SweepSettings(cutoff=CUTOFF, chunk_size=10, use_lease=True)
    report = Sweeper(store, container, settings, on_progress=second_sweeper_arrives).run()

    assert report.deleted_rows == 10
    assert store.count() == 20
    assert any("lease renewal" in error for error in report.errors)


def test_the_lease_blob_names_its_holder_and_heartbeat(
    store: DocumentStore, container: ContainerClient, stale_rows: StaleRows
) -> None:
    """While a sweep runs, the lease blob's metadata says who holds it and when it last renewed."""
    stale_rows(3)
    seen: list[dict[str, str]] = []

    def look(report: SweepReport) -> None:
        seen.append(container.get_blob_client(LEASE_BLOB).get_blob_properties().metadata)

    settings = SweepSettings(cutoff=CUTOFF, use_lease=True)
    Sweeper(store, container, settings, on_progress=look).run()
    assert seen
    assert {HOLDER, ACQUIRED, HEARTBEAT} <= set(seen[0])


def test_a_failed_release_is_a_warning(container: ContainerClient) -> None:
    """Releasing a lease someone else holds by now returns a warning instead of raising."""
    lease = SweepLease(container)
    lease.acquire()
    take_over(container)
    warning = lease.release()
    assert warning is not None
    assert "releasing the lease" in warning


def test_a_lease_held_by_a_live_sweeper_is_skipped(container: ContainerClient) -> None:
    """A lease renewed by a recent holder means another sweeper is busy: this one skips."""
    with SweepLease(container), pytest.raises(SweepLeaseHeldError):
        SweepLease(container).acquire()


def test_a_lease_held_past_the_limit_is_stuck(container: ContainerClient) -> None:
    """A holder that took the lease longer ago than the limit is reported as stuck."""
    hung = SweepLease(container, clock=lambda: datetime.now(UTC) - timedelta(hours=3))
    with hung, pytest.raises(SweepLeaseStuckError, match="longer than"):
        SweepLease(container).acquire()


def test_an_infinite_lease_fails_the_sweep(
    azurite: Azurite,
    container: ContainerClient,
    store: DocumentStore,
    db_url: str,
    stale_rows: StaleRows,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An infinite lease taken by hand makes `sweep --lease` exit 1 instead of 0 forever."""
    stale_rows(2)
    blob = container.get_blob_client(LEASE_BLOB)
    blob.upload_blob(b"")
    lease = blob.acquire_lease(lease_duration=-1)
    try:
        code = main(
            [
                "sweep",
                "--db",
                db_url,
                "--connection-string",
                azurite.connection_string,
                "--container",
                container.container_name,
                "--lease",
            ]
        )
    finally:
        lease.release()
    assert code == ExitCode.FINDINGS
    assert "infinite lease" in capsys.readouterr().err
    assert store.count() == 2
