"""Contracts the mutation run found unguarded: races on replace and delete, optional arguments,
messages, and the dry run's view of a sealed row."""

from __future__ import annotations

import contextlib
import io
import re
from functools import partial
from typing import Any

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import (
    ConcurrentReplaceError,
    InvalidNameError,
    ProtocolError,
    ReservationExpiredError,
    UploadProtocol,
)
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.sweep import Sweeper
from tests.sweeper.conftest import CUTOFF, stale_rows_in


def unreferenced_states(store: DocumentStore, container: ContainerClient) -> set[str]:
    """The state tags of blobs no row references: none may still say committed."""
    referenced = {d.blob_name for d in store.all()}
    return {
        (b.tags or {}).get(STATE_TAG, "")
        for b in container.list_blobs(include=["tags"])
        if b.name not in referenced
    }


def test_replace_without_extension_gets_a_bare_name(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """Replacing with no extension given stores the new bytes under a name without one."""
    document = protocol.put("a", b"v1")
    replaced = protocol.replace(document.id, b"v2")
    assert "." not in replaced.blob_name
    assert protocol.read("a") == b"v2"


def test_replace_never_stores_more_than_the_declared_length(
    protocol: UploadProtocol, container: ContainerClient
) -> None:
    """A stream replacement longer than `length` stores `length` bytes or is refused."""
    document = protocol.put("a.txt", b"v1", ".txt")
    with contextlib.suppress(ProtocolError):
        protocol.replace(document.id, io.BytesIO(b"abcdef"), ".txt", length=3)
    assert protocol.read("a.txt") in (b"abc", b"v1")


def test_losing_replace_removes_its_new_blob(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A replace that loses the switch to a concurrent one says why and leaves no live orphan."""
    plain = UploadProtocol(store, container)
    document = plain.put("a.txt", b"v1", ".txt")
    raced: list[str] = []

    def other_writer_replaces_first(step: str) -> None:
        if step == "replace.seal" and not raced:
            raced.append(plain.replace(document.id, b"winner", ".txt").blob_name)

    loser = UploadProtocol(store, container, checkpoint=other_writer_replaces_first)
    with pytest.raises(ConcurrentReplaceError, match=f"document {document.id} changed during"):
        loser.replace(document.id, b"loser", ".txt")
    assert plain.read("a.txt") == b"winner"
    assert store.get(document.id).blob_name == raced[0]  # type: ignore[union-attr]
    assert unreferenced_states(store, container) <= {"retired", "pending"}


class ReplacedBeforeDelete(DocumentStore):
    """A table where another writer replaces the document just before our delete lands."""

    def __init__(self, store: DocumentStore, container: ContainerClient) -> None:
        super().__init__(store.engine, store.layout)
        self.other = UploadProtocol(store, container)

    def delete_row(self, document_id: str, blob_name: str, *more: Any) -> bool:
        self.other.replace(document_id, b"newer", ".txt")
        return super().delete_row(document_id, blob_name, *more)


def test_delete_that_loses_to_a_replace_keeps_the_newer_document(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A delete racing a replace refuses, names the document, and leaves the newer bytes."""
    document = UploadProtocol(store, container).put("a.txt", b"v1", ".txt")
    racing = UploadProtocol(ReplacedBeforeDelete(store, container), container)
    with pytest.raises(
        ConcurrentReplaceError, match=f"document {document.id} changed during delete"
    ):
        racing.delete(document.id)
    assert UploadProtocol(store, container).read("a.txt") == b"newer"
    assert unreferenced_states(store, container) <= {"retired", "pending"}


def test_reading_a_missing_document_names_it(protocol: UploadProtocol) -> None:
    """Reading a name with no Ready document fails with a message that names it."""
    with pytest.raises(ProtocolError, match=r"no ready document named 'nothing\.txt'"):
        protocol.read("nothing.txt")


def test_dry_run_counts_a_sealed_row_as_rolled_forward(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A dry run reports a stale sealed row as a roll-forward, the same as the real sweep."""
    (sealed,) = stale_rows_in(store, container, 1, prefix="sealed")
    container.get_blob_client(sealed.blob_name).set_blob_tags({STATE_TAG: COMMITTED})
    preview = Sweeper(store, container, SweepSettings(cutoff=CUTOFF, dry_run=True)).run()
    assert (preview.rolled_forward, preview.errors) == (1, [])
    real = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()
    assert real.rolled_forward == 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "document name must not be empty"),
        ("   ", "document name must not be empty"),
        ("x" * 1025, "document name is 1025 characters; at most 1024"),
        ("tab\there", "document name must not contain control characters"),
    ],
)
def test_invalid_names_are_refused_with_the_reason(
    protocol: UploadProtocol, name: str, message: str
) -> None:
    """A name that is empty, too long or holds a control character is refused, saying which."""
    with pytest.raises(InvalidNameError, match=f"^{message}$"):
        protocol.reserve(name)


def test_names_at_the_limits_are_accepted(protocol: UploadProtocol) -> None:
    """1,024 characters and spaces are allowed."""
    assert protocol.reserve("x" * 1024).name == "x" * 1024
    assert protocol.reserve("a name with spaces").status is Status.PENDING


def test_bad_extension_names_the_rule(protocol: UploadProtocol) -> None:
    """An extension that is not a dot and 1-16 letters or digits is refused with the rule."""
    with pytest.raises(InvalidNameError, match=r"^extension 'pdf' must be empty or a dot"):
        protocol.reserve("a", "pdf")


def test_blob_names_are_32_hex_digits_and_the_extension(protocol: UploadProtocol) -> None:
    """A reserved blob name is the id's 32 hex digits followed by the lower-cased extension."""
    assert re.fullmatch(r"[0-9a-f]{32}\.pdf", protocol.reserve("a", ".PDF").blob_name)


def test_put_never_stores_more_than_the_declared_length(protocol: UploadProtocol) -> None:
    """A stream put longer than `length` stores exactly `length` bytes or is refused."""
    try:
        protocol.put("a.txt", io.BytesIO(b"abcdef"), ".txt", length=2)
    except ProtocolError:
        with pytest.raises(ProtocolError):
            protocol.read("a.txt")
    else:
        assert protocol.read("a.txt") == b"ab"


def test_row_swept_between_seal_and_publish_is_reported(
    store: DocumentStore, container: ContainerClient
) -> None:
    """If the row disappears after the seal, publish raises instead of claiming success."""

    def row_swept_after_seal(step: str) -> None:
        if step == "seal":
            with store.engine.begin() as conn:
                conn.execute(store.table.delete())

    protocol = UploadProtocol(store, container, checkpoint=row_swept_after_seal)
    document = protocol.reserve("a.txt", ".txt")
    with pytest.raises(ReservationExpiredError, match=f"document {document.id} was swept"):
        protocol.complete(document.id, b"bytes")


def test_completing_a_swept_reservation_names_it(protocol: UploadProtocol) -> None:
    """Completing a reservation that no longer exists says which document and why."""
    with pytest.raises(ReservationExpiredError, match="document gone has no reservation"):
        protocol.complete("gone", b"bytes")


def test_sealing_a_blob_that_never_landed_names_the_document(protocol: UploadProtocol) -> None:
    """Sealing without an upload fails with the document id and the reason."""
    document = protocol.reserve("a.txt", ".txt")
    with pytest.raises(ReservationExpiredError, match=f"document {document.id}: cannot seal"):
        protocol.seal(document)


@pytest.mark.parametrize("action", ["replace", "delete"])
def test_replace_or_delete_of_an_unknown_document_names_it(
    protocol: UploadProtocol, action: str
) -> None:
    """Replacing or deleting an id with no Ready document fails with a message naming it."""
    act = partial(protocol.replace, "missing", b"bytes") if action == "replace" else None
    with pytest.raises(ProtocolError, match=r"^document missing is not a Ready document$"):
        (act or partial(protocol.delete, "missing"))()
