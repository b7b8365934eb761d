"""`recover --inventory`: the plan's candidates come from a run of the recover inventory rule
(written into Azurite in Azure's layout, the nets kept by the recovery double), and what is done
with them is decided on what the service holds now."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.inventory_report import InventoryConfigError
from blob_safetynet.recover.apply import RESTORED, apply_plan
from blob_safetynet.recover.inventory import CorruptReportError, make_plan_from_inventory
from blob_safetynet.recover.plan import NO_COPY, make_plan
from blob_safetynet.settings.vocabulary import RECOVER_INVENTORY_RULE
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document
from testkit.inventory import RunSpec, write_recover_run, write_run
from tests.recover.conftest import bound_container

DAY = timedelta(days=1)


@pytest.fixture
def destination(service: BlobServiceClient) -> Iterator[ContainerClient]:
    """The inventory's destination container, on the same account as the data container."""
    container = create_unique_container(service, "inv")
    yield container
    container.delete_container()


@dataclass(frozen=True)
class Estate:
    """What the tests here plan over: the nets, the protocol writing into the bound container,
    the table and the inventory's destination."""

    nets: RecoveryDouble
    protocol: UploadProtocol
    store: DocumentStore
    bound: ContainerClient
    destination: ContainerClient

    @property
    def versioned(self) -> bool:
        return bool(self.nets.nets.versioning)

    def lose(self, name: str = "doc.txt", data: bytes = b"right") -> Document:
        """A document put through the protocol, then its blob deleted behind it."""
        document = self.protocol.put(name, data, ".txt")
        self.bound.delete_blob(document.blob_name)
        return document

    def report(self, spec: RunSpec | None = None) -> str:
        """A run of the recover rule over `bound` as it is now (with versions when they are on)."""
        return write_recover_run(self.bound, self.destination, spec, versions=self.versioned)

    def plan(self, rule: str = RECOVER_INVENTORY_RULE) -> dict[str, Any]:
        return from_inventory(self.store, self.bound, self.destination, rule)


@pytest.fixture
def estate(
    nets: RecoveryDouble,
    protocol: UploadProtocol,
    store: DocumentStore,
    bound: ContainerClient,
    destination: ContainerClient,
) -> Estate:
    return Estate(nets, protocol, store, bound, destination)


def from_inventory(
    store: DocumentStore,
    bound: ContainerClient,
    destination: ContainerClient,
    rule: str = RECOVER_INVENTORY_RULE,
) -> dict[str, Any]:
    plan = make_plan_from_inventory(store, bound, destination, rule, DAY)
    loaded: dict[str, Any] = json.loads(json.dumps(plan))
    return loaded


def rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's rows without what differs by source only."""
    return sorted(
        ({k: v for k, v in row.items() if k != "gone_since_report"} for row in plan["rows"]),
        key=lambda row: str(row["blob"]),
    )


def test_deleted_and_overwritten_documents_are_planned_as_the_listing_plans_them(
    estate: Estate,
) -> None:
    """Deleted and overwritten documents among intact ones: the plan from the report names the
    rows, copies and days the listing's plan names, says where its candidates came from, and
    applying it restores every document."""
    store, bound = estate.store, estate.bound
    documents = [
        estate.protocol.put(f"doc-{n}.txt", f"doc {n}".encode() * 3, ".txt") for n in range(9)
    ]
    for document in documents[:3]:
        bound.delete_blob(document.blob_name)
    for document in documents[3:6]:
        bound.upload_blob(document.blob_name, b"wrong bytes!", overwrite=True)
    prefix = estate.report()

    plan = estate.plan()

    assert rows(plan) == rows(json.loads(json.dumps(make_plan(store, bound))))
    assert plan["summary"]["recoverable"] == 6
    assert plan["candidates"]["run"] == prefix
    result = apply_plan(store, bound, plan)
    assert result.count(RESTORED) == 6
    for number, document in enumerate(documents):
        data = bound.get_blob_client(document.blob_name).download_blob().readall()
        assert data == f"doc {number}".encode() * 3


def test_changes_since_the_run_are_judged_live(estate: Estate) -> None:
    """A blob put back by hand after the run and a row newer than the run are not planned, though
    the report shows both missing."""
    restored = estate.lose("restored.txt", b"restored by hand")
    estate.report()
    estate.bound.upload_blob(restored.blob_name, b"restored by hand", overwrite=True)
    estate.protocol.put("newer.txt", b"after the run", ".txt")

    assert estate.plan()["rows"] == []


def test_a_copy_the_report_shows_but_the_service_no_longer_keeps_is_named_never_tried(
    estate: Estate,
) -> None:
    """Stale report: the only copy of a deleted document is gone since the run. The row says
    `no kept copy` and names the report's copy as gone; the blob stays missing."""
    bound = estate.bound
    document = estate.lose()
    estate.report()
    estate.nets.nets.copies[(bound.container_name, document.blob_name)] = []

    plan = estate.plan()

    (row,) = plan["rows"]
    assert row["reason"] == NO_COPY
    assert row["copies"] == []
    gone = row["gone_since_report"]
    assert gone
    assert {label.replace(",", " ").split()[0] for label in gone} <= {
        "deleted",
        "snapshot",
        "version",
    }
    if not estate.versioned:
        assert gone == ["deleted, 7 day(s) left in the report"]
    assert apply_plan(estate.store, bound, plan).count(RESTORED) == 0
    assert not bound.get_blob_client(document.blob_name).exists()


def test_a_copy_whose_retention_ran_out_since_the_run_is_not_promised(
    soft_delete_only: RecoveryDouble, store: DocumentStore
) -> None:
    """The report shows a deleted blob's copy with 2 days left; 3 days later the service has
    purged it: the plan says no kept copy and names the report's copy with its 2 days. (A
    previous version has no retention clock: this is soft delete's.)"""
    service = BlobServiceClient.from_connection_string(soft_delete_only.connection_string)
    bound = bound_container(soft_delete_only, store)
    destination = create_unique_container(service, "inv")
    document = UploadProtocol(store, bound).put("doc.txt", b"right", ".txt")
    bound.delete_blob(document.blob_name)
    soft_delete_only.nets.age(5)
    write_recover_run(bound, destination)
    soft_delete_only.nets.age(3)

    (row,) = from_inventory(store, bound, destination)["rows"]

    assert (row["reason"], row["copies"]) == (NO_COPY, [])
    assert row["gone_since_report"] == ["deleted, 2 day(s) left in the report"]


def test_a_run_of_reconciles_rule_is_refused_with_what_it_lacks(estate: Estate) -> None:
    """A run of the base-blob rule (no deleted blobs, snapshots or versions) is refused, naming
    the flags and fields it lacks and the rule to read instead."""
    estate.protocol.put("doc.txt", b"right", ".txt")
    write_run(estate.bound, estate.destination)

    with pytest.raises(InventoryConfigError) as refused:
        estate.plan(rule="safetynet")

    message = str(refused.value)
    assert "cannot serve recover" in message
    assert "includeDeleted is not true" in message
    assert "includeSnapshots is not true" in message
    assert "Deleted, RemainingRetentionDays, Snapshot" in message
    assert RECOVER_INVENTORY_RULE in message


def test_a_report_that_is_not_parquet_is_refused(estate: Estate) -> None:
    """A complete run whose report file is not Parquet is a CorruptReportError naming the run."""
    estate.lose()
    prefix = estate.report(RunSpec(rule=RECOVER_INVENTORY_RULE, corrupt=True, files=1))

    with pytest.raises(CorruptReportError, match=prefix):
        estate.plan()


def test_the_newest_complete_run_is_read_and_a_stale_one_refused(estate: Estate) -> None:
    """Of an older complete run and a newer one still running, the complete one is read; once
    older than the maximum age, it is refused."""
    estate.lose()
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    older = estate.report(RunSpec(rule=RECOVER_INVENTORY_RULE, started=hour_ago))
    estate.report(RunSpec(rule=RECOVER_INVENTORY_RULE, status="Pending"))

    assert estate.plan()["candidates"]["run"] == older
    with pytest.raises(Exception, match="older than the maximum age"):
        make_plan_from_inventory(
            estate.store,
            estate.bound,
            estate.destination,
            RECOVER_INVENTORY_RULE,
            timedelta(minutes=30),
        )
