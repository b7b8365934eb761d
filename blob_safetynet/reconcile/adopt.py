"""Bring an existing table and container under the protocol, without deleting anything.

An application that stored documents before it used the protocol has rows that name blobs with
no `state` tag. Reconcile would report every such blob as an orphan, and nothing would ever
seal it. `plan` reads the table and lists the container once and sorts each row and each blob
into a class. `apply` then tags every untagged blob a row names `committed`, under the
condition that the blob is still the one listed (its ETag), and only then marks the row Ready
(seal before publish, as in the protocol). A blob whose bytes changed since the listing is
refused by the service (412) and reported. Both steps can be repeated: a second run finds the
blobs it tagged already tagged and publishes the rows a crash left Pending. No call here deletes
a blob or a row.

The ETag condition is `x-ms-blob-if-match` on Set Blob Tags
(https://learn.microsoft.com/rest/api/storageservices/set-blob-tags; azure-storage-blob sends
it for `set_blob_tags(etag=..., match_condition=IfNotModified)`). Setting tags does not change a
blob's ETag, so a retry after a crash still matches. Azurite ignores the condition; the tests
put testkit's ETag double in front of it, and every tag write is read back anyway.

Each blob a row names also gets the document's identity in its metadata, as the protocol writes
it with the bytes (`blob_safetynet.protocol.identity`), so rows lost to a database restored to an
earlier time can be rebuilt from the container. It is written after the tag, by Set Blob
Metadata under `If-Match` the same listed ETag
(https://learn.microsoft.com/rest/api/storageservices/set-blob-metadata; Azurite evaluates this
one): bytes changed since the listing get 412 and nothing. Set Blob Metadata replaces all of a
blob's metadata, so the blob's own pairs are written back beside the identity, within the 8 KB
the service allows. It changes the ETag (and, with versioning on, keeps the previous version:
https://learn.microsoft.com/azure/storage/blobs/versions-manage-dotnet), which is why it comes
last. Ready rows whose committed blob lacks the identity (written before the protocol wrote it)
get it too: adopt is the backfill. A blob whose metadata names another document, or claims one
unreadably, is left as it is and reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

import sqlalchemy as sa
from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient
from sqlalchemy.engine import Connection

from blob_safetynet.protocol import identity
from blob_safetynet.protocol.pooling import pooled_container
from blob_safetynet.settings.redaction import display_db_url
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Content, Status

INTERNAL_PREFIX = ".safetynet/"
"""The toolkit's own blobs (binding, heartbeat, verify probes): never a document."""
DEFAULT_WORKERS = 16
MAX_WORKERS = 64
CHUNK = 512
"""Blobs tagged before their rows are published in one statement."""


@dataclass(frozen=True)
class Row:
    id: str
    name: str
    blob_name: str
    status: str
    content: Content | None = None
    """The length and SHA-256 the row records, when it records both."""


@dataclass(frozen=True)
class Listed:
    name: str
    etag: str
    tags: dict[str, str]
    metadata: dict[str, str]
    last_modified: datetime
    size: int

    @property
    def state(self) -> str:
        return self.tags.get(STATE_TAG, "")


@dataclass(frozen=True)
class Work:
    """One row to adopt: its blob is tagged `committed` (unless it is already), given the
    document's identity (`metadata`, the whole metadata to set, None when it has it already)
    and, when the row is Pending, the row is then marked Ready."""

    row: Row
    blob: Listed
    metadata: dict[str, str] | None = None

    @property
    def needs_tag(self) -> bool:
        return self.blob.state != COMMITTED

    @property
    def needs_publish(self) -> bool:
        return self.row.status == Status.PENDING.value

    @property
    def needs_identity(self) -> bool:
        return self.metadata is not None


@dataclass
class AdoptPlan:
    rows_blob_exists: int = 0
    rows_blob_missing: int = 0
    blobs_unreferenced: int = 0
    blobs_already_tagged: int = 0
    work: list[Work] = field(default_factory=list)
    cannot_adopt: list[str] = field(default_factory=list)
    identity_problems: list[str] = field(default_factory=list)
    """Rows adopted (or adoptable) whose blob cannot be given their identity, and why."""

    @property
    def to_tag(self) -> int:
        return sum(1 for item in self.work if item.needs_tag)

    @property
    def to_identify(self) -> int:
        return sum(1 for item in self.work if item.needs_identity)

    @property
    def to_mark_ready(self) -> int:
        return sum(1 for item in self.work if item.needs_publish)


@dataclass
class AdoptResult:
    plan: AdoptPlan
    tagged: int = 0
    identified: int = 0
    marked_ready: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [*self.plan.cannot_adopt, *self.plan.identity_problems, *self.failed]


@contextmanager
def _database(store: DocumentStore) -> Iterator[Connection]:
    """A transaction whose driver errors become StoreError, as the store's own calls do."""
    try:
        with store.engine.begin() as conn:
            yield conn
    except sa.exc.SQLAlchemyError as error:
        where = display_db_url(store.engine.url.render_as_string(hide_password=False))
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise StoreError(f"database {where}: {reason}") from error


def read_rows(store: DocumentStore) -> list[Row]:
    """Every row of the documents table, whatever its status says."""
    c = store.table.c
    with _database(store) as conn:
        rows = conn.execute(
            sa.select(c.id, c.name, c.blob_name, c.status, c.content_length, c.content_sha256)
        )
        return [
            Row(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                str(r[3]),
                None if r[4] is None or r[5] is None else Content(int(r[4]), str(r[5])),
            )
            for r in rows
        ]


def recorded_blobs(store: DocumentStore) -> set[str]:
    """Blobs a crash-window record names (a replace's intent, a retired blob)."""
    return {record.blob_name for record in store.records()}


def list_blobs(container: ContainerClient) -> Iterator[Listed]:
    for blob in container.list_blobs(include=["tags", "metadata"]):
        if not blob.name.startswith(INTERNAL_PREFIX):
            yield Listed(
                blob.name,
                blob.etag,
                dict(blob.tags or {}),
                dict(blob.metadata or {}),
                blob.last_modified,
                blob.size,
            )


def plan(store: DocumentStore, container: ContainerClient) -> AdoptPlan:
    """Sort every row and every blob into its class; nothing is written."""
    blobs = {blob.name: blob for blob in list_blobs(container)}
    named: set[str] = set()
    result = AdoptPlan()
    for row in read_rows(store):
        named.add(row.blob_name)
        blob = blobs.get(row.blob_name)
        if blob is None:
            result.rows_blob_missing += 1
            result.cannot_adopt.append(_describe(row, "its blob is missing"))
            continue
        result.rows_blob_exists += 1
        if blob.state:
            result.blobs_already_tagged += 1
        problem = _problem(row, blob)
        if problem:
            result.cannot_adopt.append(_describe(row, problem))
            continue
        metadata, identity_problem = identity_for(row, blob)
        if identity_problem:
            result.identity_problems.append(_describe(row, identity_problem))
        if blob.state != COMMITTED or row.status != Status.READY.value or metadata is not None:
            result.work.append(Work(row, blob, metadata))
    unreferenced = set(blobs) - named - recorded_blobs(store)
    result.blobs_unreferenced = len(unreferenced)
    result.cannot_adopt += [
        f"blob {name!r}: no row names it (left as it is)" for name in sorted(unreferenced)
    ]
    return result


def _problem(row: Row, blob: Listed) -> str | None:
    """Why this row cannot be adopted, or None."""
    if row.status not in (Status.PENDING.value, Status.READY.value):
        return f"its status is {row.status!r}, not {Status.PENDING.value} or {Status.READY.value}"
    if blob.state == PENDING and row.status == Status.PENDING.value:
        return "an upload in progress (blob tagged pending): the protocol or the sweeper ends it"
    if blob.state == PENDING:
        return "a Ready row on a pending blob: `safetynet reconcile --repair` seals it"
    if blob.state not in ("", COMMITTED):
        return f"its blob is tagged {STATE_TAG}={blob.state!r}"
    return None


def identity_for(row: Row, blob: Listed) -> tuple[dict[str, str] | None, str | None]:
    """(the metadata to set so the blob names the row's document, or None when it does
    already or must not be touched; why its identity is not written, or None).

    The identity holds what the listing and the row say of the bytes: the listed size, the
    row's SHA-256 only when the row records that same length, the blob's Last-Modified as the
    time its bytes were written. The blob's own metadata is kept beside it.
    """
    try:
        found = identity.read_identity(blob.metadata)
    except identity.IdentityError as error:
        return None, f"its metadata claims a document but does not read back ({error}); left as is"
    if found is not None:
        if found.document_id == row.id and found.name_sha256 == _sha256(row.name):
            return None, None
        return None, f"its metadata names document {found.document_id}; left as is"
    content = row.content if row.content is not None and row.content.length == blob.size else None
    own = identity.without_identity(blob.metadata)
    try:
        pairs = identity.encode(
            row.id,
            row.name,
            blob.last_modified,
            content=content,
            length=None if content is not None else blob.size,
            room=identity.METADATA_LIMIT - identity.metadata_size(own),
        )
    except identity.IdentityError as error:
        return None, f"identity not written to its blob: {error}"
    return {**own, **pairs}, None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()


def _describe(row: Row, problem: str) -> str:
    return f"row {row.id} ({row.name!r}, blob {row.blob_name!r}): {problem}"


def tag_committed(container: ContainerClient, blob: Listed) -> str | None:
    """Tag the blob committed while its ETag is the listed one; None, or why not."""
    client = container.get_blob_client(blob.name)
    try:
        client.set_blob_tags(
            {**blob.tags, STATE_TAG: COMMITTED},
            etag=blob.etag,
            match_condition=MatchConditions.IfNotModified,
        )
        written = client.get_blob_tags().get(STATE_TAG)
    except ResourceNotFoundError:
        return f"blob {blob.name!r} was deleted after the listing"
    except HttpResponseError as error:
        if error.status_code == 412:
            return f"blob {blob.name!r} changed after the listing (ETag); run adopt again"
        return f"blob {blob.name!r}: {type(error).__name__} {error.status_code}"
    except AzureError as error:
        return f"blob {blob.name!r}: {type(error).__name__}"
    if written != COMMITTED:
        return f"blob {blob.name!r} reads {STATE_TAG}={written!r} after the tag write"
    return None


def write_identity(
    container: ContainerClient, blob: Listed, metadata: Mapping[str, str]
) -> str | None:
    """Set the blob's metadata (its own pairs and the identity) while its ETag is the listed
    one; None, or why not (412: its bytes or metadata changed since the listing)."""
    client = container.get_blob_client(blob.name)
    try:
        client.set_blob_metadata(
            dict(metadata), etag=blob.etag, match_condition=MatchConditions.IfNotModified
        )
    except ResourceNotFoundError:
        return f"blob {blob.name!r} was deleted after the listing; identity not written"
    except HttpResponseError as error:
        if error.status_code == 412:
            return (
                f"blob {blob.name!r} changed after the listing (ETag); identity not written: "
                "run adopt again"
            )
        return (
            f"blob {blob.name!r}: identity not written: {type(error).__name__} {error.status_code}"
        )
    except AzureError as error:
        return f"blob {blob.name!r}: identity not written: {type(error).__name__}"
    return None


@dataclass(frozen=True)
class Outcome:
    """What adopting one blob did: the tag write's and the identity write's refusal, if any."""

    tag_problem: str | None = None
    identity_problem: str | None = None
    identified: bool = False


def adopt_blob(container: ContainerClient, item: Work) -> Outcome:
    """The tag (unless committed already), then the identity (unless the tag was refused),
    both under the listed ETag; the row is the caller's to publish."""
    tag_problem = tag_committed(container, item.blob) if item.needs_tag else None
    if item.metadata is None or tag_problem is not None:
        return Outcome(tag_problem)
    identity_problem = write_identity(container, item.blob, item.metadata)
    return Outcome(None, identity_problem, identity_problem is None)


def mark_ready(store: DocumentStore, ids: Sequence[str]) -> int:
    """Pending -> Ready for these rows (their blobs are committed); rows changed."""
    if not ids:
        return 0
    c = store.table.c
    statement = (
        store.table.update()
        .where(c.id.in_(list(ids)), c.status == Status.PENDING.value)
        .values(status=Status.READY.value, claim_token=None, claimed=None)
    )
    with _database(store) as conn:
        return int(conn.execute(statement).rowcount)


def _chunks(items: Sequence[Work], size: int) -> Iterable[list[Work]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


Progress = Callable[[AdoptResult], None]


def apply(
    store: DocumentStore,
    container: ContainerClient,
    adopt_plan: AdoptPlan,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
) -> AdoptResult:
    """Tag and identify, then publish, chunk by chunk; `workers` blobs in flight. Never
    deletes."""
    result = AdoptResult(adopt_plan)
    container = pooled_container(container, workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="adopt") as pool:
        for chunk in _chunks(adopt_plan.work, CHUNK):
            writing = [item for item in chunk if item.needs_tag or item.needs_identity]
            outcomes = dict(
                zip(
                    (item.blob.name for item in writing),
                    pool.map(lambda item: adopt_blob(container, item), writing),
                    strict=True,
                )
            )
            for item in writing:
                outcome = outcomes[item.blob.name]
                result.tagged += int(item.needs_tag and outcome.tag_problem is None)
                result.identified += int(outcome.identified)
                result.failed += [p for p in (outcome.tag_problem, outcome.identity_problem) if p]
            sealed = [
                item.row.id
                for item in chunk
                if item.needs_publish
                and outcomes.get(item.blob.name, Outcome()).tag_problem is None
            ]
            result.marked_ready += mark_ready(store, sealed)
            if progress is not None:
                progress(result)
    return result
