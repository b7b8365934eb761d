"""What the apply sends for a deleted document: the floor (Undelete Blob, then one Get Blob that
proves the bytes and the state tag), more only when the blob is not what the plan found."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.recover.apply import RESTORED, UNRECOVERABLE, apply_plan
from blob_safetynet.recover.plan import COPIES_DIFFER, make_plan
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from tests.recover.conftest import bound_container


@pytest.fixture
def deleted_only(
    soft_delete_only: RecoveryDouble, store: DocumentStore
) -> Iterator[ContainerClient]:
    """A container on an account with blob soft delete (no versioning), bound to `store`."""
    container = bound_container(soft_delete_only, store)
    yield container
    container.delete_container()


def test_a_deleted_document_costs_one_undelete_and_one_read(
    soft_delete_only: RecoveryDouble, store: DocumentStore, deleted_only: ContainerClient
) -> None:
    """Five deleted documents come back with five Undelete Blob and five Get Blob (and the
    run's one binding check), each holding its bytes and tagged committed."""
    protocol = UploadProtocol(store, deleted_only)
    documents = [protocol.put(f"d{n}.txt", f"bytes {n}".encode(), ".txt") for n in range(5)]
    for document in documents:
        deleted_only.delete_blob(document.blob_name)
    plan = make_plan(store, deleted_only)
    soft_delete_only.reset()

    result = apply_plan(store, deleted_only, plan)

    assert result.count(RESTORED) == 5
    assert soft_delete_only.counts() == {"PUT comp=undelete": 5, "GET": 5, "HEAD": 1}
    for number, document in enumerate(documents):
        blob = deleted_only.get_blob_client(document.blob_name)
        assert blob.download_blob().readall() == f"bytes {number}".encode()
        assert blob.get_blob_tags()[STATE_TAG] == COMMITTED


def test_an_undeleted_blob_not_tagged_committed_is_tagged_committed(
    store: DocumentStore, deleted_only: ContainerClient
) -> None:
    """A document whose tag was flipped to pending behind the protocol before it was deleted
    comes back tagged committed: the read under `x-ms-if-tags` is refused, and the tag is set."""
    document = UploadProtocol(store, deleted_only).put("doc.txt", b"right", ".txt")
    blob = deleted_only.get_blob_client(document.blob_name)
    blob.set_blob_tags({STATE_TAG: PENDING})
    blob.delete_blob()

    result = apply_plan(store, deleted_only, make_plan(store, deleted_only))

    assert [o.status for o in result.outcomes] == [RESTORED]
    assert blob.get_blob_tags()[STATE_TAG] == COMMITTED
    assert blob.download_blob().readall() == b"right"


def test_a_blob_written_after_the_plan_is_not_put_back(
    store: DocumentStore, deleted_only: ContainerClient
) -> None:
    """A blob written behind the protocol after the plan found the name missing, with other
    bytes than the kept copy's, is left as it is (same ETag) after the undelete finds it; a
    fresh plan then gives the row's bytes back from the snapshot the write left."""
    document = UploadProtocol(store, deleted_only).put("doc.txt", b"right", ".txt")
    blob = deleted_only.get_blob_client(document.blob_name)
    blob.delete_blob()
    plan = make_plan(store, deleted_only)
    etag = blob.upload_blob(b"other", overwrite=True)["etag"]

    result = apply_plan(store, deleted_only, plan)

    assert [(o.status, o.detail) for o in result.outcomes] == [(UNRECOVERABLE, COPIES_DIFFER)]
    assert blob.get_blob_properties().etag == etag
    again = apply_plan(store, deleted_only, make_plan(store, deleted_only))
    assert [o.status for o in again.outcomes] == [RESTORED]
    assert blob.download_blob().readall() == b"right"
