"""Issue 45 on Azurite with SQLite and PostgreSQL: the protocol writes the document's identity as
blob metadata in the Put Blob it sends anyway, hostile names included, and refuses at put what
the metadata could not carry back."""

from __future__ import annotations

import hashlib
import io
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import identity
from blob_safetynet.protocol.upload import InvalidNameError, UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content, Document, Status, new_document_id
from testkit.service_doubles import ServiceDouble, tag_guarding_service

NOW = datetime.now(UTC)
HOSTILE_NAMES = {
    "emoji-1024": "\U0001f600" * 1024,
    "ascii-1024": "n" * 1024,
    "cjk": "日本語の文書/報告.pdf",
    "c1-controls": "\x7f\x85\u2028 DEL NEL LS",
    "header-syntax": '  a: b\\r%0A%%"quoted" ',
    "rtl": "\u202efdp.exe",
}


def identity_of(container: ContainerClient, blob_name: str) -> identity.Identity:
    """The identity as one blob's properties and as the listing give it (both must agree)."""
    properties = container.get_blob_client(blob_name).get_blob_properties()
    read = identity.read_identity(properties.metadata)
    assert read is not None
    assert list_blobs(container)[blob_name].identity == read
    return read


def content_of(container: ContainerClient, blob_name: str) -> Content:
    data = container.download_blob(blob_name).readall()
    return Content(len(data), hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
def test_a_put_writes_the_identity_that_reads_back_as_the_row_and_the_bytes(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient, name: str
) -> None:
    """The blob's metadata names the row's id and exact name, the bytes' length and SHA-256
    (what the row records), the time the write began, and no replaced blob."""
    before = datetime.now(UTC)
    document = protocol.put(name, b"hostile bytes", ".bin")
    read = identity_of(container, document.blob_name)
    assert (read.document_id, read.name, read.name_cut, read.replaces) == (
        document.id,
        name,
        False,
        None,
    )
    assert Content(read.length or -1, read.sha256 or "") == store.content(document.id)
    assert before <= read.written_utc <= datetime.now(UTC)
    verified = identity.verify(read, document.blob_name, content_of(container, document.blob_name))
    assert verified.document(document.created_utc) == document


def test_a_replace_names_the_blob_it_replaces_so_the_newest_is_known(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """Each replace's blob names its predecessor: the succession of the document's blobs is
    certain and its newest is the blob the row names."""
    first = protocol.put("cv.txt", b"v1", ".txt")
    second = protocol.replace(first.id, b"v2", ".txt")
    third = protocol.replace(first.id, io.BytesIO(b"v3"), ".txt", length=2)
    blobs = {d.blob_name: identity_of(container, d.blob_name) for d in (first, second, third)}
    assert blobs[second.blob_name].replaces == first.blob_name
    assert blobs[third.blob_name].replaces == second.blob_name
    assert identity.succession(blobs) == identity.Succession(
        (third.blob_name, second.blob_name, first.blob_name), certain=True
    )


def test_a_streamed_put_carries_what_is_known_before_its_bytes_are_sent(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """A stream's hash is known only after it is sent: its identity has the declared length and
    no SHA-256, and the bytes themselves verify it."""
    document = protocol.put("stream.bin", io.BytesIO(b"streamed"), ".bin", length=8)
    read = identity_of(container, document.blob_name)
    assert (read.length, read.sha256) == (8, None)
    verified = identity.verify(read, document.blob_name, content_of(container, document.blob_name))
    assert verified.content.sha256 == hashlib.sha256(b"streamed").hexdigest()


def test_a_staged_upload_carries_the_identity_in_its_block_list(
    store: DocumentStore, azurite: Azurite, container: ContainerClient
) -> None:
    """Bytes above the single-put size go in blocks; the Put Block List carries the identity."""
    staged = BlobServiceClient.from_connection_string(
        azurite.connection_string, max_single_put_size=1024, max_block_size=1024
    ).get_container_client(container.container_name)
    data = bytes(range(256)) * 20
    document = UploadProtocol(store, staged).put("big.bin", data, ".bin")
    read = identity_of(container, document.blob_name)
    assert (read.length, read.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_a_legacy_row_s_name_the_protocol_would_refuse_is_carried_on_replace(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A row written before the protocol may hold control characters in its name; replacing
    it writes them into the new blob's identity, which reads back exactly."""
    legacy = Document(new_document_id(), "legacy\tname\n", "legacy.bin", Status.PENDING, NOW)
    store.reserve(legacy)
    container.upload_blob(legacy.blob_name, b"v1", tags={STATE_TAG: COMMITTED})
    assert store.publish(legacy.id)
    replaced = protocol.replace(legacy.id, b"v2", ".bin")
    read = identity_of(container, replaced.blob_name)
    assert (read.name, read.replaces) == ("legacy\tname\n", "legacy.bin")


@pytest.fixture
def enforcing(azurite: Azurite) -> Iterator[ServiceDouble]:
    with tag_guarding_service(azurite.port) as service:
        yield service


def test_the_identity_costs_no_request(
    store: DocumentStore, container: ContainerClient, enforcing: ServiceDouble
) -> None:
    """Where the service evaluates x-ms-if-tags, a put is still two blob requests and a replace
    three, and each new blob carries its identity."""
    through = BlobServiceClient.from_connection_string(
        enforcing.connection_string
    ).get_container_client(container.container_name)
    protocol = UploadProtocol(store, through)
    protocol.guards.enforced(through)
    enforcing.reset()
    first = protocol.put("counted.txt", b"one")
    assert enforcing.counts() == Counter({"PUT": 1, "PUT comp=tags": 1})
    enforcing.reset()
    second = protocol.replace(first.id, b"two")
    assert enforcing.counts() == Counter({"PUT": 1, "PUT comp=tags": 2})
    assert identity_of(container, first.blob_name).name == "counted.txt"
    assert identity_of(container, second.blob_name).replaces == first.blob_name


@pytest.mark.parametrize(
    ("name", "document_id", "message"),
    [
        ("line\nbreak.txt", None, "control characters"),
        ("lone \udc80 surrogate.txt", None, "holds a lone surrogate)"),
        ("x" * 1025, None, "1025 characters; at most 1024"),
        ("fine.txt", "i" * 37, "document id is 37 characters; at most 36"),
        ("fine.txt", "id\x00", "document id must not contain control characters"),
    ],
    ids=["newline", "surrogate", "1025", "long-id", "nul-id"],
)
def test_what_the_metadata_cannot_carry_back_is_refused_at_put(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    name: str,
    document_id: str | None,
    message: str,
) -> None:
    """A name or id the identity could not hold is refused before anything is reserved or
    uploaded, with the reason."""
    with pytest.raises(InvalidNameError, match=re.escape(f"{message}; no document was reserved")):
        protocol.put(name, b"bytes", ".txt", document_id=document_id)
    assert store.all() == []
    assert list(container.list_blobs()) == []
