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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice

import sqlalchemy as sa
from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient
from sqlalchemy.engine import Connection

from blob_safetynet.protocol.pooling import pooled_container
from blob_safetynet.settings.redaction import display_db_url
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Status

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


@dataclass(frozen=True)
class Listed:
    name: str
    etag: str
    tags: dict[str, str]

    @property
    def state(self) -> str:
        return self.tags.get(STATE_TAG, "")


@dataclass(frozen=True)
class Work:
    """One row to adopt: its blob is tagged `committed` (unless it is already) and, when the
    row is Pending, the row is then marked Ready."""

    row: Row
    blob: Listed

    @property
    def needs_tag(self) -> bool:
        return self.blob.state != COMMITTED

    @property
    def needs_publish(self) -> bool:
        return self.row.status == Status.PENDING.value


@dataclass
class AdoptPlan:
    rows_blob_exists: int = 0
    rows_blob_missing: int = 0
    blobs_unreferenced: int = 0
    blobs_already_tagged: int = 0
    work: list[Work] = field(default_factory=list)
    cannot_adopt: list[str] = field(default_factory=list)

    @property
    def to_tag(self) -> int:
        return sum(1 for item in self.work if item.needs_tag)

    @property
    def to_mark_ready(self) -> int:
        return sum(1 for item in self.work if item.needs_publish)


@dataclass
class AdoptResult:
    plan: AdoptPlan
    tagged: int = 0
    marked_ready: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [*self.plan.cannot_adopt, *self.failed]


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
        rows = conn.execute(sa.select(c.id, c.name, c.blob_name, c.status))
        return [Row(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


def recorded_blobs(store: DocumentStore) -> set[str]:
    """Blobs a crash-window record names (a replace's intent, a retired blob)."""
    return {record.blob_name for record in store.records()}


def list_blobs(container: ContainerClient) -> Iterator[Listed]:
    for blob in container.list_blobs(include=["tags"]):
        if not blob.name.startswith(INTERNAL_PREFIX):
            yield Listed(blob.name, blob.etag, dict(blob.tags or {}))


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
        elif blob.state != COMMITTED or row.status != Status.READY.value:
            result.work.append(Work(row, blob))
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
    """Tag, then publish, chunk by chunk; `workers` tag writes in flight. Never deletes."""
    result = AdoptResult(adopt_plan)
    container = pooled_container(container, workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="adopt") as pool:
        for chunk in _chunks(adopt_plan.work, CHUNK):
            tagging = [item for item in chunk if item.needs_tag]
            outcomes = dict(
                zip(
                    (item.blob.name for item in tagging),
                    pool.map(lambda item: tag_committed(container, item.blob), tagging),
                    strict=True,
                )
            )
            result.tagged += sum(1 for outcome in outcomes.values() if outcome is None)
            result.failed += [outcome for outcome in outcomes.values() if outcome]
            sealed = [
                item.row.id
                for item in chunk
                if item.needs_publish and outcomes.get(item.blob.name) is None
            ]
            result.marked_ready += mark_ready(store, sealed)
            if progress is not None:
                progress(result)
    return result
