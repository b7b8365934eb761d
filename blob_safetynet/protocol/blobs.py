"""Blob calls with their conditions spelled out: create-only uploads and tag-guarded changes.

Every write here carries an explicit condition. The Python SDK drops its implicit
If-None-Match `*` as soon as any other condition is passed (DESIGN.md section 4), so the
create-only condition is never left to the `overwrite=False` default.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Mapping
from typing import IO, Any, cast
from urllib.parse import urlsplit

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobType, ContainerClient

from blob_safetynet.settings.endpoints import is_loopback_host
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG, tag_condition

EXISTS_STATUSES = frozenset({409, 412})
"""Azurite answers 409 BlobAlreadyExists to a failed create-only write; the REST docs say 412."""
BINDING_BLOB = ".safetynet/binding"
"""Names the database a container belongs to (metadata `database_id`); written once."""
TAG_WRITE_ATTEMPTS = 3
HASH_CHUNK = 4 * 1024 * 1024

UploadData = bytes | IO[bytes]
log = logging.getLogger("safetynet.sweeper")


class HashingReader:
    """Passes a stream through while counting and hashing what the upload actually read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._hash = hashlib.sha256()
        self.length = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._stream.read(size)
        self._hash.update(chunk)
        self.length += len(chunk)
        return chunk

    def exhausted(self) -> bool:
        """Whether the stream has nothing left after what the upload read."""
        return self._stream.read(1) == b""

    def drain(self) -> None:
        """Read and hash the rest: what the whole stream holds, not only what was sent."""
        while self.read(HASH_CHUNK):
            pass

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def upload_create_only(
    blob: BlobClient,
    data: UploadData | HashingReader,
    length: int | None = None,
    tags: Mapping[str, str] | None = None,
    metadata: Mapping[str, str] | None = None,
    **transfer: Any,
) -> bool:
    """Upload tagged `state=pending` (plus `tags`) unless the name exists; True when created.

    `metadata` (the document's identity, `blob_safetynet.protocol.identity`) travels in the
    same Put Blob, or the Put Block List of a staged upload: no request of its own.
    `transfer` passes SDK transfer options (`max_concurrency`, `max_single_put_size` on the
    client, ...). Streams are read in blocks, never buffered whole.
    """
    try:
        blob.upload_blob(
            cast(IO[bytes], data) if isinstance(data, HashingReader) else data,
            length=length,
            blob_type=BlobType.BLOCKBLOB,
            overwrite=False,
            metadata=dict(metadata) if metadata else None,
            tags={**(tags or {}), STATE_TAG: PENDING},
            match_condition=MatchConditions.IfMissing,
            **transfer,
        )
    except HttpResponseError as error:
        if error.status_code in EXISTS_STATUSES:
            return False
        raise
    return True


def stored_content(blob: BlobClient) -> tuple[int, str]:
    """(length, SHA-256 hex) of the bytes the service holds, read back in chunks.

    Only a retry that met an existing blob (409) whose first upload left no record pays for this
    read: Put Block List stores no Content-MD5 unless the client sent one, so the service's own
    hash cannot stand in for ours
    (https://learn.microsoft.com/en-us/rest/api/storageservices/put-block-list).
    """
    digest = hashlib.sha256()
    length = 0
    for chunk in blob.download_blob().chunks():
        digest.update(chunk)
        length += len(chunk)
    return length, digest.hexdigest()


def state_of(blob: BlobClient) -> str | None:
    """The blob's state tag, '' when untagged, None when the blob does not exist."""
    try:
        return blob.get_blob_tags().get(STATE_TAG, "")
    except ResourceNotFoundError:
        return None


class TagTransitionError(RuntimeError):
    """A guarded tag change found the blob missing or in an unexpected state."""


def tags_condition(tags: Mapping[str, str]) -> str:
    """`x-ms-if-tags` holding only while every tag still has the value read.

    Tag keys and values cannot contain quotes (letters, digits, space and `+-./:=_` only:
    https://learn.microsoft.com/dotnet/api/azure.storage.blobs.specialized.blobbaseclient.settags,
    and the Set Blob Tags REST page), so none are escaped.
    """
    return " AND ".join(f"\"{key}\" = '{value}'" for key, value in sorted(tags.items()))


def transition(
    blob: BlobClient,
    expected: str,
    target: str,
    written: Mapping[str, str] | None = None,
    read_back: bool | None = None,
) -> None:
    """Set the state tag to `target` only while it is `expected`; already `target` is success.

    With `written` (the tags a caller knows the blob holds besides the state), one write under
    a condition on all of them decides: Azure refuses it with 412 unless every tag still has
    that value. Without it, or after a 412, the tags are read and written back with the new
    state under a condition on all of them, so a concurrent change of any tag fails the write
    and the read is repeated. `read_back` (default: on an emulator-looking endpoint) is the
    workaround for a service that ignores the condition: the state is read before and after.
    """
    if read_back is None:
        read_back = looks_like_emulator(blob)
    if (
        written is not None
        and not read_back
        and _guarded_write(blob, {**written, STATE_TAG: expected}, target)
    ):
        return
    for _ in range(TAG_WRITE_ATTEMPTS):
        try:
            tags = blob.get_blob_tags()
        except ResourceNotFoundError:
            raise TagTransitionError(f"blob {blob.blob_name!r} does not exist") from None
        current = tags.get(STATE_TAG, "")
        if current == target:
            return
        if current != expected:
            raise TagTransitionError(
                f"blob {blob.blob_name!r} is tagged {STATE_TAG}={current!r}, expected {expected!r}"
            )
        if not _guarded_write(blob, tags, target):
            continue
        if not read_back:
            return
        state = state_of(blob)
        if state == target:
            return
        raise TagTransitionError(
            f"blob {blob.blob_name!r} is tagged {STATE_TAG}={state!r}, expected {expected!r}"
        )
    raise TagTransitionError(
        f"blob {blob.blob_name!r}: its tags kept changing; {STATE_TAG} not set to {target!r}"
    )


def _guarded_write(blob: BlobClient, tags: Mapping[str, str], target: str) -> bool:
    """`tags` with the state set to `target`, only while all of `tags` hold; False on 412."""
    try:
        blob.set_blob_tags(
            {**tags, STATE_TAG: target}, if_tags_match_condition=tags_condition(tags)
        )
    except ResourceNotFoundError:
        raise TagTransitionError(f"blob {blob.blob_name!r} does not exist") from None
    except HttpResponseError as error:
        if error.status_code != 412:
            raise
        return False
    return True


def seal(
    blob: BlobClient, written: Mapping[str, str] | None = None, read_back: bool | None = None
) -> None:
    """pending -> committed; `written`: the tags the upload wrote besides the state."""
    transition(blob, PENDING, COMMITTED, written, read_back)


def retire(
    blob: BlobClient, written: Mapping[str, str] | None = None, read_back: bool | None = None
) -> bool:
    """committed -> retired, so the coming delete can be tag-guarded too (invariant I3).

    False when the blob is already gone: the caller is retrying.
    """
    try:
        transition(blob, COMMITTED, RETIRED, written, read_back)
    except TagTransitionError:
        if state_of(blob) is None:
            return False
        raise
    return True


def retire_untagged(blob: BlobClient, read_back: bool | None = None) -> bool:
    """untagged -> retired, for a blob written before the protocol (`safetynet adopt` had not
    tagged it yet) that a replace or delete has just recorded as retired.

    A missing state tag is not a value `x-ms-if-tags` can test, so the write is guarded by the
    blob's ETag instead (`x-ms-blob-if-match` on Set Blob Tags, 412 when it differs:
    https://learn.microsoft.com/rest/api/storageservices/set-blob-tags): the bytes retired are
    the bytes read. Setting tags leaves the ETag alone, so an `adopt` tagging the same blob
    `committed` meanwhile is overwritten; that is safe, as the database already records the
    blob as retired and no row names it. False when the blob is gone; TagTransitionError when
    it carries another state or its bytes changed.
    """
    try:
        etag = blob.get_blob_properties().etag
        tags = blob.get_blob_tags()
    except ResourceNotFoundError:
        return False
    current = tags.get(STATE_TAG, "")
    if current == RETIRED:
        return True
    if current:
        raise TagTransitionError(
            f"blob {blob.blob_name!r} is tagged {STATE_TAG}={current!r}, expected untagged"
        )
    try:
        blob.set_blob_tags(
            {**tags, STATE_TAG: RETIRED}, etag=etag, match_condition=MatchConditions.IfNotModified
        )
    except ResourceNotFoundError:
        return False
    except HttpResponseError as error:
        if error.status_code != 412:
            raise
        raise TagTransitionError(f"blob {blob.blob_name!r} changed since it was read") from None
    if read_back is None:
        read_back = looks_like_emulator(blob)
    if read_back and state_of(blob) not in (RETIRED, None):
        raise TagTransitionError(f"blob {blob.blob_name!r}: {STATE_TAG} not set to 'retired'")
    return True


EMULATOR_ACCOUNT = "devstoreaccount1"
PROBE_PREFIX = ".safetynet/tag-condition-probe-"
"""A probe blob is written and deleted once per process on an emulator-looking endpoint, to
learn whether it evaluates x-ms-if-tags on Set Blob Tags; never on an Azure endpoint."""
_PROBE_TAG = "probe"


def looks_like_emulator(client: BlobClient | ContainerClient) -> bool:
    """A loopback host or the emulator's well-known account: where Azurite may answer."""
    host = urlsplit(client.url).hostname or ""
    return client.account_name == EMULATOR_ACCOUNT or is_loopback_host(host)


class TagGuards:
    """Whether a blob endpoint evaluates `x-ms-if-tags` on Set Blob Tags, decided once per
    endpoint and kept by whoever owns this object (one per process, passed in).

    Azure answers 412 ConditionNotMet when the condition does not hold
    (https://learn.microsoft.com/rest/api/storageservices/set-blob-tags), so a guarded tag
    write alone decides there and nothing is read back: Azure endpoints are never probed.
    Azurite ignores the condition and writes anyway. On an endpoint that looks like the
    emulator, one tag write under a condition that cannot hold, on an internal probe blob
    (created, then deleted: three requests once), tells which; a service that lets it
    through gets the read-back workaround. The outcome is logged (INFO) once per owner.
    """

    def __init__(self) -> None:
        self._enforced: dict[str, bool] = {}
        self._lock = threading.Lock()

    def enforced(self, container: ContainerClient) -> bool:
        if not looks_like_emulator(container):
            return True
        endpoint = container.url.rsplit("/", 1)[0]
        with self._lock:
            known = self._enforced.get(endpoint)
            if known is None:
                known = self._enforced[endpoint] = _probe_enforces(container)
                log.info(
                    "blob endpoint %s %s x-ms-if-tags on Set Blob Tags: %s",
                    endpoint,
                    "evaluates" if known else "ignores",
                    "a guarded tag write decides alone"
                    if known
                    else "seals and retires read the state before and after each write",
                )
        return known


def _probe_enforces(container: ContainerClient) -> bool:
    """A tag write under a condition that cannot hold, on a probe blob of its own removed
    afterwards: refused (412) where the condition is evaluated. Any other answer reads as
    ignored, the safe side: the read-back costs requests, never correctness."""
    probe = container.get_blob_client(f"{PROBE_PREFIX}{uuid.uuid4().hex}")
    # Tagged retired, so its removal is a guarded delete like any other (invariant I3).
    retired = {STATE_TAG: RETIRED}
    probe.upload_blob(b"", overwrite=False, match_condition=MatchConditions.IfMissing, tags=retired)
    try:
        probe.set_blob_tags(
            {**retired, _PROBE_TAG: "set"},
            if_tags_match_condition=f"\"{_PROBE_TAG}\" = 'never-set'",
        )
    except HttpResponseError as error:
        return error.status_code == 412
    finally:
        delete_guarded(probe, RETIRED)
    return False


def delete_guarded(blob: BlobClient, state: str) -> bool:
    """Delete with its snapshots only while the state tag is `state`; False when already gone.

    A 412 (ConditionNotMet) propagates: the blob is not in the state the caller believed.
    """
    try:
        blob.delete_blob(delete_snapshots="include", if_tags_match_condition=tag_condition(state))
    except ResourceNotFoundError:
        return False
    return True


def bound_database(container: ContainerClient) -> str | None:
    """The database id the container is bound to, None when it was never bound."""
    try:
        metadata = container.get_blob_client(BINDING_BLOB).get_blob_properties().metadata
    except ResourceNotFoundError:
        return None
    database_id: str | None = metadata.get("database_id")
    return database_id


def bind(container: ContainerClient, database_id: str) -> str:
    """Bind the container to `database_id` unless already bound; the id it is bound to
    ('' when a marker exists without one).

    One read when the container is bound already; a create-only write when it is not, so two
    first sweeps racing cannot both bind.
    """
    bound = bound_database(container)
    if bound is not None:
        return bound
    try:
        container.get_blob_client(BINDING_BLOB).upload_blob(
            b"",
            overwrite=False,
            metadata={"database_id": database_id},
            match_condition=MatchConditions.IfMissing,
        )
    except HttpResponseError as error:
        if error.status_code not in EXISTS_STATUSES:
            raise
    # A marker that exists but names no database (forged, or its metadata stripped by a copy)
    # binds the container to nobody: never read it as ours.
    return bound_database(container) or ""


def unbind(container: ContainerClient, database_id: str) -> bool:
    """Remove the binding marker if it names `database_id` and is unchanged since read; True
    when removed. A marker naming another database (or none) is left for a person."""
    marker = container.get_blob_client(BINDING_BLOB)
    try:
        properties = marker.get_blob_properties()
    except ResourceNotFoundError:
        return False
    if properties.metadata.get("database_id") != database_id:
        return False
    try:
        marker.delete_blob(etag=properties.etag, match_condition=MatchConditions.IfNotModified)
    except ResourceNotFoundError:
        return False
    return True
