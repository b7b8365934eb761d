"""The upload protocol: reserve -> create-only upload tagged pending -> seal -> publish.

The database learns the blob's name first and admits the document exists last (DESIGN.md
section 2). Each step is a public method so a caller (or a crash test) can stop after any of
them; `complete` resumes from wherever a previous attempt stopped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from azure.storage.blob import ContainerClient

from safetynet.constants import RETIRED
from sweeper import blobs
from sweeper.store import Document, DocumentStore, Status, new_document_id

MAX_NAME_LENGTH = 1024
_EXTENSION = re.compile(r"(\.[A-Za-z0-9]{1,16})?")

Clock = Callable[[], datetime]
Checkpoint = Callable[[str], None]
"""Called with the step's name after each durable step; crash tests raise from it."""


def no_checkpoint(step: str) -> None:
    """The default: steps run straight through."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class ProtocolError(RuntimeError):
    """A protocol step cannot proceed; the message says which document and why."""


class InvalidNameError(ProtocolError, ValueError):
    pass


class ReservationExpiredError(ProtocolError):
    """The reservation was swept (row or pending blob gone) before the upload finished."""


class ConcurrentReplaceError(ProtocolError):
    """Another writer changed the document between our upload and our switch."""


def validate_name(name: str) -> str:
    if not name or not name.strip():
        raise InvalidNameError("document name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"document name is {len(name)} characters; at most {MAX_NAME_LENGTH}"
        )
    if any(ord(ch) < 32 for ch in name):
        raise InvalidNameError("document name must not contain control characters")
    return name


def validate_extension(extension: str) -> str:
    if not _EXTENSION.fullmatch(extension):
        raise InvalidNameError(
            f"extension {extension!r} must be empty or a dot and 1-16 letters or digits, like '.pdf'"
        )
    return extension.lower()


def new_blob_name(extension: str) -> str:
    """`<uuid hex><ext>`: chosen at reservation, so the row knows the blob before it exists."""
    return f"{new_document_id().replace('-', '')}{validate_extension(extension)}"


@dataclass
class UploadProtocol:
    store: DocumentStore
    container: ContainerClient
    clock: Clock = utc_now
    checkpoint: Checkpoint = no_checkpoint

    def reserve(self, name: str, extension: str = "", document_id: str | None = None) -> Document:
        """Step 1: a Pending row with its blob name; the name's uniqueness is the DB's to decide."""
        document = Document(
            id=document_id or new_document_id(),
            name=validate_name(name),
            blob_name=new_blob_name(extension),
            status=Status.PENDING,
            created_utc=self.clock(),
        )
        reserved = self.store.reserve(document)
        self.checkpoint("reserve")
        return reserved

    def upload(self, document: Document, data: blobs.UploadData, length: int | None = None) -> bool:
        """Step 2: create-only upload tagged pending; False when the blob already existed."""
        blob = self.container.get_blob_client(document.blob_name)
        created = blobs.upload_create_only(blob, data, length)
        self.checkpoint("upload")
        return created

    def seal(self, document: Document) -> None:
        """Step 3: pending -> committed, before the row may say Ready (the order rule)."""
        try:
            blobs.seal(self.container.get_blob_client(document.blob_name))
        except blobs.TagTransitionError as error:
            raise ReservationExpiredError(f"document {document.id}: cannot seal: {error}") from None
        self.checkpoint("seal")

    def publish(self, document: Document) -> Document:
        """Step 4: the row turns Ready only if it is still Pending; Ready already is success."""
        if not self.store.publish(document.id):
            current = self.store.get(document.id)
            if current is None:
                raise ReservationExpiredError(f"document {document.id} was swept before publish")
            if current.status is not Status.READY:
                raise ProtocolError(f"document {document.id} is {current.status}, cannot publish")
        self.checkpoint("publish")
        return replace(document, status=Status.READY)

    def complete(
        self, document_id: str, data: blobs.UploadData, length: int | None = None
    ) -> Document:
        """Steps 2-4 for a reserved document, resuming after a crash at any point."""
        document = self.store.get(document_id)
        if document is None:
            raise ReservationExpiredError(f"document {document_id} has no reservation (swept?)")
        if document.status is Status.READY:
            return document
        self.upload(document, data, length)
        self.seal(document)
        return self.publish(document)

    def put(
        self,
        name: str,
        data: blobs.UploadData,
        extension: str = "",
        document_id: str | None = None,
        length: int | None = None,
    ) -> Document:
        """The whole protocol. A retry with the same `document_id` finishes the first attempt."""
        document = self.reserve(name, extension, document_id)
        return self.complete(document.id, data, length)

    def replace(
        self,
        document_id: str,
        data: blobs.UploadData,
        extension: str = "",
        length: int | None = None,
    ) -> Document:
        """New bytes under a new name, sealed, row switched, and only then the old blob deleted.

        A crash before the switch leaves an unreferenced new blob, a crash after it the old
        one: `reconcile` finds and removes both, each under its tag guard.
        """
        current = self._ready(document_id)
        new_blob = self.container.get_blob_client(new_blob_name(extension))
        blobs.upload_create_only(new_blob, data, length)
        self.checkpoint("replace.upload")
        blobs.seal(new_blob)
        self.checkpoint("replace.seal")
        if not self.store.switch_blob(document_id, current.blob_name, new_blob.blob_name):
            self._drop(new_blob.blob_name)
            raise ConcurrentReplaceError(f"document {document_id} changed during replace; retry")
        self.checkpoint("replace.switch")
        self._drop(current.blob_name, "replace")
        return replace(current, blob_name=new_blob.blob_name)

    def delete(self, document_id: str) -> None:
        """Row first (readers stop seeing it), then the blob under its retired guard."""
        current = self._ready(document_id)
        if not self.store.delete_row(document_id, current.blob_name):
            raise ConcurrentReplaceError(f"document {document_id} changed during delete; retry")
        self.checkpoint("delete.row")
        self._drop(current.blob_name, "delete")

    def _drop(self, blob_name: str, step: str | None = None) -> None:
        """Retire then delete a committed blob no row references any more."""
        blob = self.container.get_blob_client(blob_name)
        if blobs.retire(blob) and step is not None:
            self.checkpoint(f"{step}.retire")
        blobs.delete_guarded(blob, RETIRED)

    def read(self, name: str) -> bytes:
        """Readers see Ready documents only."""
        document = self.store.get_by_name(name)
        if document is None or document.status is not Status.READY:
            raise ProtocolError(f"no ready document named {name!r}")
        return self.container.get_blob_client(document.blob_name).download_blob().readall()

    def _ready(self, document_id: str) -> Document:
        document = self.store.get(document_id)
        if document is None or document.status is not Status.READY:
            raise ProtocolError(f"document {document_id} is not a Ready document")
        return document
