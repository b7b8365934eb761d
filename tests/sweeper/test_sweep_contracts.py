"""The sweeper's retry schedule and its report of a blob it may not delete (found unguarded by
the mutation run)."""

from __future__ import annotations

import logging

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import LatencyProxy
from tests.sweeper.conftest import CUTOFF, stale_rows_in

BATCH = "POST comp=batch"


def test_retries_back_off_exponentially_up_to_ten_seconds(
    azurite: Azurite, container: ContainerClient, store: DocumentStore
) -> None:
    """A batch failing every time is retried after 0.4, 0.8, ... seconds, never more than 10."""
    stale_rows_in(store, container, 1)
    slept: list[float] = []
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxy.fail_next(BATCH, 100)
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        settings = SweepSettings(cutoff=CUTOFF, max_attempts=7)
        report = Sweeper(store, proxied, settings, sleep=slept.append).run()
    assert slept == pytest.approx([0.4, 0.8, 1.6, 3.2, 6.4, 10.0])
    assert len(report.errors) == 1


def test_a_blob_the_sweeper_may_not_delete_is_logged_by_name(
    store: DocumentStore, container: ContainerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A delete refused for another reason than the tag (a lease) is logged with name and status."""
    (stuck,) = stale_rows_in(store, container, 1)
    lease = container.get_blob_client(stuck.blob_name).acquire_lease(lease_duration=60)
    try:
        with caplog.at_level(logging.WARNING, logger="safetynet.sweeper"):
            Sweeper(store, container, SweepSettings(cutoff=CUTOFF, max_attempts=1)).run()
    finally:
        lease.release()
    assert f"blob {stuck.blob_name}: delete answered 0" in caplog.messages
