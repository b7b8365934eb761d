"""What the nets keep of each blob, read with one listing, and the bytes of one copy.

List Blobs with `include=deleted,snapshots,versions,tags` shows, beside each live blob, its
soft-deleted base blob, its snapshots (soft-deleted ones among them) and its previous versions,
each with `Content-Length`, `Content-MD5` when the service has one, and for soft-deleted items
`RemainingRetentionDays` (https://learn.microsoft.com/rest/api/storageservices/list-blobs).
Data of a soft-deleted blob or snapshot cannot be read until Undelete Blob restores it; a
previous version can be read by its `versionid`
(https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview,
https://learn.microsoft.com/azure/storage/blobs/versioning-overview).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from azure.storage.blob import (
    BlobClient,
    BlobProperties,
    ContainerClient,
    StorageStreamDownloader,
)

from blob_safetynet.reconcile.listing import INTERNAL_PREFIX
from blob_safetynet.settings.vocabulary import STATE_TAG
from blob_safetynet.store.tables import Content

DELETED = "deleted"
"""The base blob, soft-deleted: Undelete Blob brings it back as it was when deleted."""
SNAPSHOT = "snapshot"
"""A snapshot (soft delete keeps one of the bytes an overwrite replaced): Undelete Blob makes a
soft-deleted one readable, then it is copied over the base blob."""
VERSION = "version"
"""A previous version (versioning on): readable as it is, copied over the base blob."""
INCLUDE = ["deleted", "snapshots", "versions", "tags"]


@dataclass(frozen=True)
class Digest:
    """Length and hashes of bytes actually read."""

    length: int
    sha256: str
    md5: bytes

    def matches(self, content: Content) -> bool:
        return self.length == content.length and self.sha256 == content.sha256


@dataclass(frozen=True)
class KeptCopy:
    kind: str
    ident: str
    """The snapshot's time or the version's id; '' for a soft-deleted base blob."""
    length: int
    md5: bytes | None
    days_left: int | None
    """RemainingRetentionDays; None where the service keeps the copy without a clock (a
    previous version that was never deleted)."""
    soft_deleted: bool
    when: datetime | None

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "id": self.ident,
            "length": self.length,
            "days_left": self.days_left,
            "soft_deleted": self.soft_deleted,
            "md5": None if self.md5 is None else base64.b64encode(self.md5).decode(),
        }


@dataclass(frozen=True)
class LiveBlob:
    length: int
    etag: str
    md5: bytes | None
    state: str


@dataclass
class BlobNets:
    """One blob name: its live blob (None: missing) and the copies the nets keep of it."""

    live: LiveBlob | None = None
    copies: list[KeptCopy] = field(default_factory=list)

    def preferred(self) -> list[KeptCopy]:
        """The copies in the order recovery tries them.

        A missing blob first tries its soft-deleted base: Undelete Blob is the documented way
        back for a deleted blob and restores it as it was when deleted, in one request. Then
        snapshots, newest first: soft delete keeps one of the bytes each overwrite replaced,
        and the newest holds what the last overwrite destroyed; Microsoft's way back is Undelete
        Blob, then copy the snapshot over the base blob. Then previous versions, newest first:
        with versioning on, a delete or overwrite leaves the prior bytes as a previous version
        and Undelete Blob does not restore the current version, so copying a previous version
        over the base blob is the way back
        (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview,
        https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-manage,
        https://learn.microsoft.com/azure/storage/blobs/versioning-overview).
        """
        order = {DELETED: 0, SNAPSHOT: 1, VERSION: 2}
        usable = [c for c in self.copies if c.kind != DELETED or self.live is None]
        return sorted(usable, key=lambda c: (order[c.kind], _newest_first(c.ident)))


def _newest_first(ident: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in ident)


def _md5(properties: BlobProperties) -> bytes | None:
    value = properties.content_settings.content_md5
    return bytes(value) if value else None


def read_nets(container: ContainerClient, prefix: str | None = None) -> dict[str, BlobNets]:
    """Every protocol blob name with its live blob and kept copies, all in one dict, whatever
    the listing's order (`stream_nets` holds one name at a time). Internal blobs are left out
    unless `prefix` itself names them (the verifier's drill recovers its own probe document
    under `.safetynet/verify/`)."""
    internal = prefix is not None and prefix.startswith(INTERNAL_PREFIX)
    nets: dict[str, BlobNets] = {}
    for item in container.list_blobs(name_starts_with=prefix, include=INCLUDE):
        if item.name.startswith(INTERNAL_PREFIX) and not internal:
            continue
        _add(nets.setdefault(item.name, BlobNets()), item)
    return nets


class ListingOrderError(RuntimeError):
    """The listing gave a name before one it had already given (in code point order): a merge
    with the table in that order would miss rows."""


def stream_nets(
    container: ContainerClient, prefix: str | None = None, page_size: int | None = None
) -> Iterator[tuple[str, BlobNets]]:
    """(name, its live blob and kept copies) per blob name, in the listing's order, one name
    held at a time: List Blobs lists names in order, each with its versions and snapshots
    beside it (https://learn.microsoft.com/rest/api/storageservices/list-blobs, "Blobs are
    listed in alphabetical order"). ListingOrderError when a name comes out of code point
    order. Internal blobs are left out unless `prefix` itself names them (the verifier's drill
    recovers its own probe document under `.safetynet/verify/`)."""
    internal = prefix is not None and prefix.startswith(INTERNAL_PREFIX)
    name: str | None = None
    entry = BlobNets()
    listing = container.list_blobs(
        name_starts_with=prefix, include=INCLUDE, results_per_page=page_size
    )
    for item in listing:
        if item.name.startswith(INTERNAL_PREFIX) and not internal:
            continue
        if item.name != name:
            if name is not None:
                if item.name < name:
                    raise ListingOrderError(f"{item.name!r} was listed after {name!r}")
                yield name, entry
            name, entry = item.name, BlobNets()
        _add(entry, item)
    if name is not None:
        yield name, entry


def _add(entry: BlobNets, item: BlobProperties) -> None:
    if item.snapshot:
        kind, ident = SNAPSHOT, item.snapshot
    elif item.version_id and not item.is_current_version:
        kind, ident = VERSION, item.version_id
    elif item.deleted:
        kind, ident = DELETED, ""
    else:
        state = (item.tags or {}).get(STATE_TAG, "")
        entry.live = LiveBlob(item.size, item.etag, _md5(item), state)
        return
    days = item.remaining_retention_days
    when = item.deleted_time if item.deleted else item.last_modified
    entry.copies.append(
        KeptCopy(kind, ident, item.size, _md5(item), days, bool(item.deleted), when)
    )


def copy_client(container: ContainerClient, name: str, copy: KeptCopy) -> BlobClient:
    """The client that reads `copy` (its snapshot or version), or the base blob's."""
    if copy.kind == SNAPSHOT:
        return container.get_blob_client(name, snapshot=copy.ident)
    if copy.kind == VERSION:
        return container.get_blob_client(name, version_id=copy.ident)
    return container.get_blob_client(name)


def read_digest(blob: BlobClient) -> Digest:
    """Length, SHA-256 and MD5 of the bytes `blob` (a base blob, snapshot or version) holds,
    streamed in chunks."""
    return digest_of(blob.download_blob())


def digest_of(download: StorageStreamDownloader[bytes]) -> Digest:
    """Length, SHA-256 and MD5 of a download, streamed in chunks."""
    sha256 = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False)
    length = 0
    for chunk in download.chunks():
        sha256.update(chunk)
        md5.update(chunk)
        length += len(chunk)
    return Digest(length, sha256.hexdigest(), md5.digest())
