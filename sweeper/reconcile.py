"""Reconciliation: compare the container with the table and repair what crash windows left.

Unlike the sweeper this lists the container, so its cost grows with it: run it rarely
(daily), not on the sweeper's schedule. Blobs younger than the cutoff are never judged,
because an upload or replace may still be finishing them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient

from safetynet.constants import COMMITTED, PENDING, RETIRED, STATE_TAG
from sweeper import blobs
from sweeper.lease import LEASE_BLOB
from sweeper.store import Document, DocumentStore, Status

INTERNAL_PREFIX = LEASE_BLOB.split("/", 1)[0] + "/"


@dataclass(frozen=True)
class ListedBlob:
    name: str
    state: str
    last_modified: datetime
    etag: str


@dataclass
class Reconciliation:
    orphans: list[ListedBlob] = field(default_factory=list)
    """Blobs no row references (I5): left by a crash in replace or delete, or by hand."""
    dangling: list[Document] = field(default_factory=list)
    """Ready rows whose blob is missing (I1 broken)."""
    unsealed: list[Document] = field(default_factory=list)
    """Ready rows whose blob still says pending (I2 broken): the lifecycle rule would eat it."""
    repaired: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.orphans or self.dangling or self.unsealed)


def list_blobs(container: ContainerClient) -> dict[str, ListedBlob]:
    """Every protocol blob with its state tag (internal marker blobs excluded)."""
    listed = {}
    for item in container.list_blobs(include=["tags"]):
        if item.name.startswith(INTERNAL_PREFIX):
            continue
        state = (item.tags or {}).get(STATE_TAG, "")
        listed[item.name] = ListedBlob(item.name, state, item.last_modified, item.etag)
    return listed


def reconcile(
    store: DocumentStore, container: ContainerClient, older_than: datetime, repair: bool = False
) -> Reconciliation:
    """Find (and with `repair`, fix) orphans and broken Ready rows older than `older_than`."""
    result = Reconciliation()
    listed = list_blobs(container)
    rows = {d.blob_name: d for d in store.all()}
    for document in rows.values():
        if document.status is not Status.READY or document.created_utc >= older_than:
            continue
        blob = listed.get(document.blob_name)
        if blob is None:
            result.dangling.append(document)
        elif blob.state == PENDING:
            result.unsealed.append(document)
            if repair:
                _repair(result, blob.name, partial(_seal, container))
    for blob in listed.values():
        if blob.name in rows or blob.last_modified >= older_than:
            continue
        result.orphans.append(blob)
        if repair:
            _repair(result, blob.name, partial(_delete_orphan, container, state=blob.state))
    return result


def _seal(container: ContainerClient, name: str) -> None:
    blobs.seal(container.get_blob_client(name))


def _delete_orphan(container: ContainerClient, name: str, state: str) -> None:
    blob = container.get_blob_client(name)
    if state == COMMITTED:
        blobs.retire(blob)
        state = RETIRED
    if state not in (PENDING, RETIRED):
        raise blobs.TagTransitionError(f"orphan {name!r} has state {state!r}; left for a human")
    blobs.delete_guarded(blob, state)


def _repair(result: Reconciliation, name: str, action: Callable[[str], None]) -> None:
    try:
        action(name)
    except (blobs.TagTransitionError, HttpResponseError) as error:
        result.errors.append(f"{name}: {error}")
    else:
        result.repaired.append(name)
