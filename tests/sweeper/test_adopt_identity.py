"""Issue 45: `safetynet adopt` writes the document's identity onto the blobs it adopts (and onto
committed blobs of Ready rows written before the protocol wrote it), by Set Blob Metadata under
If-Match the ETag it judged, keeping the blob's own metadata. Azurite evaluates If-Match on Set
Blob Metadata itself; Set Blob Tags' condition goes through testkit's ETag double."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.invariants import InvariantWatch
from blob_safetynet.protocol import identity
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile import adopt
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content, Document, Status
from testkit.etag_double import etag_guarding_service
from testkit.service_doubles import ServiceDouble
from tests.conftest import RunCli
from tests.sweeper.test_adopt import cli_args, legacy_row

OWN = {"tenant": "t1", "Origin": "scanner 7"}


@pytest.fixture
def guarded(azurite: Azurite, service_client: BlobServiceClient) -> Iterator[ServiceDouble]:
    with etag_guarding_service(azurite.port, service_client) as double:
        yield double


@pytest.fixture
def through(guarded: ServiceDouble, container: ContainerClient) -> ContainerClient:
    """The test's container through the ETag double."""
    service = BlobServiceClient.from_connection_string(guarded.connection_string)
    return service.get_container_client(container.container_name)


def legacy_with_metadata(
    store: DocumentStore, container: ContainerClient, status: Status = Status.READY
) -> Document:
    document = legacy_row(store, None, status)
    container.upload_blob(document.blob_name, b"legacy bytes", metadata=OWN)
    return document


def metadata_of(container: ContainerClient, blob_name: str) -> dict[str, str]:
    return dict(container.get_blob_client(blob_name).get_blob_properties().metadata)


def test_adopt_writes_the_identity_beside_the_blob_s_own_metadata(
    store: DocumentStore, container: ContainerClient, through: ContainerClient
) -> None:
    """Each adopted blob names its row's document (id, name, the listed size, the row's SHA-256
    when it records that length, the blob's Last-Modified); its own pairs are kept."""
    pending = legacy_with_metadata(store, container, Status.PENDING)
    ready = legacy_with_metadata(store, container)
    digest = hashlib.sha256(b"legacy bytes").hexdigest()
    assert store.record_content(ready.id, Content(12, digest)) == Content(12, digest)
    listed = {b.name: b for b in container.list_blobs()}

    plan = adopt.plan(store, container)
    result = adopt.apply(store, through, plan)

    assert (result.tagged, result.identified, result.marked_ready, result.failed) == (2, 2, 1, [])
    for document, sha256 in ((pending, None), (ready, digest)):
        metadata = metadata_of(container, document.blob_name)
        assert identity.without_identity(metadata) == OWN
        read = identity.read_identity(metadata)
        assert read is not None
        assert (read.document_id, read.name, read.length, read.sha256) == (
            document.id,
            document.name,
            12,
            sha256,
        )
        assert read.written_utc == listed[document.blob_name].last_modified
        tags = container.get_blob_client(document.blob_name).get_blob_tags()
        assert tags[STATE_TAG] == COMMITTED
    assert adopt.plan(store, container).work == []


def test_committed_blobs_written_before_the_identity_are_backfilled(
    run_cli: RunCli,
    db_url: str,
    store: DocumentStore,
    container: ContainerClient,
    guarded: ServiceDouble,
) -> None:
    """A Ready row whose committed blob carries no identity (the protocol before issue 45) gets
    it from `adopt --apply`, and a second run has nothing left to write."""
    document = UploadProtocol(store, container).put("old.txt", b"before", ".txt")
    container.get_blob_client(document.blob_name).set_blob_metadata({})
    args = cli_args(db_url, guarded.connection_string, container)

    code, out, _ = run_cli("adopt", *args, "--json")
    assert (code, json.loads(out)["to_identify"], json.loads(out)["to_tag"]) == (0, 1, 0)
    code, out, _ = run_cli("adopt", *args, "--apply", "--json")
    assert (code, json.loads(out)["identified"]) == (0, 1)
    read = identity.read_identity(metadata_of(container, document.blob_name))
    assert read is not None
    assert (read.document_id, read.name) == (document.id, "old.txt")
    code, out, _ = run_cli("adopt", *args, "--apply", "--json")
    assert (code, json.loads(out)["to_identify"], json.loads(out)["identified"]) == (0, 0, 0)


def test_a_blob_changed_after_the_listing_gets_412_and_nothing_is_written(
    store: DocumentStore, container: ContainerClient, through: ContainerClient
) -> None:
    """The identity is written If-Match the listed ETag: a concurrent metadata write (no tag
    write needed) or new bytes (tag write needed) in between is answered 412 and the blob keeps
    exactly what the other writer left."""
    committed = legacy_row(store, None)
    container.upload_blob(committed.blob_name, b"x", tags={STATE_TAG: COMMITTED})
    rewritten = legacy_with_metadata(store, container)
    plan = adopt.plan(store, container)
    assert plan.to_identify == 2
    container.get_blob_client(committed.blob_name).set_blob_metadata({"owner": "someone else"})
    container.upload_blob(rewritten.blob_name, b"new bytes", overwrite=True, metadata={"v": "2"})

    result = adopt.apply(store, through, plan)

    assert (result.tagged, result.identified) == (0, 0)
    assert len([f for f in result.failed if "changed after the listing (ETag)" in f]) == 2
    assert metadata_of(container, committed.blob_name) == {"owner": "someone else"}
    assert metadata_of(container, rewritten.blob_name) == {"v": "2"}
    assert container.get_blob_client(rewritten.blob_name).get_blob_tags() == {}


def test_an_identity_it_did_not_write_is_left_and_reported(
    store: DocumentStore, container: ContainerClient, through: ContainerClient
) -> None:
    """A blob whose metadata names another document, or claims one unreadably, keeps its
    metadata; the row is still adopted and the problem reported (exit 1)."""
    other = legacy_row(store, None)
    container.upload_blob(
        other.blob_name,
        b"x",
        metadata=identity.encode("someone-else", "theirs.txt", other.created_utc),
    )
    garbled = legacy_row(store, None)
    container.upload_blob(garbled.blob_name, b"x", metadata={"safetynet_format": "9"})

    plan = adopt.plan(store, container)
    result = adopt.apply(store, through, plan)

    problems = "\n".join(result.plan.identity_problems)
    assert "its metadata names document someone-else; left as is" in problems
    assert "unknown identity format '9'" in problems
    assert result.problems
    assert (result.tagged, result.identified) == (2, 0)
    assert metadata_of(container, garbled.blob_name) == {"safetynet_format": "9"}


def test_no_room_beside_the_blob_s_own_metadata_is_reported_not_forced(
    store: DocumentStore, container: ContainerClient, through: ContainerClient
) -> None:
    """A blob whose own metadata leaves less room than the identity needs keeps it whole: the
    identity is not written, the row is adopted, the reason reported."""
    crowded = legacy_row(store, None)
    container.upload_blob(crowded.blob_name, b"x", metadata={"notes": "n" * 8100})

    result = adopt.apply(store, through, adopt.plan(store, container))

    assert result.tagged == 1
    assert any("no room for the document's identity" in p for p in result.plan.identity_problems)
    assert metadata_of(container, crowded.blob_name) == {"notes": "n" * 8100}


def test_writing_the_identity_is_not_taken_for_a_rewrite_of_the_bytes(
    store: DocumentStore, container: ContainerClient, through: ContainerClient
) -> None:
    """Set Blob Metadata moves the ETag; I6 (no bytes overwritten) still holds across adopt,
    whose writes keep each blob's MD5, while every other invariant is judged as ever."""
    for _ in range(3):
        legacy_with_metadata(store, container, Status.PENDING)
    watch = InvariantWatch(store, container)
    result = adopt.apply(store, through, adopt.plan(store, container))
    assert result.identified == 3
    assert [r for r in watch.check("after adopt") if not r.holds] == []
