"""Applying a recovery plan: each row re-read, each copy's bytes checked, each write conditioned.

For one row, in order:
1. The row is read again; a row that changed (another blob, other content) or went away since
   the plan is skipped.
2. The live blob is judged now: holding the row's bytes, it is left alone (only its state tag
   is set to `committed` if it is not); holding other bytes, its ETag is what a restore may
   replace (`If-Match`); missing, a restore may only create it (`If-None-Match: *`). This read
   is left out when the plan's listing found the blob missing and its first copy is the
   soft-deleted base blob with a Content-MD5: Undelete Blob never writes over a live blob, so
   the read after it judges whatever holds the name then (the listed MD5 tells the copy's own
   bytes from a blob written since the plan, which is left alone).
3. The plan's copies are tried in its order, each read and compared (length and SHA-256) with
   the row before it is written anywhere:
   - a soft-deleted base blob cannot be read before Undelete Blob
     (https://learn.microsoft.com/rest/api/storageservices/undelete-blob), which restores it
     where the blob is missing (and never over a live blob: on one it restores only the
     snapshots, https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview);
     it is read right after, and if its bytes differ it is put back as it was (tagged retired
     under its ETag, deleted under that tag: soft delete keeps it again) unless a later copy
     replaces it;
   - a soft-deleted snapshot is made readable by Undelete Blob, then read, then copied over the
     base blob (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-manage);
   - a previous version is read, then copied over the base blob
     (https://learn.microsoft.com/azure/storage/blobs/versioning-overview).
   Copy Blob carries the destination's condition and the tags (`x-ms-tags`: Copy Blob does not
   copy tags, https://learn.microsoft.com/rest/api/storageservices/copy-blob).
4. The restored blob is proven, with its state tag, by one read under `x-ms-if-tags`
   `"state" = 'committed'` (https://learn.microsoft.com/rest/api/storageservices/get-blob):
   after Undelete Blob, Get Blob (its bytes hashed); after a copy, Get Blob Properties (its
   Content-MD5 equal to the copy's MD5 read in step 3, else its bytes read back). A 412 means
   the tag is not `committed`: the bytes are read without the condition and the tag is set
   (from `pending` under `x-ms-if-tags`, https://learn.microsoft.com/rest/api/storageservices/set-blob-tags),
   so the sweeper and lifecycle treat the blob as live.
5. The row is read once more: a replace or delete that won meanwhile leaves the restored blob
   retired, so its record (or reconcile) deletes it under the tag guard.

Every step is judged from what the service and the table hold now, so a run killed anywhere is
finished by running it again.
"""

from __future__ import annotations

import base64
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient, ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.reconcile.listing import RepairRefusedError, check_binding
from blob_safetynet.recover import containers
from blob_safetynet.recover.nets import (
    DELETED,
    SNAPSHOT,
    VERSION,
    BlobNets,
    Digest,
    KeptCopy,
    read_digest,
    read_nets,
)
from blob_safetynet.recover.plan import (
    COPIES_DIFFER,
    EXPIRED,
    MISSING,
    NO_COPY,
    Target,
    check_target,
    judge,
    plan_rows,
)
from blob_safetynet.recover.reads import (
    Fetched,
    fetch,
    make_committed,
    md5_and_committed,
    source_url,
)
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG, tag_condition
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content, Document, Status

RESTORED = "restored"
INTACT = "intact"
SKIPPED = "skipped"
UNRECOVERABLE = "unrecoverable"
FAILED = "failed"
COPY_WAIT_S = 30.0
DEFAULT_WORKERS = 8
"""Rows restored at once: each waits on a few round trips of its own (rows are independent:
one blob name, one row each). Below the SDK's default pool of 10 connections per host, so a
client built without `pooled_transport` serves them all."""


@dataclass(frozen=True)
class Outcome:
    document: str
    blob: str
    status: str
    detail: str
    source: str | None = None
    """`deleted`, `snapshot <time>` or `version <id>`: the copy that gave the bytes back."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "blob": self.blob,
            "status": self.status,
            "detail": self.detail,
            "source": self.source,
        }


@dataclass
class Recovery:
    outcomes: list[Outcome] = field(default_factory=list)
    container_restored: str | None = None
    stopped: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def unresolved(self) -> bool:
        return any(o.status in (UNRECOVERABLE, FAILED) for o in self.outcomes)


class _Changed(Exception):
    """The row or the blob changed while being restored: skipped, judged again next run."""


def _copy_from_entry(entry: Mapping[str, Any]) -> KeptCopy:
    md5 = entry.get("md5")
    return KeptCopy(
        str(entry["kind"]),
        str(entry.get("id") or ""),
        int(entry["length"]),
        base64.b64decode(md5) if isinstance(md5, str) else None,
        entry.get("days_left"),
        bool(entry.get("soft_deleted")),
        None,
    )


def _is_md5(value: object) -> bool:
    """None (the listing showed none), or 16 bytes in base64."""
    if value is None:
        return True
    try:
        return isinstance(value, str) and len(base64.b64decode(value, validate=True)) == 16
    except ValueError:
        return False


def _check_entries(rows: Sequence[Any]) -> None:
    for number, entry in enumerate(rows, start=1):
        if not (
            isinstance(entry, Mapping)
            and all(isinstance(entry.get(k), str) for k in ("document", "blob"))
            and isinstance(entry.get("copies"), list)
            and all(
                isinstance(c, Mapping)
                and c.get("kind") in (DELETED, SNAPSHOT, VERSION)
                and isinstance(c.get("length"), int)
                and _is_md5(c.get("md5"))
                for c in entry["copies"]
            )
        ):
            raise RepairRefusedError(f"plan row {number} is malformed; nothing restored")


def apply_plan(
    store: DocumentStore,
    container: ContainerClient,
    plan: Mapping[str, Any],
    stop_requested: Callable[[], str | None] = lambda: None,
    workers: int = DEFAULT_WORKERS,
) -> Recovery:
    """Restore what `plan` names, `workers` rows at a time. Refused (RepairRefusedError,
    nothing written) when the plan was made against another account, endpoint, container,
    database or table, or the database and container are not bound to each other. A plan that
    restores a container restores it (only while its name is free), then judges and recovers
    the container's rows afresh."""
    check_target(plan, Target.of(store, container))
    rows = plan["rows"]
    _check_entries(rows)
    result = Recovery()
    deleted = plan.get("container_restore")
    if isinstance(deleted, Mapping) and not container.exists():
        bound = store.bound_container()
        if bound not in (None, f"{container.account_name}/{container.container_name}"):
            raise RepairRefusedError(
                f"this database is bound to container {bound!r}; nothing restored"
            )
        found = containers.find_deleted(container)
        if found is None or found.version != deleted.get("version"):
            raise RepairRefusedError(
                "the deleted container the plan names is no longer kept; nothing restored"
            )
        containers.restore(container, found)
        result.container_restored = found.version
    check_binding(store, container)
    if result.container_restored is not None:
        planned = [r.as_dict() for r in plan_rows(store, container) if r.reason is None]
    else:
        planned = [r for r in rows if r.get("reason") is None]

    def one(entry: Mapping[str, Any]) -> Outcome:
        copies = [_copy_from_entry(c) for c in entry["copies"]]
        missing = entry.get("finding") == MISSING and entry.get("live_etag") is None
        return recover_document(store, container, entry["document"], entry["blob"], copies, missing)

    result.outcomes, result.stopped = _each(planned, one, workers, stop_requested)
    return result


def _each(
    entries: Sequence[Mapping[str, Any]],
    work: Callable[[Mapping[str, Any]], Outcome],
    workers: int,
    stop_requested: Callable[[], str | None],
) -> tuple[list[Outcome], str | None]:
    """`work` on each entry, `workers` at a time, outcomes in the entries' order. Asked before
    each row is started, `stop_requested` stops the run between rows: the rows in flight finish
    (each row's restore is judged afresh, so a later run finishes the rest). At most twice
    `workers` rows are started ahead of the oldest unfinished one."""
    outcomes: list[Outcome] = []
    stopped: str | None = None
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="recover") as pool:
        in_flight: deque[Future[Outcome]] = deque()
        for entry in entries:
            stopped = stop_requested()
            if stopped is not None:
                break
            if len(in_flight) >= 2 * max(1, workers):
                outcomes.append(in_flight.popleft().result())
            in_flight.append(pool.submit(work, entry))
        outcomes += [future.result() for future in in_flight]
    return outcomes, stopped


def recover_document(
    store: DocumentStore,
    container: ContainerClient,
    document_id: str,
    blob_name: str,
    copies: Sequence[KeptCopy],
    planned_missing: bool = False,
) -> Outcome:
    """Give one document back from `copies` (tried in order); never raises for one row's
    service errors: they are its outcome. `planned_missing`: the listing the copies came
    from showed no live blob of the name."""
    try:
        return _Restorer(store, container, document_id, blob_name).run(copies, planned_missing)
    except _Changed as changed:
        return Outcome(document_id, blob_name, SKIPPED, str(changed))
    except HttpResponseError as error:
        code = getattr(error, "error_code", None)
        answer = str(getattr(code, "value", code) or error.reason)
        return Outcome(document_id, blob_name, FAILED, f"HTTP {error.status_code} {answer}")
    except (AzureError, blobs.TagTransitionError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return Outcome(document_id, blob_name, FAILED, f"{type(error).__name__}: {first}")


def recover_one(store: DocumentStore, container: ContainerClient, document_id: str) -> Outcome:
    """Judge and recover one document now, without a plan (the verifier's drill, a person's
    single fix): its row, then its blob and the nets' copies of that name read by one listing
    under the blob's name as prefix."""
    found = store.get_with_content(document_id)
    if found is None or found[0].status is not Status.READY:
        return Outcome(document_id, "", SKIPPED, "no Ready row with this id")
    document, content = found
    listed = read_nets(container, prefix=document.blob_name).get(document.blob_name, BlobNets())
    row = judge(container, document, content, listed)
    if row is None:
        return Outcome(
            document_id, document.blob_name, INTACT, "the live blob holds the row's bytes"
        )
    if row.reason is not None:
        return Outcome(document_id, document.blob_name, UNRECOVERABLE, row.reason)
    return recover_document(
        store, container, document.id, document.blob_name, row.copies, row.finding == MISSING
    )


@dataclass
class _Restorer:
    store: DocumentStore
    container: ContainerClient
    document_id: str
    blob_name: str

    def __post_init__(self) -> None:
        self.client = self.container.get_blob_client(self.blob_name)
        self.undeleted_wrong: str | None = None

    def row(self) -> tuple[Document, Content]:
        found = self.store.get_with_content(self.document_id)
        if found is None:
            raise _Changed("the row went away since the plan")
        document, content = found
        if document.status is not Status.READY or document.blob_name != self.blob_name:
            raise _Changed("the row changed since the plan")
        if content is None:
            raise _Changed("the row records no length and SHA-256")
        return document, content

    def live(self, content: Content) -> tuple[str | None, bool]:
        """(ETag, holds the row's bytes) of the live blob; (None, False) when missing."""
        try:
            properties = self.client.get_blob_properties()
        except ResourceNotFoundError:
            return None, False
        if properties.size != content.length:
            return properties.etag, False
        return properties.etag, read_digest(self.client).matches(content)

    def run(self, copies: Sequence[KeptCopy], planned_missing: bool = False) -> Outcome:
        _, content = self.row()
        first = copies[0] if copies else None
        # Read before acting unless the plan's listing found the blob missing and the first
        # step is Undelete Blob of its soft-deleted base: that never writes over a live blob
        # (on one it restores only the snapshots,
        # https://learn.microsoft.com/rest/api/storageservices/undelete-blob), and the read
        # after it judges whatever holds the name then. Its listed Content-MD5 tells, should
        # that read find other bytes, whether they are the copy's own (put back) or a blob
        # written since the plan (left, as a live blob the read before would have found).
        blind = planned_missing and first is not None and first.kind == DELETED
        blind = blind and first is not None and first.md5 is not None
        etag: str | None = None
        if not blind:
            etag, intact = self.live(content)
            if intact:
                make_committed(self.client)
                return self.outcome(INTACT, "the live blob holds the row's bytes; left alone")
        expired = False
        for copy in copies:
            if copy.kind == DELETED and etag is not None:
                continue
            if copy.kind == DELETED or copy.soft_deleted:
                # Undelete Blob restores the soft-deleted base blob where none is live, and
                # every soft-deleted snapshot or version of the name; 404 when nothing is
                # kept any more.
                try:
                    self.client.undelete_blob()
                except ResourceNotFoundError:
                    # Nothing kept and nothing live: the name is known missing now.
                    expired = True
                    blind = False
                    continue
                was, read = etag, fetch(self.client)
                etag = read.etag
                if read.digest is not None and read.digest.matches(content):
                    return self.finish(content, DELETED, None, proven=True, read=read)
                if was is None and etag is not None and read.digest is not None:
                    ours = not blind or (copy.md5 is not None and read.digest.md5 == copy.md5)
                    if ours:
                        self.undeleted_wrong = etag
                blind = False
                if copy.kind == DELETED:
                    expired = expired or etag is None
                    continue
            source = self.readable(copy)
            if source is None:
                expired = True
                continue
            digest = read_digest(source)
            if not digest.matches(content):
                continue
            self.row()
            self.promote(source, etag)
            return self.finish(content, f"{copy.kind} {copy.ident}", digest)
        if self.undeleted_wrong is not None:
            self.put_back(self.undeleted_wrong)
        reason = EXPIRED if expired else (COPIES_DIFFER if copies else NO_COPY)
        return self.outcome(UNRECOVERABLE, reason)

    def readable(self, copy: KeptCopy) -> BlobClient | None:
        """The copy's client, None when the copy is gone (its retention ran out, or something
        purged it)."""
        if copy.kind == SNAPSHOT:
            source = self.container.get_blob_client(self.blob_name, snapshot=copy.ident)
        else:
            source = self.container.get_blob_client(self.blob_name, version_id=copy.ident)
        try:
            source.get_blob_properties()
        except ResourceNotFoundError:
            return None
        return source

    def promote(self, source: BlobClient, etag: str | None) -> None:
        """Copy `source` over the base blob under the ETag judged (or create-only)."""
        try:
            tags = dict(source.get_blob_tags())
        except ResourceNotFoundError:
            tags = {}
        condition: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified}
            if etag is not None
            else {"match_condition": MatchConditions.IfMissing}
        )
        try:
            copy = self.client.start_copy_from_url(
                source_url(source), tags={**tags, STATE_TAG: COMMITTED}, **condition
            )
        except HttpResponseError as error:
            if error.status_code in (409, 412):
                raise _Changed("the blob changed while being restored; run again") from None
            raise
        deadline = time.monotonic() + COPY_WAIT_S
        status = copy.get("copy_status")
        while status == "pending" and time.monotonic() < deadline:
            time.sleep(0.5)
            status = self.client.get_blob_properties().copy.status
        if status != "success":
            raise _Changed(f"the copy ended {status!r}; run again")
        self.undeleted_wrong = None

    def finish(
        self,
        content: Content,
        source: str,
        digest: Digest | None,
        proven: bool = False,
        read: Fetched | None = None,
    ) -> Outcome:
        """Prove the restored bytes (the blob's Content-MD5 equal to the copy's, else read
        back) and its state tag `committed` (set when it is not), then read the row once more.
        After a copy, one Get Blob Properties under `x-ms-if-tags` answers both
        (https://learn.microsoft.com/rest/api/storageservices/get-blob-properties)."""
        committed = read is not None and read.committed
        if digest is not None:
            md5, committed = md5_and_committed(self.client)
            proven = md5 == digest.md5
        if not proven:
            read = fetch(self.client)
            if read.digest is None or not read.digest.matches(content):
                raise _Changed("the restored blob's bytes changed at once; run again")
            committed = read.committed
        if not committed:
            make_committed(self.client)
        try:
            self.row()
        except _Changed as changed:
            blobs.retire(self.client)
            return self.outcome(
                SKIPPED, f"{changed} while restoring; the restored blob was retired"
            )
        return self.outcome(RESTORED, "bytes equal the row's (length and SHA-256)", source)

    def put_back(self, etag: str) -> None:
        """A soft-deleted blob undeleted to be read, whose bytes are not the row's: deleted
        again (soft delete keeps it), retired first so the delete is tag-guarded (I3)."""
        tags = dict(self.client.get_blob_tags())
        self.client.set_blob_tags(
            {**tags, STATE_TAG: RETIRED}, etag=etag, match_condition=MatchConditions.IfNotModified
        )
        self.client.delete_blob(
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
            if_tags_match_condition=tag_condition(RETIRED),
        )

    def outcome(self, status: str, detail: str, source: str | None = None) -> Outcome:
        return Outcome(self.document_id, self.blob_name, status, detail, source)
