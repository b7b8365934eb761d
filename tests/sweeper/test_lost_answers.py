"""Outcomes after a lost answer are reported as what happened: a delete that reached the
service and lost its answer is a delete, not a failure and not an upload that never landed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.clients import blob_service_client
from blob_safetynet.reconcile.listing import apply_plan, plan_orphan_deletion, reconcile
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.fault_proxy import Fault, LatencyProxy
from tests.conftest import RunCli
from tests.sweeper.conftest import CUTOFF, stale_rows_in

ANSWER_LOST = Fault(reset="after")
"""The request reaches Azurite and is executed; its answer never reaches the client."""


def through(proxy: LatencyProxy, container: ContainerClient, sdk_retries: bool) -> ContainerClient:
    """The container through the proxy: with the CLI's retry policy, or with none (the
    sweep's own retry loop sends the batch again)."""
    if sdk_retries:
        service = blob_service_client(None, proxy.connection_string)
    else:
        service = BlobServiceClient.from_connection_string(proxy.connection_string, retry_total=0)
    return service.get_container_client(container.container_name)


@pytest.mark.parametrize("sdk_retries", [True, False], ids=["sdk-retries", "sweep-retries"])
def test_blobs_a_lost_batch_answer_deleted_count_as_deleted(
    proxy: LatencyProxy,
    container: ContainerClient,
    store: DocumentStore,
    sdk_retries: bool,
) -> None:
    """A batch executed whose answer was lost is sent again and meets 404s: its blobs are
    counted deleted, none as never landed, and their rows are gone."""
    stale_rows_in(store, container, 5)
    blobs.bind(container, store.database_id())
    proxy.inject("POST comp=batch", ANSWER_LOST)
    sweeper = Sweeper(
        store,
        through(proxy, container, sdk_retries),
        SweepSettings(cutoff=CUTOFF),
        sleep=lambda _: None,
    )

    report = sweeper.run()

    assert proxy.counts()["POST comp=batch"] == 2, "the lost batch was sent again"
    assert (report.deleted_blobs, report.missing_blobs) == (5, 0)
    assert (report.deleted_rows, report.errors) == (5, [])
    assert list(container.list_blobs(name_starts_with="stale")) == []


def test_rows_whose_uploads_never_landed_still_count_as_missing(
    proxy: LatencyProxy, container: ContainerClient, store: DocumentStore
) -> None:
    """Without a lost answer a 404 keeps meaning "never landed"."""
    stale_rows_in(store, container, 3, with_blobs=False)
    blobs.bind(container, store.database_id())
    report = Sweeper(store, through(proxy, container, True), SweepSettings(cutoff=CUTOFF)).run()
    assert (report.deleted_blobs, report.missing_blobs, report.deleted_rows) == (0, 3, 3)


def test_an_applied_plan_delete_whose_answer_was_lost_is_deleted(
    proxy: LatencyProxy, container: ContainerClient, store: DocumentStore
) -> None:
    """The plan's delete reaches the service, its answer is lost, the SDK's retry meets 404:
    the blob is reported deleted, with no error."""
    blobs.bind(container, store.database_id())
    container.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    future = datetime.now(UTC) + timedelta(hours=1)
    plan = plan_orphan_deletion(store, container, reconcile(store, container, future))
    proxy.inject("DELETE", ANSWER_LOST)

    result = apply_plan(store, through(proxy, container, True), plan, 1, max_share=1.0)

    assert proxy.counts()["DELETE"] == 2, "the lost delete was sent again"
    assert (result.repaired, result.errors) == (["orphan.bin"], [])
    assert "orphan.bin" not in {b.name for b in container.list_blobs()}


def test_an_applied_plan_delete_refused_while_the_blob_is_there_is_not_done(
    proxy: LatencyProxy,
    container: ContainerClient,
    store: DocumentStore,
    db_url: str,
    run_cli: RunCli,
    tmp_path: Path,
) -> None:
    """The blob changes between the plan's check and its delete, which Azure refuses with 412
    while the blob is still there: `reconcile --apply-plan` names it as an error, never as
    deleted, and exits 1; the blob stays."""
    blobs.bind(container, store.database_id())
    container.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    future = datetime.now(UTC) + timedelta(hours=1)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(plan_orphan_deletion(store, container, reconcile(store, container, future)))
    )
    edited = container.get_blob_client("orphan.bin")
    proxy.once("DELETE", lambda: edited.set_blob_metadata({"edited": "now"}))

    code, out, _ = run_cli(
        *("reconcile", "--db", db_url, "--connection-string", proxy.connection_string),
        *("--container", container.container_name, "--apply-plan", str(plan)),
        *("--max-delete", "1", "--max-share", "1"),
    )

    assert proxy.counts()["DELETE"] == 1
    assert code == 1, out
    assert "deleted orphan.bin" not in out
    assert "error: orphan.bin: " in out
    assert "ResourceModifiedError" in out
    assert edited.exists()
