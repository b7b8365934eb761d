"""What the recovery double's nets keep and how each request they answer changes it: blob soft
delete, versioning and container soft delete, in memory, as `blob_safetynet.embedded.recovery`
cites them; that module routes the requests here and Azurite answers the rest."""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContentSettings

from blob_safetynet.embedded.proxy import BlobKey, blob_of, tags_in_header
from blob_safetynet.embedded.recovery_answers import (
    answer,
    error,
    http_date,
    list_entry,
    read_answer,
)

DAY = timedelta(days=1)
PURGE_EVERY_S = 60.0


@dataclass
class Kept:
    """One copy a net holds: a soft-deleted base blob, a snapshot, or a previous version."""

    kind: str
    """`deleted` (the base blob, soft-deleted), `snapshot` or `version`."""
    ident: str
    """The snapshot's time or the version's id; '' for a soft-deleted base blob."""
    data: bytes
    tags: dict[str, str]
    metadata: dict[str, str]
    written: datetime
    kept_at: datetime
    etag: str
    deleted: bool
    """Soft-deleted now: listed only with include=deleted, unreadable until undeleted."""

    @property
    def md5(self) -> bytes:
        return hashlib.md5(self.data, usedforsecurity=False).digest()


@dataclass
class DeletedContainer:
    name: str
    version: str
    deleted_at: datetime
    blobs: list[Kept]
    """The live blobs at deletion, as `deleted`-kind copies named by `ident`."""
    copies: dict[str, list[Kept]] = field(default_factory=dict)


class RecoveryNets:
    """What soft delete, versioning and container soft delete keep, and how each answers."""

    def __init__(
        self,
        admin: BlobServiceClient,
        *,
        versioning: bool = False,
        retention_days: int = 7,
        container_retention_days: int = 7,
    ) -> None:
        self.admin = admin
        self.versioning = versioning
        self.retention = retention_days * DAY
        self.container_retention = container_retention_days * DAY
        self.copies: dict[BlobKey, list[Kept]] = {}
        self.deleted_containers: list[DeletedContainer] = []
        self.offset = timedelta()
        self._ids = itertools.count()
        self._lock = threading.RLock()
        self._last_purge: tuple[timedelta, float] | None = None
        self._key_locks: dict[BlobKey, threading.RLock] = {}

    # Time.

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def age(self, days: float) -> None:
        """Let `days` pass: remaining retention shrinks, and what runs out is purged."""
        with self._lock:
            self.offset += days * DAY
            self._purge()

    def _new_ident(self) -> str:
        """A snapshot time or version id in Azure's format, unique within this double."""
        moment = self.now() + timedelta(microseconds=next(self._ids) % 1000)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"

    def days_left(self, kept_at: datetime, retention: timedelta) -> int:
        return math.ceil((kept_at + retention - self.now()) / DAY)

    def _purge(self) -> None:
        """Drop what has run out of retention. Retention counts whole days, so a pass is due
        only when `age` moved the clock or a minute of real time went by: every request
        answered from the nets asks, and a pass reads every kept item."""
        with self._lock:
            due = (self.offset, time.monotonic() // PURGE_EVERY_S)
            if due == self._last_purge:
                return
            self._last_purge = due
            for items in self.copies.values():
                items[:] = [
                    k
                    for k in items
                    if not k.deleted or self.days_left(k.kept_at, self.retention) > 0
                ]
            self.deleted_containers = [
                c
                for c in self.deleted_containers
                if self.days_left(c.deleted_at, self.container_retention) > 0
            ]

    @contextmanager
    def _held(self, key: BlobKey) -> Iterator[None]:
        """One blob's requests to the nets one at a time (what it held, the request, what is
        kept then, as one step); other blobs' go on meanwhile, as on Azure."""
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.RLock())
        with lock:
            self._purge()
            yield

    # Blobs.

    def _read_live(self, key: BlobKey) -> Kept | None:
        blob = self.admin.get_blob_client(*key)
        try:
            properties = blob.get_blob_properties()
            data = blob.download_blob().readall()
            tags = dict(blob.get_blob_tags())
        except ResourceNotFoundError:
            return None
        return Kept(
            "deleted",
            "",
            data,
            tags,
            dict(properties.metadata),
            properties.last_modified,
            self.now(),
            properties.etag,
            deleted=False,
        )

    def _keep_overwritten(self, key: BlobKey, before: Kept) -> None:
        """Put Blob, Put Block List or Copy Blob replaced `before`: soft delete keeps it as a
        soft-deleted snapshot, versioning as a previous version (soft-delete-blob-overview,
        "Blob soft delete protection by operation")."""
        kind, deleted = ("version", False) if self.versioning else ("snapshot", True)
        kept = replace(
            before, kind=kind, ident=self._new_ident(), kept_at=self.now(), deleted=deleted
        )
        self.copies.setdefault(key, []).append(kept)

    def write(self, key: BlobKey, forward: Callable[[], Any]) -> Any:
        """A request that writes the base blob's bytes; the prior state is kept when it lands."""
        with self._held(key):
            before = self._read_live(key)
            answer = forward()
            if 200 <= answer.status < 300:
                with self._lock:
                    if before is not None:
                        self._keep_overwritten(key, before)
                    elif not self.versioning:
                        # Put over a soft-deleted blob keeps its prior state as a snapshot.
                        for kept in self.copies.get(key, []):
                            if kept.kind == "deleted":
                                kept.kind, kept.ident = "snapshot", self._new_ident()
            return answer

    def _kept_source(self, copy_source: str) -> Kept | None:
        parts = urlsplit(copy_source)
        key = blob_of(parts.path)
        query = parse_qs(parts.query)
        ident = (query.get("snapshot") or query.get("versionid") or [""])[0]
        if key is None or not ident:
            return None
        return next((k for k in self.copies.get(key, []) if k.ident == ident), None)

    def copy_kept(self, key: BlobKey, copy_source: str, headers: dict[str, str]) -> Any:
        """Copy Blob whose source is a snapshot or version this double keeps: the destination's
        conditions are judged on the live blob, the copy completes at once, and the tags are
        those of `x-ms-tags` (Copy Blob does not copy tags:
        https://learn.microsoft.com/rest/api/storageservices/copy-blob)."""
        source = self._kept_source(copy_source)
        assert source is not None
        if source.deleted:
            return error(404, "CannotVerifyCopySource")
        live = self.admin.get_blob_client(*key)
        try:
            etag = live.get_blob_properties().etag
        except ResourceNotFoundError:
            etag = None
        if_match = headers.get("If-Match")
        if if_match is not None and (etag is None or if_match.strip('"') != etag.strip('"')):
            return error(412, "ConditionNotMet")
        if headers.get("If-None-Match") == "*" and etag is not None:
            return error(409, "BlobAlreadyExists")
        tags = tags_in_header(headers.get("x-ms-tags", ""))
        written = live.upload_blob(
            source.data, overwrite=True, tags=tags or None, metadata=source.metadata or None
        )
        return answer(
            202,
            [
                ("ETag", str(written["etag"])),
                ("Last-Modified", http_date(written["last_modified"])),
                ("x-ms-copy-id", f"copy-{next(self._ids)}"),
                ("x-ms-copy-status", "success"),
            ],
        )

    def delete(self, key: BlobKey, forward: Callable[[], Any]) -> Any:
        """Delete Blob of the base blob: soft delete keeps it (and soft-deletes its snapshots),
        versioning makes the current version a previous one."""
        with self._held(key):
            before = self._read_live(key)
            answer = forward()
            if before is None or not 200 <= answer.status < 300:
                return answer
            with self._lock:
                items = self.copies.setdefault(key, [])
                if self.versioning:
                    items.append(replace(before, kind="version", ident=self._new_ident()))
                    return answer
                items[:] = [k for k in items if k.kind != "deleted"]
                for kept in items:
                    if not kept.deleted:
                        kept.deleted, kept.kept_at = True, self.now()
                items.append(replace(before, deleted=True))
            return answer

    def undelete(self, key: BlobKey) -> Any:
        """Undelete Blob: the soft-deleted blob (unless a live one holds the name, or versioning
        is on) and every soft-deleted snapshot or version come back."""
        with self._held(key):
            with self._lock:
                items = self.copies.get(key, [])
                base = next((k for k in items if k.kind == "deleted"), None)
            live = self.admin.get_blob_client(*key)
            if base is None and not items and not live.exists():
                return error(404, "BlobNotFound")
            if base is not None and not self.versioning:
                # Create-only: a live blob of the name answers 409 and keeps its bytes, which
                # is the check, without a request to Azurite before it.
                try:
                    live.upload_blob(
                        base.data,
                        overwrite=False,
                        tags=base.tags or None,
                        metadata=base.metadata or None,
                        content_settings=ContentSettings(content_md5=bytearray(base.md5)),
                    )
                except ResourceExistsError:
                    pass
                else:
                    with self._lock:
                        items.remove(base)
            with self._lock:
                for kept in items:
                    if kept.kind != "deleted":
                        kept.deleted = False
            return answer(200)

    def read_kept(
        self, key: BlobKey, ident: str, head: bool, comp: str, headers: dict[str, str]
    ) -> Any:
        """Get Blob, Get Blob Properties or Get Blob Tags of a kept snapshot or version; None
        when this double keeps no such copy (Azurite answers)."""
        with self._lock:
            self._purge()
            kept = next((k for k in self.copies.get(key, []) if k.ident == ident), None)
        if kept is None:
            return None
        if kept.deleted:
            # "Data in a soft-deleted blob or snapshot can't be read until the object has been
            # restored" (soft-delete-blob-overview).
            return error(404, "BlobNotFound")
        if comp == "tags":
            root = ET.Element("Tags")
            tag_set = ET.SubElement(root, "TagSet")
            for name, value in sorted(kept.tags.items()):
                tag = ET.SubElement(tag_set, "Tag")
                ET.SubElement(tag, "Key").text = name
                ET.SubElement(tag, "Value").text = value
            body = ET.tostring(root, encoding="utf-8", xml_declaration=True)
            return answer(200, [("Content-Type", "application/xml")], body)
        return read_answer(kept, head, headers.get("x-ms-range") or headers.get("Range"))

    def list_entries(
        self,
        container: str,
        prefix: str,
        include: set[str],
        after: str = "",
        upto: str | None = None,
    ) -> Iterator[ET.Element]:
        """The kept items List Blobs shows for `include` (deleted, snapshots, versions), of the
        names after `after` up to `upto` (the page's range; None: to the end)."""
        with self._lock:
            self._purge()
            for (owner, name), items in sorted(self.copies.items()):
                if owner != container or not name.startswith(prefix) or name <= after:
                    continue
                if upto is not None and name > upto:
                    continue
                for kept in items:
                    wanted = {"snapshot": "snapshots", "version": "versions", "deleted": "deleted"}
                    if wanted[kept.kind] not in include or (
                        kept.deleted and "deleted" not in include
                    ):
                        continue
                    days = self.days_left(kept.kept_at, self.retention)
                    yield list_entry(name, kept, days, "tags" in include)

    # Containers.

    def delete_container(self, container: str, forward: Callable[[], Any]) -> Any:
        """Delete Container keeps the container, its blobs and what the nets kept of them."""
        with self._lock:
            self._purge()
            client = self.admin.get_container_client(container)
            blobs: list[Kept] = []
            try:
                for item in client.list_blobs(include=["tags", "metadata"]):
                    live = self._read_live((container, item.name))
                    if live is not None:
                        blobs.append(replace(live, ident=item.name))
            except ResourceNotFoundError:
                return forward()
            answer = forward()
            if not 200 <= answer.status < 300:
                return answer
            copies = {
                name: items for (owner, name), items in self.copies.items() if owner == container
            }
            for name in copies:
                del self.copies[(container, name)]
            version = f"{next(self._ids) + 0x1D0000000000000:016X}"
            self.deleted_containers.append(
                DeletedContainer(container, version, self.now(), blobs, copies)
            )
            return answer

    def container_entries(self, prefix: str) -> Iterator[ET.Element]:
        with self._lock:
            self._purge()
            for deleted in self.deleted_containers:
                if not deleted.name.startswith(prefix):
                    continue
                entry = ET.Element("Container")
                ET.SubElement(entry, "Name").text = deleted.name
                ET.SubElement(entry, "Deleted").text = "true"
                ET.SubElement(entry, "Version").text = deleted.version
                properties = ET.SubElement(entry, "Properties")
                left = self.days_left(deleted.deleted_at, self.container_retention)
                for tag, value in (
                    ("Last-Modified", http_date(deleted.deleted_at)),
                    ("Etag", f'"0x{deleted.version}"'),
                    ("DeletedTime", http_date(deleted.deleted_at)),
                    ("RemainingRetentionDays", str(left)),
                ):
                    ET.SubElement(properties, tag).text = value
                yield entry

    def restore_container(self, destination: str, headers: dict[str, str]) -> Any:
        """Restore Container: the deleted container named by `x-ms-deleted-container-name` and
        `-version` comes back with its blobs, unless a live container holds the name."""
        name = headers.get("x-ms-deleted-container-name", "")
        version = headers.get("x-ms-deleted-container-version", "")
        with self._lock:
            self._purge()
            deleted = next(
                (c for c in self.deleted_containers if (c.name, c.version) == (name, version)),
                None,
            )
            if deleted is None:
                return error(404, "ContainerNotFound")
            try:
                client = self.admin.create_container(destination)
            except ResourceExistsError:
                return error(409, "ContainerAlreadyExists")
            for blob in deleted.blobs:
                client.upload_blob(
                    blob.ident,
                    blob.data,
                    tags=blob.tags or None,
                    metadata=blob.metadata or None,
                    content_settings=ContentSettings(content_md5=bytearray(blob.md5)),
                )
            for blob_name, items in deleted.copies.items():
                self.copies[(destination, blob_name)] = items
            self.deleted_containers.remove(deleted)
            return answer(201)
