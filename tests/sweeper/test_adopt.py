"""`safetynet adopt` on a table and container written before the protocol, SQLite and PostgreSQL.

Set Blob Tags' ETag condition is enforced by testkit's double in front of Azurite (Azurite
ignores it); the crash test kills a real `safetynet adopt --apply` process mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.reconcile import adopt
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status, new_document_id
from testkit.etag_double import etag_guarding_service
from testkit.fault_proxy import LatencyProxy
from testkit.service_doubles import ServiceDouble
from tests import tree
from tests.conftest import RunCli

SAFETYNET = tree.CONSOLE_SCRIPT


@pytest.fixture
def guarded(azurite: Azurite, service_client: BlobServiceClient) -> Iterator[ServiceDouble]:
    with etag_guarding_service(azurite.port, service_client) as double:
        yield double


def legacy_row(
    store: DocumentStore,
    container: ContainerClient | None,
    status: Status = Status.READY,
    blob_name: str | None = None,
) -> Document:
    """A row the application wrote before the protocol, and (given a container) its blob,
    uploaded plainly: no state tag."""
    document = Document(
        new_document_id(),
        f"doc-{new_document_id()}",
        blob_name or new_document_id(),
        status,
        datetime.now(UTC),
    )
    store.reserve(document)
    if container is not None:
        container.upload_blob(document.blob_name, b"legacy bytes", tags={"tenant": "t1"})
    return document


def state(container: ContainerClient, blob_name: str) -> str:
    return container.get_blob_client(blob_name).get_blob_tags().get(STATE_TAG, "")


@pytest.fixture
def estate(store: DocumentStore, container: ContainerClient) -> dict[str, list[Document]]:
    """One of each class: 3 Ready + 1 Pending untagged, 1 missing blob, 1 already committed,
    2 blobs no row names, an internal blob and a retired record (neither is an orphan)."""
    ready = [legacy_row(store, container) for _ in range(3)]
    pending = [legacy_row(store, container, Status.PENDING)]
    missing = [legacy_row(store, None)]
    adopted = legacy_row(store, None)
    container.upload_blob(adopted.blob_name, b"x", tags={STATE_TAG: COMMITTED})
    for name in ("stray-1", "stray-2"):
        container.upload_blob(name, b"orphan")
    container.upload_blob(".safetynet/sweeper.heartbeat.json", b"{}")
    container.upload_blob("retired-blob", b"old")
    deleted = legacy_row(store, None, blob_name="retired-blob")
    assert store.delete_row(deleted.id, "retired-blob")
    return {"ready": ready, "pending": pending, "missing": missing, "adopted": [adopted]}


def cli_args(db_url: str, connection_string: str, container: ContainerClient) -> list[str]:
    return [
        "--db",
        db_url,
        "--connection-string",
        connection_string,
        "--container",
        container.container_name,
    ]


def test_the_dry_run_counts_every_class_and_writes_nothing(
    run_cli: RunCli,
    db_url: str,
    estate: dict[str, list[Document]],
    guarded: ServiceDouble,
    container: ContainerClient,
) -> None:
    """Rows with and without their blob, orphans, tagged blobs; exit 1 for what cannot be adopted."""
    code, out, _ = run_cli(
        "adopt", *cli_args(db_url, guarded.connection_string, container), "--json"
    )
    report = json.loads(out)
    assert report["counts"] == {
        "rows_blob_exists": 5,
        "rows_blob_missing": 1,
        "blobs_unreferenced": 2,
        "blobs_already_tagged": 1,
    }
    assert (report["to_tag"], report["to_mark_ready"], report["tagged"]) == (4, 1, 0)
    assert code == 1
    assert report["cannot_adopt_count"] == 3
    assert all(state(container, d.blob_name) == "" for d in estate["ready"] + estate["pending"])
    assert guarded.counts()["PUT comp=tags"] == 0


def test_apply_tags_committed_marks_rows_ready_and_deletes_nothing(
    run_cli: RunCli,
    db_url: str,
    store: DocumentStore,
    estate: dict[str, list[Document]],
    guarded: ServiceDouble,
    container: ContainerClient,
) -> None:
    """Every named untagged blob ends committed with its other tags kept; Pending rows Ready."""
    code, out, _ = run_cli(
        "adopt", *cli_args(db_url, guarded.connection_string, container), "--apply", "--json"
    )
    report = json.loads(out)
    assert (report["tagged"], report["marked_ready"]) == (4, 1)
    assert code == 1  # the missing blob and the two orphans are still reported
    for document in estate["ready"] + estate["pending"]:
        tags = container.get_blob_client(document.blob_name).get_blob_tags()
        assert tags == {STATE_TAG: COMMITTED, "tenant": "t1"}
        assert store.get(document.id).status is Status.READY  # type: ignore[union-attr]
    assert {b.name for b in container.list_blobs()} >= {"stray-1", "stray-2", "retired-blob"}
    kinds = guarded.counts()
    assert kinds["DELETE"] == 0
    assert kinds["POST comp=batch"] == 0


def test_a_rerun_finds_everything_adopted(
    run_cli: RunCli,
    db_url: str,
    store: DocumentStore,
    guarded: ServiceDouble,
    container: ContainerClient,
) -> None:
    """A second --apply tags nothing and exits 0 when nothing is left to report."""
    for _ in range(3):
        legacy_row(store, container, Status.PENDING)
    args = cli_args(db_url, guarded.connection_string, container)
    assert run_cli("adopt", *args, "--apply")[0] == 0
    code, out, _ = run_cli("adopt", *args, "--apply", "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["to_tag"], report["tagged"], report["counts"]["blobs_already_tagged"]) == (
        0,
        0,
        3,
    )


def test_a_blob_rewritten_after_the_listing_is_not_tagged_and_its_row_stays_pending(
    store: DocumentStore, guarded: ServiceDouble, container: ContainerClient
) -> None:
    """The tag write carries the listed ETag: new bytes under the name get 412, not a seal."""
    document = legacy_row(store, container, Status.PENDING)
    plan = adopt.plan(store, container)
    container.upload_blob(document.blob_name, b"other bytes", overwrite=True)
    through_double = BlobServiceClient.from_connection_string(guarded.connection_string)
    result = adopt.apply(store, through_double.get_container_client(container.container_name), plan)
    assert result.tagged == 0
    assert [f for f in result.failed if "changed after the listing" in f]
    assert state(container, document.blob_name) == ""
    assert store.get(document.id).status is Status.PENDING  # type: ignore[union-attr]


def test_rows_with_an_unknown_status_or_an_upload_in_progress_are_reported(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A protocol upload in flight (pending tag) is left to the protocol; odd statuses named."""
    in_flight = legacy_row(store, None, Status.PENDING)
    container.upload_blob(in_flight.blob_name, b"x", tags={STATE_TAG: "pending"})
    odd = legacy_row(store, container)
    with store.engine.begin() as conn:
        conn.execute(
            store.table.update().where(store.table.c.id == odd.id).values(status="Archived")
        )
    plan = adopt.plan(store, container)
    assert plan.work == []
    assert any("upload in progress" in p for p in plan.cannot_adopt)
    assert any("'Archived'" in p for p in plan.cannot_adopt)


def test_a_crash_in_the_middle_leaves_no_ready_row_on_an_untagged_blob_and_a_rerun_finishes(
    run_cli: RunCli,
    db_url: str,
    store: DocumentStore,
    azurite: Azurite,
    container: ContainerClient,
) -> None:
    """SIGKILL after some tag writes: seal-before-publish held; the rerun tags and publishes all."""
    with ThreadPoolExecutor(8) as pool:
        documents = list(
            pool.map(lambda _: legacy_row(store, container, Status.PENDING), range(400))
        )
    with LatencyProxy(azurite.port, delay_s=0.01) as proxy:
        args = cli_args(db_url, proxy.connection_string, container)
        env = tree.environment(
            {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
        )
        process = subprocess.Popen(
            [str(SAFETYNET), "adopt", *args, "--apply", "--workers", "4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while proxy.counts()["PUT comp=tags"] < 60 and time.monotonic() < deadline:
            assert process.poll() is None, "adopt finished before it could be killed"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert proxy.counts()["DELETE"] == 0
    tagged = {d.id for d in documents if state(container, d.blob_name) == COMMITTED}
    ready = {d.id for d in store.all() if d.status is Status.READY}
    assert 0 < len(tagged) < len(documents)
    assert ready <= tagged
    code, out, _ = run_cli(
        "adopt", *cli_args(db_url, azurite.connection_string, container), "--apply"
    )
    assert code == 0, out
    assert all(state(container, d.blob_name) == COMMITTED for d in documents)
    assert store.count(Status.READY) == len(documents)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "--workers must be 1-64"),
        (["--container", "nosuchcontainer"], "container 'nosuchcontainer' does not exist"),
    ],
)
def test_bad_usage_exits_2_before_anything_is_read(
    run_cli: RunCli,
    db_url: str,
    store: DocumentStore,
    azurite: Azurite,
    container: ContainerClient,
    extra: list[str],
    message: str,
) -> None:
    """A wrong option or container is a usage error with its reason, never a traceback."""
    args = cli_args(db_url, azurite.connection_string, container)
    code, _, err = run_cli("adopt", *args, *extra)
    assert code == 2
    assert message in err
