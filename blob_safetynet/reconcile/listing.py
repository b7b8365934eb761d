"""Reconciliation: an audit of the container against the table, with guarded, bounded repair.

Unlike the sweeper this lists the container, so its cost grows with it: run it rarely (daily),
not on the sweeper's schedule. Blobs younger than the cutoff are never judged.

The table it is handed may be the wrong one (a typo in `--db`, staging against production, a
point-in-time restore), so reconcile never deletes a committed blob on its own: committed
orphans are reported, and deleting them takes a written plan applied with a maximum count, in
a container bound to this database, when the orphans are a small share of the container.
Every blob is re-checked against the table just before anything is done to it.

A committed blob no row names whose metadata names a document (the identity the protocol writes
with the bytes, `blob_safetynet.protocol.identity`) is not an orphan but a document whose row
is missing, most often after the database was restored to an earlier time: it is reported apart
(`identified`) and kept out of any plan unless asked for by name, with the advice to roll the
table forward first (`safetynet recover --after-restore`). A blob without that metadata is
"identity unknown" and judged as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import BlobClient, BlobProperties, ContainerClient

from blob_safetynet.protocol import blobs, identity
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG, tag_condition
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.lease import LEASE_BLOB

INTERNAL_PREFIX = LEASE_BLOB.split("/", 1)[0] + "/"
MAX_ORPHAN_SHARE = 0.05
"""A plan deleting more than this share of the container's committed blobs is refused by
default: so many unreferenced blobs often mean the table is not this container's."""
SHARE_FLOOR = 20
"""The default share never refuses a plan of this many blobs or fewer (5 % of a small container
is no blob at all); `--max-delete N` still bounds it, and an explicit `--max-share` has no floor."""
PLAN_VERSION = 1
RECHECK_ATTEMPTS = 3
"""Reads of a row and its blob before a finding that keeps changing is let go as in use."""
ROLL_FORWARD = "safetynet recover --after-restore"


class RepairRefusedError(RuntimeError):
    """The repair would be unsafe (wrong or unbound database, too many, a changed plan)."""


@dataclass(frozen=True)
class ListedBlob:
    name: str
    state: str
    last_modified: datetime
    etag: str
    identity: identity.Identity | None = None
    """The document its metadata names, read strictly; None when it names none or cannot be
    read (then `identity_problem` says why)."""
    identity_problem: str | None = None
    content_md5: bytes | None = None
    """The service's MD5 of the bytes (Put Blob stores one; a staged upload none)."""

    @property
    def identified(self) -> bool:
        """Whether its metadata claims a document, readable or not."""
        return self.identity is not None or self.identity_problem is not None

    @property
    def document_id(self) -> str | None:
        return None if self.identity is None else self.identity.document_id


def listed_blob(
    name: str, tags: Mapping[str, str] | None, properties: BlobProperties, etag: str
) -> ListedBlob:
    """A listing's (or a live read's) blob with its state tag and the identity its metadata
    claims."""
    claimed: identity.Identity | None = None
    problem = None
    try:
        claimed = identity.read_identity(properties.metadata)
    except identity.IdentityError as error:
        problem = str(error)
    md5 = properties.content_settings.content_md5 if properties.content_settings else None
    return ListedBlob(
        name,
        (tags or {}).get(STATE_TAG, ""),
        properties.last_modified,
        etag,
        claimed,
        problem,
        bytes(md5) if md5 else None,
    )


@dataclass
class Reconciliation:
    orphans: list[ListedBlob] = field(default_factory=list)
    """Blobs neither a row nor a crash-window record names (I5), but for `identified`."""
    identified: list[ListedBlob] = field(default_factory=list)
    """Committed blobs no row nor record names whose metadata names a document: rows lost (a
    database restored to an earlier time?). Never planned for deletion unless asked for."""
    dangling: list[Document] = field(default_factory=list)
    """Ready rows whose blob is missing (I1 broken)."""
    unsealed: list[Document] = field(default_factory=list)
    """Ready rows whose blob says pending (I2 broken: the lifecycle rule would eat it) or
    retired (a row restored after its document was deleted or replaced: the sweeper and
    reconcile treat such a blob as garbage)."""
    repaired: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    blob_count: int = 0
    stopped: str | None = None
    """The signal that stopped an applied plan between two blobs (`SIGINT`), else None."""

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.identified or self.dangling or self.unsealed)

    @property
    def committed_orphans(self) -> list[ListedBlob]:
        return [b for b in self.orphans if b.state == COMMITTED]

    @property
    def unresolved(self) -> bool:
        """Whether anything is left for a person: findings not repaired, or errors."""
        names = [b.name for b in self.orphans] + [d.blob_name for d in self.unsealed]
        left = set(names) - set(self.repaired)
        return bool(left or self.identified or self.dangling or self.errors)


def list_blobs(container: ContainerClient) -> dict[str, ListedBlob]:
    """Every protocol blob with its state tag and identity (internal marker blobs excluded)."""
    listed = {}
    for item in container.list_blobs(include=["tags", "metadata"]):
        if item.name.startswith(INTERNAL_PREFIX):
            continue
        listed[item.name] = listed_blob(item.name, item.tags, item, item.etag)
    return listed


def check_binding(store: DocumentStore, container: ContainerClient) -> str:
    """The database id, when the container's marker names this database and the database
    names no other container; else RepairRefusedError (`blob_safetynet.sweeper.binding` decides, as for the
    sweep)."""
    state = binding.read_binding(store, container)
    try:
        binding.refuse_mismatch(state)
    except binding.ContainerBindingError as error:
        raise RepairRefusedError(f"{error}; nothing repaired") from None
    if state.container_names is None:
        raise RepairRefusedError(
            f"container {container.container_name!r} is not bound to a database yet; if this "
            f"database is its own, bind them with `{binding.BIND_COMMAND} --db URL --container "
            f"{container.container_name}`, then repair"
        )
    return state.database_id


def reconcile(
    store: DocumentStore, container: ContainerClient, older_than: datetime, repair: bool = False
) -> Reconciliation:
    """Find findings older than `older_than`; with `repair`, fix the ones that are safe to fix.

    Repair seals the pending (or retired) blob of a Ready row and deletes pending or retired orphans under
    their tag guard, each only after re-reading the table for that blob. Committed and untagged
    orphans are only reported (see `plan_orphan_deletion`). A container bound to another
    database refuses repair (RepairRefusedError) before anything is done.
    """
    if repair:
        check_binding(store, container)
    result = Reconciliation()
    listed = list_blobs(container)
    result.blob_count = len(listed)
    rows = {d.blob_name: d for d in store.all()}
    recorded = {r.blob_name for r in store.records()}
    judge = Judge(store, container, older_than, repair, result)
    for document in rows.values():
        judge.row(document, listed.get(document.blob_name))
    for blob in listed.values():
        judge.blob(blob, referenced=blob.name in rows or blob.name in recorded)
    return result


def _recheck(
    store: DocumentStore, container: ContainerClient, document: Document
) -> tuple[Document, str | None] | None:
    """The Ready row and its blob's state now (None: missing) when the finding still holds.

    The listing is older than the rows: a replace that switched in between points its row at
    a blob the listing missed or saw still pending. Both are read again, row first, so a
    finding is reported only when the row, read after its blob's state, still shows it.
    """
    current = store.get(document.id)
    for _ in range(RECHECK_ATTEMPTS):
        if current is None or current.status is not Status.READY:
            return None
        state = blobs.state_of(container.get_blob_client(current.blob_name))
        again = store.get(document.id)
        if again == current:
            return (current, state) if state in (None, PENDING, RETIRED) else None
        current = again
    return None  # replaced again and again while read: in use, not broken


def row_judged(document: Document, older_than: datetime) -> bool:
    """Whether the row is one a finding can be about: Ready and older than the cutoff."""
    return document.status is Status.READY and document.created_utc < older_than


def row_suspect(document: Document, blob: ListedBlob | None, older_than: datetime) -> bool:
    """Whether this row and its blob (None: missing) make a finding: dangling or unsealed."""
    return row_judged(document, older_than) and (blob is None or blob.state in (PENDING, RETIRED))


def blob_suspect(blob: ListedBlob, referenced: bool, older_than: datetime) -> bool:
    """Whether this blob is an orphan: named by no row nor record, and older than the cutoff."""
    return not referenced and blob.last_modified < older_than


@dataclass
class Judge:
    """Files each row and blob under its finding, repairing what `repair` allows (one rule for
    the listing and the inventory paths)."""

    store: DocumentStore
    container: ContainerClient
    older_than: datetime
    repair: bool
    result: Reconciliation

    def row(self, document: Document, blob: ListedBlob | None) -> None:
        if row_suspect(document, blob, self.older_than):
            self.confirm(document)

    def confirm(self, document: Document) -> None:
        """Judges a suspect row on the row and its blob's state read now (`_recheck`)."""
        finding = _recheck(self.store, self.container, document)
        if finding is None:
            return
        current, state = finding
        if state is None:
            self.result.dangling.append(current)
            return
        self.result.unsealed.append(current)
        if self.repair:
            _seal_unsealed(self.store, self.container, current, state, self.result)

    def blob(self, blob: ListedBlob, referenced: bool) -> None:
        if not blob_suspect(blob, referenced, self.older_than):
            return
        if blob.state == COMMITTED and blob.identified:
            self.result.identified.append(blob)
            return
        self.result.orphans.append(blob)
        if self.repair and blob.state in (PENDING, RETIRED):
            _delete_unreferenced(self.store, self.container, blob, blob.state, self.result)


def _seal_unsealed(
    store: DocumentStore,
    container: ContainerClient,
    document: Document,
    state: str,
    result: Reconciliation,
) -> None:
    current = store.get(document.id)
    if (
        current is None
        or current.blob_name != document.blob_name
        or current.status is not Status.READY
    ):
        result.errors.append(f"{document.blob_name}: row changed since listing; not sealed")
        return
    try:
        blobs.transition(container.get_blob_client(document.blob_name), state, COMMITTED)
    except (blobs.TagTransitionError, AzureError) as error:
        result.errors.append(f"{document.blob_name}: {error}")
    else:
        if state == RETIRED:
            # Its record would keep every sweep reporting the live blob it may not delete.
            store.drop_retired_record(document.blob_name)
        result.repaired.append(document.blob_name)


def _delete_unreferenced(
    store: DocumentStore,
    container: ContainerClient,
    blob: ListedBlob,
    state: str,
    result: Reconciliation,
    etag: str | None = None,
) -> None:
    """Delete one orphan under its tag guard, after reading the table for it once more."""
    if store.is_referenced(blob.name):
        result.errors.append(f"{blob.name}: referenced since listing; left alone")
        return
    client = container.get_blob_client(blob.name)
    try:
        if etag is not None and client.get_blob_properties().etag.strip('"') != etag.strip('"'):
            result.errors.append(f"{blob.name}: its bytes changed since the plan; left alone")
            return
        if state == COMMITTED:
            blobs.retire(client)
            state = RETIRED
        if etag is not None:
            _delete_planned(client, etag, state)
        else:
            blobs.delete_guarded(client, state)
    except (blobs.TagTransitionError, HttpResponseError, AzureError) as error:
        result.errors.append(f"{blob.name}: {type(error).__name__}: {error}".splitlines()[0])
    else:
        result.repaired.append(blob.name)


def _delete_planned(client: BlobClient, etag: str, state: str) -> None:
    """Delete under the plan's ETag and the tag guard; a refusal of a blob that is gone now
    means the delete is done.

    The blob was read a moment ago, so when the delete's answer was lost and the SDK sent it
    again, the second attempt finds no blob: Azurite answers 412 (the If-Match of a missing
    blob fails), a 404 says the same. Either way the blob is gone, as planned; a refusal of a
    blob that still exists (its ETag or tags changed) is raised.
    """
    try:
        # Set Blob Tags leaves the ETag alone, so the plan's ETag still guards the delete.
        client.delete_blob(
            delete_snapshots="include",
            etag=f'"{etag.strip(chr(34))}"',
            match_condition=MatchConditions.IfNotModified,
            if_tags_match_condition=tag_condition(state),
        )
    except HttpResponseError as error:
        if error.status_code not in (404, 412) or blobs.state_of(client) is not None:
            raise


def plan_orphan_deletion(
    store: DocumentStore,
    container: ContainerClient,
    result: Reconciliation,
    include_identified: bool = False,
) -> dict[str, Any]:
    """A printable, reviewable plan to delete the committed orphans `result` found.

    Blobs whose metadata names a document are left out unless `include_identified`; then each
    entry carries the identity it was planned with (`apply_plan` refuses such a blob in an
    entry without one).
    """
    entries = [_entry(b) for b in result.committed_orphans]
    if include_identified:
        entries += [{**_entry(b), "identity": _identity_entry(b)} for b in result.identified]
    return {
        "version": PLAN_VERSION,
        "container": container.container_name,
        "database_id": store.database_id(),
        "blob_count": result.blob_count,
        "delete": entries,
    }


def _entry(blob: ListedBlob) -> dict[str, Any]:
    return {"blob": blob.name, "etag": blob.etag, "last_modified": blob.last_modified.isoformat()}


def _identity_entry(blob: ListedBlob) -> dict[str, str | None]:
    claimed = blob.identity
    return {
        "document": None if claimed is None else claimed.document_id,
        "name": None if claimed is None or claimed.name_cut else claimed.name,
        "problem": blob.identity_problem,
    }


def identified_advice(blob: ListedBlob) -> str:
    """What a person is told about a committed blob whose metadata names a document no row has."""
    claimed = blob.identity
    what = (
        f"names document {claimed.document_id}"
        if claimed is not None
        else f"claims a document but cannot be read ({blob.identity_problem})"
    )
    return (
        f"committed blob {blob.name}: no row names it and its metadata {what}; if the database "
        f"was restored to an earlier time, run `{ROLL_FORWARD}` before deleting anything"
    )


def _check_share(deleting: int, total: int, max_share: float | None) -> None:
    """Refuse a plan deleting too large a share of the container, saying what to check."""
    share = MAX_ORPHAN_SHARE if max_share is None else max_share
    allowed = share * max(total, 1)
    if max_share is None:
        allowed = max(allowed, SHARE_FLOOR)
    if deleting <= allowed:
        return
    limit = (
        f"--max-share {share:g}"
        if max_share is not None
        else f"the default share {share:.0%} (or {SHARE_FLOOR} blobs)"
    )
    needed = min(math.ceil(deleting / max(total, 1) * 100) / 100, 1.0)
    raise RepairRefusedError(
        f"the plan deletes {deleting} of the container's {total} blobs "
        f"({deleting / max(total, 1):.0%}), more than {limit}; nothing deleted. So many "
        "committed blobs that no row references may mean --db or --table names another "
        "deployment's table: check them; if the plan is right, pass "
        f"--max-share {needed:.2f}"
    )


def apply_plan(
    store: DocumentStore,
    container: ContainerClient,
    plan: Mapping[str, Any],
    max_delete: int,
    max_share: float | None = None,
    stop_requested: Callable[[], str | None] = lambda: None,
) -> Reconciliation:
    """Delete the plan's committed orphans, each re-checked; refuse the whole plan when unsafe.

    Refused (RepairRefusedError, nothing deleted) when the plan is for another container or
    database, the container is not bound to this database, the plan holds more than
    `max_delete` blobs, or they are more than `max_share` of the container's blobs (None: the
    default share, MAX_ORPHAN_SHARE but at least SHARE_FLOOR blobs).
    `stop_requested` is asked before each blob: a signal stops the plan between two blobs.
    """
    entries: Sequence[Mapping[str, str]] = plan.get("delete", [])
    if plan.get("version") != PLAN_VERSION or not isinstance(entries, list):
        raise RepairRefusedError("not a reconcile plan (version or `delete` list missing)")
    for number, entry in enumerate(entries, start=1):
        # A hand-edited entry would otherwise fail half-way, after earlier deletions.
        if not (
            isinstance(entry, Mapping)
            and isinstance(entry.get("blob"), str)
            and isinstance(entry.get("etag"), str)
        ):
            raise RepairRefusedError(
                f"plan entry {number} lacks a blob name or ETag; nothing deleted"
            )
    if plan.get("container") != container.container_name:
        raise RepairRefusedError(
            f"the plan is for container {plan.get('container')!r}, not {container.container_name!r}"
        )
    database_id = check_binding(store, container)
    if plan.get("database_id") != database_id:
        raise RepairRefusedError("the plan was made against another database; nothing deleted")
    if len(entries) > max_delete:
        raise RepairRefusedError(
            f"the plan deletes {len(entries)} blobs, more than --max-delete {max_delete}"
        )
    listed = list_blobs(container)
    # What an interrupted run deleted is gone from both sides: a rerun is judged on the rest.
    remaining = [entry for entry in entries if entry["blob"] in listed]
    _check_share(len(remaining), len(listed), max_share)
    result = Reconciliation(blob_count=len(listed))
    for entry in remaining:
        result.stopped = stop_requested()
        if result.stopped is not None:
            break
        blob = listed[entry["blob"]]
        if blob.state not in (COMMITTED, RETIRED):
            result.errors.append(f"{blob.name}: now tagged {blob.state!r}; left alone")
            continue
        if blob.identified and "identity" not in entry:
            result.errors.append(
                f"{identified_advice(blob)}; the plan did not name it as a document's "
                "(--include-identified); left alone"
            )
            continue
        # RETIRED: a run killed between the retire and the delete; the plan's ETag still guards.
        _delete_unreferenced(store, container, blob, blob.state, result, etag=entry["etag"])
    return result
