"""`blob_safetynet.recover` gives back documents deleted or overwritten behind the protocol,
exactly (length and SHA-256 of the row), and nothing else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import RepairRefusedError
from blob_safetynet.recover.apply import INTACT, RESTORED, UNRECOVERABLE, apply_plan, recover_one
from blob_safetynet.recover.plan import COPIES_DIFFER, EXPIRED, NO_COPY, make_plan
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document


def body(number: int) -> bytes:
    return f"document {number} ".encode() * (1 + number % 7)


def put_many(protocol: UploadProtocol, count: int) -> list[Document]:
    return [protocol.put(f"doc-{n}.txt", body(n), ".txt") for n in range(count)]


def assert_all_readable(container: ContainerClient, documents: list[Document]) -> None:
    """Every document's blob holds its bytes and is tagged committed."""
    for number, document in enumerate(documents):
        blob = container.get_blob_client(document.blob_name)
        assert blob.download_blob().readall() == body(number), document.name
        assert blob.get_blob_tags()[STATE_TAG] == COMMITTED, document.name


def round_trip(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as a file would hold it."""
    loaded: dict[str, Any] = json.loads(json.dumps(plan))
    return loaded


def test_deleted_and_overwritten_documents_come_back_and_a_second_run_plans_nothing(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """100 documents deleted and 20 overwritten behind the protocol are restored with the row's
    bytes and tags, and the plan made right after lists nothing."""
    documents = put_many(protocol, 130)
    for document in documents[:100]:
        bound.delete_blob(document.blob_name)
    for document in documents[100:120]:
        bound.upload_blob(document.blob_name, b"wrong bytes", overwrite=True)

    plan = make_plan(store, bound)

    assert plan["summary"]["recoverable"] == 120
    result = apply_plan(store, bound, round_trip(plan))
    assert result.count(RESTORED) == 120, [o for o in result.outcomes if o.status != RESTORED][:3]
    assert_all_readable(bound, documents)
    assert make_plan(store, bound)["rows"] == []


def forget_copies_holding(
    nets: RecoveryDouble, container: ContainerClient, name: str, data: bytes
) -> None:
    """The nets lose every copy of `name` holding `data` (its retention ran out)."""
    key = (container.container_name, name)
    nets.nets.copies[key] = [k for k in nets.nets.copies.get(key, []) if k.data != data]


def test_a_kept_copy_whose_bytes_differ_is_never_restored(
    nets: RecoveryDouble, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """The only copies kept hold other bytes of the same length: the row is reported (copies
    differ) and its blob stays missing; the copy stays kept."""
    document = protocol.put("doc.txt", b"right", ".txt")
    bound.upload_blob(document.blob_name, b"wrong", overwrite=True)
    forget_copies_holding(nets, bound, document.blob_name, b"right")
    bound.delete_blob(document.blob_name)

    plan = make_plan(store, bound)
    result = apply_plan(store, bound, round_trip(plan))

    (row,) = plan["rows"]
    reasons = [row["reason"], *(o.detail for o in result.outcomes)]
    assert COPIES_DIFFER in reasons
    assert not bound.get_blob_client(document.blob_name).exists()
    assert [
        i for i in bound.list_blobs(include=["deleted", "versions"]) if i.name == document.blob_name
    ]


def test_a_live_blob_holding_the_rows_bytes_is_never_written(
    soft_delete_only: RecoveryDouble, store: DocumentStore
) -> None:
    """A plan entry whose blob was restored by hand before the plan is applied finds the live
    bytes equal to the row's and writes nothing (the ETag is unchanged): intact, or restored
    when the plan's listing let the undelete go first (a no-op over a live blob)."""
    service = BlobServiceClient.from_connection_string(soft_delete_only.connection_string)
    container = create_unique_container(service, "intact")
    try:
        blobs.bind(container, store.database_id())
        document = UploadProtocol(store, container).put("doc.txt", b"right", ".txt")
        container.delete_blob(document.blob_name)
        plan = make_plan(store, container)
        container.get_blob_client(document.blob_name).undelete_blob()
        etag = container.get_blob_client(document.blob_name).get_blob_properties().etag

        result = apply_plan(store, container, round_trip(plan))

        assert [o.status for o in result.outcomes] in ([INTACT], [RESTORED])
        assert container.get_blob_client(document.blob_name).get_blob_properties().etag == etag
    finally:
        container.delete_container()


def test_rows_without_any_kept_copy_or_with_expired_copies_are_reported_with_why(
    nets: RecoveryDouble, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """A blob the nets never kept is `no kept copy`; one whose copy ran out of retention between
    plan and apply is `retention expired`, and neither is guessed."""
    never = protocol.put("never.txt", b"never kept", ".txt")
    later = protocol.put("later.txt", b"kept a while", ".txt")
    bound.delete_blob(never.blob_name)
    bound.delete_blob(later.blob_name)
    forget_copies_holding(nets, bound, never.blob_name, b"never kept")

    plan = make_plan(store, bound)
    by_blob = {r["blob"]: r for r in plan["rows"]}
    assert by_blob[never.blob_name]["reason"] == NO_COPY
    assert by_blob[later.blob_name]["days_left"] in (7, None)
    forget_copies_holding(nets, bound, later.blob_name, b"kept a while")
    result = apply_plan(store, bound, round_trip(plan))

    assert [(o.blob, o.status, o.detail) for o in result.outcomes] == [
        (later.blob_name, UNRECOVERABLE, EXPIRED)
    ]


@pytest.mark.parametrize("field", ["account", "endpoint", "container", "database_id", "table"])
def test_a_plan_for_another_target_is_refused_before_any_write(
    field: str, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """A plan whose account, endpoint, container, database or table is not this one's is
    refused whole; the deleted blob stays deleted."""
    document = protocol.put("doc.txt", b"right", ".txt")
    bound.delete_blob(document.blob_name)
    plan = round_trip(make_plan(store, bound))
    plan["target"][field] = "elsewhere"

    with pytest.raises(RepairRefusedError, match=field):
        apply_plan(store, bound, plan)

    assert not bound.get_blob_client(document.blob_name).exists()


def test_one_document_is_recovered_without_a_plan(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """`recover_one` judges and restores a single document (the drill's entry point), and says
    `intact` when run again."""
    document = protocol.put("one.txt", b"only me", ".txt")
    protocol.put("other.txt", b"not me", ".txt")
    bound.delete_blob(document.blob_name)

    first = recover_one(store, bound, document.id)
    again = recover_one(store, bound, document.id)

    assert (first.status, again.status) == (RESTORED, INTACT)
    assert bound.get_blob_client(document.blob_name).download_blob().readall() == b"only me"


def test_a_deleted_container_is_restored_then_its_documents_come_back(
    nets: RecoveryDouble, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """Documents deleted and overwritten, then their container deleted: the plan names the
    deleted container with its version and days left; applying it restores the container, then
    every document's bytes, and a second plan lists nothing."""
    documents = put_many(protocol, 30)
    for document in documents[:10]:
        bound.delete_blob(document.blob_name)
    for document in documents[10:15]:
        bound.upload_blob(document.blob_name, b"wrong bytes", overwrite=True)
    bound.delete_container()

    plan = make_plan(store, bound)
    restore = plan["container_restore"]
    assert (restore["name"], restore["days_left"]) == (bound.container_name, 7)
    assert plan["summary"]["soonest_days_left"] == 7
    result = apply_plan(store, bound, round_trip(plan))

    assert result.container_restored == restore["version"]
    assert result.count(RESTORED) == 15
    assert_all_readable(bound, documents)
    assert make_plan(store, bound)["rows"] == []


def test_a_container_is_restored_only_while_its_name_is_free(
    nets: RecoveryDouble, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """A live container created under the deleted one's name between plan and apply makes the
    plan refused: nothing is written to the new container."""
    protocol.put("doc.txt", b"right", ".txt")
    bound.delete_container()
    plan = round_trip(make_plan(store, bound))
    bound.create_container()

    with pytest.raises(RepairRefusedError):
        apply_plan(store, bound, plan)

    assert list(bound.list_blobs()) == []


def test_rows_are_restored_several_at_a_time_and_a_stop_lets_the_started_ones_finish(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """With four workers every deleted document comes back and the outcomes keep the plan's
    order; a stop asked before the sixth row leaves five restored, the rest still planned."""
    documents = put_many(protocol, 12)
    for document in documents:
        bound.delete_blob(document.blob_name)
    plan = round_trip(make_plan(store, bound))
    asked: list[int] = []

    def stop_before_the_sixth() -> str | None:
        asked.append(1)
        return "SIGINT" if len(asked) > 5 else None

    stopped = apply_plan(store, bound, plan, stop_before_the_sixth, workers=4)
    rest = apply_plan(store, bound, round_trip(make_plan(store, bound)), workers=4)

    assert stopped.stopped == "SIGINT"
    assert [o.document for o in stopped.outcomes] == [r["document"] for r in plan["rows"][:5]]
    assert stopped.count(RESTORED) == 5
    assert rest.count(RESTORED) == 7
    assert [o.document for o in rest.outcomes] == [r["document"] for r in plan["rows"][5:]]
    assert_all_readable(bound, documents)
