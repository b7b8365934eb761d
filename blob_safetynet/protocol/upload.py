"""The upload protocol: reserve -> create-only upload tagged pending -> seal -> publish.

The database learns the blob's name first and admits the document exists last (DESIGN.md
section 2). Each step is a public method so a caller (or a crash test) can stop after any of
them; `complete` resumes from wherever a previous attempt stopped. Replace and delete record
every blob they leave behind in the database before the window opens, so the sweeper finds it.

Just over 500 lines: the protocol's one class with its errors and name rules; each step a
method a crash test can stop after, read as one sequence.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import BlobClient, ContainerClient

from blob_safetynet.protocol import blobs, identity
from blob_safetynet.settings.vocabulary import PENDING
from blob_safetynet.store.documents import DocumentStore, SwitchResult
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Content, Document, Status, new_document_id

MAX_NAME_LENGTH = identity.MAX_NAME_LENGTH
_EXTENSION = re.compile(r"(\.[A-Za-z0-9]{1,16})?")

Clock = Callable[[], datetime]
Checkpoint = Callable[[str], None]
"""Called with the step's name after each durable step; crash tests raise from it."""


def no_checkpoint(step: str) -> None:
    """The default: steps run straight through."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class ProtocolError(RuntimeError):
    """A protocol step cannot proceed; names the document (when there is one) and why."""

    def __init__(self, message: str, document_id: str | None = None) -> None:
        super().__init__(message)
        self.document_id = document_id


class InvalidNameError(ProtocolError, ValueError):
    pass


class ReservationExpiredError(ProtocolError):
    """The reservation was swept (row or pending blob gone) before the upload finished."""


class ConcurrentReplaceError(ProtocolError):
    """Another writer changed the document between our upload and our switch."""


class ContentMismatchError(ProtocolError, ValueError):
    """The bytes given differ from the bytes this document's first upload stored, or from the
    length the caller declared; nothing was written."""


class OperationFailedError(ProtocolError):
    """The database or the blob service failed a step; names the document, the cause chained."""


class UploadFailedError(OperationFailedError):
    """A put failed after its reservation (or its reservation's answer was lost): resume with
    `complete(document_id, ...)` or a put with the same `document_id`, or release the name at
    once with `abandon(document_id)`."""


def validate_name(name: str) -> str:
    if not name or not name.strip():
        raise InvalidNameError("document name must not be empty")
    if problem := _text_problem(name, "document name", MAX_NAME_LENGTH):
        raise InvalidNameError(problem)
    return name


def validate_document_id(document_id: str) -> str:
    """`document_id` when the table's `id` column and the identity metadata can hold it."""
    if problem := _text_problem(document_id, "document id", identity.MAX_ID_LENGTH):
        raise InvalidNameError(problem)
    return document_id


def _text_problem(text: str, what: str, longest: int) -> str | None:
    """The identity metadata's rule (length, Unicode text) with no control characters."""
    if len(text) <= longest and any(ord(ch) < 32 for ch in text):
        return f"{what} must not contain control characters"
    return identity.text_problem(text, what, longest)


def validate_extension(extension: str) -> str:
    if not _EXTENSION.fullmatch(extension):
        raise InvalidNameError(
            f"extension {extension!r} must be empty or a dot and 1-16 letters or digits, like '.pdf'"
        )
    return extension.lower()


def new_blob_name(extension: str) -> str:
    """`<uuid hex><ext>`: chosen at reservation, so the row knows the blob before it exists."""
    return f"{new_document_id().replace('-', '')}{validate_extension(extension)}"


def _content_of_any(data: blobs.UploadData, length: int | None, document_id: str) -> Content:
    """The length and hash of all of `data`, a stream read to its end; `length` must match."""
    if isinstance(data, bytes):
        return _content_of(data, length, document_id)
    reader = blobs.HashingReader(data)
    reader.drain()
    if length is not None and length != reader.length:
        raise ContentMismatchError(
            f"document {document_id}: length={length} but the stream holds {reader.length} "
            "bytes; nothing uploaded",
            document_id,
        )
    return Content(reader.length, reader.sha256)


def _content_of(data: bytes, length: int | None, document_id: str) -> Content:
    if length is not None and length != len(data):
        raise ContentMismatchError(
            f"document {document_id}: length={length} but the data holds {len(data)} bytes; "
            "nothing uploaded",
            document_id,
        )
    return Content(len(data), hashlib.sha256(data).hexdigest())


@contextmanager
def _failures_named(document_id: str, action: str, advice: str) -> Iterator[None]:
    """A database or blob-service failure becomes an OperationFailedError naming the document;
    a refusal that did not name it (an invalid extension) is raised again naming it."""
    try:
        yield
    except ProtocolError as error:
        if error.document_id is not None:
            raise
        raise type(error)(f"document {document_id}: {error}", document_id) from None
    except (AzureError, StoreError) as error:
        raise OperationFailedError(
            f"document {document_id}: {action} failed ({type(error).__name__}); {advice}. "
            "Any blob it left behind is recorded for the sweeper",
            document_id,
        ) from error


@dataclass
class UploadProtocol:
    store: DocumentStore
    container: ContainerClient
    clock: Clock = utc_now
    """The writer's clock. No stored time is taken from it: the database server stamps every
    time that decides staleness (created, intent, retired), so writers' clocks may drift."""
    checkpoint: Checkpoint = no_checkpoint
    guards: blobs.TagGuards = field(default_factory=blobs.TagGuards)
    """Whether the blob endpoint evaluates x-ms-if-tags; share one per process."""

    def reserve(self, name: str, extension: str = "", document_id: str | None = None) -> Document:
        """Step 1: a Pending row with its blob name; the name's uniqueness is the DB's to decide."""
        return self._reserve(name, extension, document_id, None)[0]

    def _reserve(
        self, name: str, extension: str, document_id: str | None, content: Content | None
    ) -> tuple[Document, bool]:
        """The reservation, with `content` recorded in the same INSERT; True when this call
        made it (a retry meets the row already there, with its own blob name)."""
        document = Document(
            id=validate_document_id(document_id or new_document_id()),
            name=validate_name(name),
            blob_name=new_blob_name(extension),
            status=Status.PENDING,
            created_utc=self.clock(),
        )
        reserved = self.store.reserve(document, content)
        self.checkpoint("reserve")
        return reserved, reserved.blob_name == document.blob_name

    def _read_back(self) -> bool:
        return not self.guards.enforced(self.container)

    def upload(
        self,
        document: Document,
        data: blobs.UploadData,
        length: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        """Step 2: create-only upload tagged pending; False when the blob already existed.

        The row keeps the length and SHA-256 of the bytes the blob holds: written by the upload
        that created the blob (hashed while it was sent), or, when a retry meets a blob whose
        creator left no record, hashed from the stored bytes (a put of bytes records them in its
        reservation's INSERT instead, one statement fewer). A retry or a second writer whose
        bytes differ from the stored ones raises ContentMismatchError, never an acknowledgement.
        """
        blob = self.container.get_blob_client(document.blob_name)
        if isinstance(data, bytes):
            content = _content_of(data, length, document.id)
            return self._upload_bytes(
                document, data, content, self.store.content(document.id), tags
            )
        reader = blobs.HashingReader(data)
        metadata = self._identity(document, None, length)
        created = blobs.upload_create_only(blob, reader, length, tags, metadata)
        if not created:
            reader.drain()
        elif not reader.exhausted():
            raise ContentMismatchError(
                f"document {document.id}: the stream holds more than length={length} bytes; "
                "the partial blob stays pending and is swept (or call abandon)",
                document.id,
            )
        content = Content(reader.length, reader.sha256)
        if created:
            recorded = self.store.record_content(document.id, content)
        else:
            recorded = self._stored_content(document, blob)
        if recorded != content:
            raise self._mismatch(document, recorded, content)
        self.checkpoint("upload")
        return created

    def _upload_bytes(
        self,
        document: Document,
        data: bytes,
        content: Content,
        recorded: Content | None,
        tags: Mapping[str, str] | None,
    ) -> bool:
        """Step 2 for bytes whose hash is known; `recorded`: what the row already says."""
        if recorded is not None and recorded != content:
            raise self._mismatch(document, recorded, content)
        blob = self.container.get_blob_client(document.blob_name)
        metadata = self._identity(document, content, None)
        created = blobs.upload_create_only(blob, data, len(data), tags, metadata)
        if recorded is None:
            recorded = (
                self.store.record_content(document.id, content)
                if created
                else self._stored_content(document, blob)
            )
        if recorded != content:
            raise self._mismatch(document, recorded, content)
        self.checkpoint("upload")
        return created

    def _identity(
        self,
        document: Document,
        content: Content | None,
        length: int | None,
        replaces: str | None = None,
    ) -> dict[str, str]:
        """The document's identity for the metadata of the blob about to be written, timed by
        the writer's clock (docs/protocol.md, "Identity in blob metadata")."""
        try:
            return identity.encode(
                document.id,
                document.name,
                self.clock(),
                content=content,
                length=length,
                replaces=replaces,
            )
        except identity.IdentityError as error:
            raise InvalidNameError(
                f"document {document.id}: {error}; nothing uploaded", document.id
            ) from None

    def _stored_content(self, document: Document, blob: BlobClient) -> Content:
        """What the row says the blob holds, read back from the blob when nothing says yet."""
        recorded = self.store.content(document.id)
        if recorded is not None:
            return recorded
        return self.store.record_content(document.id, Content(*blobs.stored_content(blob)))

    @staticmethod
    def _mismatch(document: Document, first: Content, retry: Content) -> ContentMismatchError:
        return ContentMismatchError(
            f"document {document.id} holds {first.length} bytes "
            f"(sha256 {first.sha256[:12]}...); this attempt sends {retry.length} bytes "
            f"(sha256 {retry.sha256[:12]}...). Complete it with the original bytes, or abandon "
            "it and put the new ones under a new document id",
            document.id,
        )

    def seal(self, document: Document, written: Mapping[str, str] | None = None) -> None:
        """Step 3: pending -> committed, before the row may say Ready (the order rule).

        `written`: the tags this process's upload wrote besides the state; with them the seal is
        one guarded write, without them (a resumed attempt) the tags are read first.
        """
        try:
            blobs.seal(
                self.container.get_blob_client(document.blob_name), written, self._read_back()
            )
        except blobs.TagTransitionError as error:
            raise ReservationExpiredError(
                f"document {document.id}: cannot seal: {error}", document.id
            ) from None
        self.checkpoint("seal")

    def publish(self, document: Document) -> Document:
        """Step 4: the row turns Ready only if it is still Pending; Ready already is success.

        A reservation that vanished after the seal (swept past the cutoff, abandoned meanwhile)
        leaves a committed blob no row names: it is recorded as retired and tagged so, and the
        sweeper deletes it after the grace period, instead of an orphan nothing removes.
        """
        if not self.store.publish(document.id, blob_name=document.blob_name):
            current = self.store.get(document.id)
            if current is None or current.blob_name != document.blob_name:
                self._retire_orphan(document)
                raise ReservationExpiredError(
                    f"document {document.id} was swept or abandoned before publish; its sealed "
                    f"blob {document.blob_name} is retired for the sweeper. Put the bytes again",
                    document.id,
                )
            if current.status is not Status.READY:
                raise ProtocolError(
                    f"document {document.id} is {current.status}, cannot publish", document.id
                )
        self.checkpoint("publish")
        return replace(document, status=Status.READY)

    def _retire_orphan(self, document: Document) -> None:
        """Record, then tag, a sealed blob whose row is gone; either alone lets it be removed."""
        # Tagged retired even when the record fails: `reconcile --repair` removes such a blob.
        with suppress(StoreError):
            self.store.record_orphan(document.id, document.blob_name)
        self._retire_tag(document.blob_name)

    def complete(
        self,
        document_id: str,
        data: blobs.UploadData,
        length: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Document:
        """Steps 2-4 for a reserved document, resuming after a crash at any point."""
        document = self.store.get(document_id)
        if document is None:
            raise ReservationExpiredError(
                f"document {document_id} has no reservation (swept?)", document_id
            )
        if document.status is Status.READY:
            blob = self.container.get_blob_client(document.blob_name)
            retry = _content_of_any(data, length, document_id)
            recorded = self._stored_content(document, blob)
            if retry != recorded:
                raise self._mismatch(document, recorded, retry)
            return document
        return self._seal_and_publish(document, self.upload(document, data, length, tags), tags)

    def _seal_and_publish(
        self, document: Document, created: bool, tags: Mapping[str, str] | None
    ) -> Document:
        """Steps 3-4; the tags are known exactly when this call's upload created the blob."""
        written = dict(tags or {}) if created else None
        self.seal(document, written)
        return self.publish(document)

    def put(
        self,
        name: str,
        data: blobs.UploadData,
        extension: str = "",
        document_id: str | None = None,
        length: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Document:
        """The whole protocol. A retry with the same `document_id` finishes the first attempt.

        A failure after the reservation raises an error carrying `document_id`, so the caller
        can resume (`complete`) or release the name at once (`abandon`).
        """
        document_id = document_id or new_document_id()
        try:
            content = _content_of(data, length, document_id) if isinstance(data, bytes) else None
            document, fresh = self._reserve(name, extension, document_id, content)
        except StoreError as error:
            # A reservation whose COMMIT answer was lost may exist: the id lets the caller find
            # out, and the same put resumes it (a reservation with a known id is idempotent).
            raise UploadFailedError(
                f"document {document_id} ({name!r}): the reservation's outcome is unknown "
                f"({type(error).__name__}); retry put with document_id={document_id!r}, or "
                "release it with abandon()",
                document_id,
            ) from error
        except ProtocolError as error:
            raise type(error)(f"{error}; no document was reserved") from None
        try:
            if fresh and isinstance(data, bytes) and content is not None:
                created = self._upload_bytes(document, data, content, content, tags)
                return self._seal_and_publish(document, created, tags)
            return self.complete(document.id, data, length, tags)
        except ProtocolError as error:
            if error.document_id is None:
                error.document_id = document.id
            raise
        except (AzureError, StoreError) as error:
            raise UploadFailedError(
                f"document {document.id} ({name!r}) reserved but not published: "
                f"{type(error).__name__}; resume with complete() or release with abandon()",
                document.id,
            ) from error

    def abandon(self, document_id: str) -> bool:
        """Release a reservation now: its pending blob deleted, then its row. True if released.

        A sealed blob is not deleted here: the bytes are complete, so `complete` publishes them.
        """
        document = self.store.get(document_id)
        if document is None:
            return False
        if document.status is not Status.PENDING:
            raise ProtocolError(
                f"document {document_id} is {document.status}; not abandoned", document_id
            )
        blob = self.container.get_blob_client(document.blob_name)
        try:
            blobs.delete_guarded(blob, PENDING)
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
            raise ProtocolError(
                f"document {document_id}: its blob is tagged {blobs.state_of(blob)!r}, not "
                "pending; call complete() to publish it",
                document_id,
            ) from None
        return self.store.abandon(document_id)

    def replace(
        self,
        document_id: str,
        data: blobs.UploadData,
        extension: str = "",
        length: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Document:
        """New bytes under a new name, sealed, row switched; the old blob retired, not deleted.

        The new blob is recorded as an intent before its upload and the switch takes the
        record back in the same transaction that retires the old blob, so a crash or a stall
        at any point leaves a record the sweeper finds. Readers still downloading the old
        bytes keep working until the sweeper deletes the retired blob after its grace period.
        """
        with _failures_named(document_id, "replace", "read it to see which bytes it holds"):
            current = self._ready(document_id)
            known = _content_of(data, length, document_id) if isinstance(data, bytes) else None
            metadata = self._identity(current, known, length, current.blob_name)
            new_blob = self.container.get_blob_client(new_blob_name(extension))
            self.store.record_intent(document_id, new_blob.blob_name)
            self.checkpoint("replace.intent")
            if isinstance(data, bytes):
                content = known if known is not None else _content_of(data, length, document_id)
                created = blobs.upload_create_only(new_blob, data, len(data), tags, metadata)
            else:
                reader = blobs.HashingReader(data)
                created = blobs.upload_create_only(new_blob, reader, length, tags, metadata)
                if not reader.exhausted():
                    raise ContentMismatchError(
                        f"document {document_id}: the stream holds more than length={length} "
                        "bytes; the replace is abandoned and its blob swept",
                        document_id,
                    )
                content = Content(reader.length, reader.sha256)
            self.checkpoint("replace.upload")
            written = dict(tags or {}) if created else None
            try:
                blobs.seal(new_blob, written, self._read_back())
            except blobs.TagTransitionError as error:
                raise ReservationExpiredError(
                    f"document {document_id}: replace abandoned (the sweeper took its new blob): "
                    f"{error}",
                    document_id,
                ) from None
            self.checkpoint("replace.seal")
            outcome = self.store.switch_blob(
                document_id, current.blob_name, new_blob.blob_name, content
            )
            if outcome is SwitchResult.INTENT_LOST:
                # No row can point at the new blob now. If the sweeper cleared the intent before
                # the upload landed, no record names the blob either: retired, reconcile --repair
                # removes it instead of reporting a committed orphan forever.
                self._retire_tag(new_blob.blob_name, written)
                raise ReservationExpiredError(
                    f"document {document_id}: replace stalled past the cutoff and the sweeper "
                    "claimed its new blob; the document still holds its previous bytes",
                    document_id,
                )
            if outcome is SwitchResult.ROW_CHANGED:
                self.store.retire_intent(new_blob.blob_name)
                self._retire_tag(new_blob.blob_name, written)
                raise ConcurrentReplaceError(
                    f"document {document_id} changed during replace; retry", document_id
                )
            self.checkpoint("replace.switch")
            # The old blob most likely carries the tags this replace was given: tried in one
            # guarded write; a 412 (its tags differ) falls back to reading them.
            if self._retire_tag(current.blob_name, dict(tags or {})):
                self.checkpoint("replace.retire")
            return replace(current, blob_name=new_blob.blob_name)

    def delete(self, document_id: str) -> None:
        """Row removed and its blob recorded as retired in one transaction; then tagged retired.

        Idempotent: a retry after a lost answer (or a second delete) finds the row gone and the
        retired record there, finishes the tagging and returns as done. A document with neither
        raises ProtocolError, as it never existed or was swept long ago (docs/protocol.md).
        """
        with _failures_named(document_id, "delete", "retry the delete: it is idempotent"):
            self._delete(document_id)

    def _delete(self, document_id: str) -> None:
        current = self.store.get(document_id)
        if current is None and self._deleted_already(document_id):
            return
        current = self._ready(document_id)
        if not self.store.delete_row(document_id, current.blob_name):
            raise ConcurrentReplaceError(
                f"document {document_id} changed during delete; retry", document_id
            )
        self.checkpoint("delete.row")
        if self._retire_tag(current.blob_name):
            self.checkpoint("delete.retire")

    def _deleted_already(self, document_id: str) -> bool:
        """Whether a retired record names this rowless document; its blobs that no row names
        are tagged retired again (an earlier attempt may have stopped before the tag)."""
        retired = self.store.retired_blobs_of(document_id)
        for blob_name in retired:
            if self.store.document_for_blob(blob_name) is None:
                self._retire_tag(blob_name)
        return bool(retired)

    def retire_recorded(self, blob_name: str) -> bool:
        """Tag a blob the database records as retired (or that no row can name) `retired`,
        best effort: the roll-forward's way to the replace's and delete's own retire step."""
        return self._retire_tag(blob_name)

    def _retire_tag(self, blob_name: str, written: Mapping[str, str] | None = None) -> bool:
        """committed (or, for a document not adopted yet, untagged) -> retired, best effort:
        the sweeper retires it later if this fails. Called only once the database records the
        blob as retired (or no row can name it)."""
        blob = self.container.get_blob_client(blob_name)
        try:
            try:
                return blobs.retire(blob, written, self._read_back())
            except blobs.TagTransitionError:
                return blobs.retire_untagged(blob, self._read_back())
        except (blobs.TagTransitionError, AzureError):
            return False

    def read(self, name: str) -> bytes:
        """Readers see Ready documents only."""
        document = self.store.get_by_name(name)
        if document is None or document.status is not Status.READY:
            raise ProtocolError(f"no ready document named {name!r}")
        return self.container.get_blob_client(document.blob_name).download_blob().readall()

    def _ready(self, document_id: str) -> Document:
        document = self.store.get(document_id)
        if document is None or document.status is not Status.READY:
            raise ProtocolError(f"document {document_id} is not a Ready document", document_id)
        return document
