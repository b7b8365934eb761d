"""Blob calls with their conditions spelled out: create-only uploads and tag-guarded changes.

Every write here carries an explicit condition. The Python SDK drops its implicit
If-None-Match `*` as soon as any other condition is passed (DESIGN.md section 4), so the
create-only condition is never left to the `overwrite=False` default.
"""

from __future__ import annotations

from typing import IO, Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobType

from safetynet.constants import COMMITTED, PENDING, RETIRED, STATE_TAG, tag_condition

EXISTS_STATUSES = frozenset({409, 412})
"""Azurite answers 409 BlobAlreadyExists to a failed create-only write; the REST docs say 412."""

UploadData = bytes | IO[bytes]


def upload_create_only(
    blob: BlobClient, data: UploadData, length: int | None = None, **transfer: Any
) -> bool:
    """Upload tagged `state=pending` unless the name exists; True when this call created it.

    `transfer` passes SDK transfer options (`max_concurrency`, `max_single_put_size` on the
    client, ...). Streams are read in blocks, never buffered whole.
    """
    try:
        blob.upload_blob(
            data,
            length=length,
            blob_type=BlobType.BLOCKBLOB,
            overwrite=False,
            tags={STATE_TAG: PENDING},
            match_condition=MatchConditions.IfMissing,
            **transfer,
        )
    except HttpResponseError as error:
        if error.status_code in EXISTS_STATUSES:
            return False
        raise
    return True


def state_of(blob: BlobClient) -> str | None:
    """The blob's state tag, '' when untagged, None when the blob does not exist."""
    try:
        return blob.get_blob_tags().get(STATE_TAG, "")
    except ResourceNotFoundError:
        return None


class TagTransitionError(RuntimeError):
    """A guarded tag change found the blob missing or in an unexpected state."""


def transition(blob: BlobClient, expected: str, target: str) -> None:
    """Set the state tag to `target` only while it is `expected`; already `target` is success.

    The service enforces the guard (x-ms-if-tags -> 412); Azurite ignores it, so the state is
    read back and checked here as well.
    """
    try:
        blob.set_blob_tags({STATE_TAG: target}, if_tags_match_condition=tag_condition(expected))
    except ResourceNotFoundError:
        raise TagTransitionError(f"blob {blob.blob_name!r} does not exist") from None
    except HttpResponseError as error:
        if error.status_code != 412:
            raise
    current = state_of(blob)
    if current != target:
        raise TagTransitionError(
            f"blob {blob.blob_name!r} is tagged {STATE_TAG}={current!r}, expected {expected!r}"
        )


def seal(blob: BlobClient) -> None:
    transition(blob, PENDING, COMMITTED)


def retire(blob: BlobClient) -> bool:
    """committed -> retired, so the coming delete can be tag-guarded too (invariant I3).

    False when the blob is already gone: the caller is retrying.
    """
    try:
        transition(blob, COMMITTED, RETIRED)
    except TagTransitionError:
        if state_of(blob) is None:
            return False
        raise
    return True


def delete_guarded(blob: BlobClient, state: str) -> bool:
    """Delete with its snapshots only while the state tag is `state`; False when already gone.

    A 412 (ConditionNotMet) propagates: the blob is not in the state the caller believed.
    """
    try:
        blob.delete_blob(delete_snapshots="include", if_tags_match_condition=tag_condition(state))
    except ResourceNotFoundError:
        return False
    return True
