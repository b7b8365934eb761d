"""Reads that prove a restored blob, and the state tag it must carry: one request each where the
service answers the tag condition with the read
(https://learn.microsoft.com/rest/api/storageservices/get-blob and
https://learn.microsoft.com/rest/api/storageservices/get-blob-properties, `x-ms-if-tags`: 412
when the blob's tags do not match)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient, StorageStreamDownloader

from blob_safetynet.protocol import blobs
from blob_safetynet.recover.nets import Digest, digest_of
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG, tag_condition

IS_COMMITTED = tag_condition(COMMITTED)


@dataclass(frozen=True)
class Fetched:
    """What one Get Blob of a base blob showed: no ETag and no digest when it is missing."""

    etag: str | None
    digest: Digest | None
    committed: bool
    """Its tags matched `"state" = 'committed'` in the same request."""


def fetch(client: BlobClient) -> Fetched:
    """The blob's ETag, bytes and state tag by one Get Blob under `x-ms-if-tags`; on 412 (the
    tag is not `committed`) its bytes by a second Get Blob without the condition."""
    try:
        try:
            download = client.download_blob(if_tags_match_condition=IS_COMMITTED)
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
            return Fetched(*_read(client.download_blob()), committed=False)
    except ResourceNotFoundError:
        return Fetched(None, None, committed=False)
    return Fetched(*_read(download), committed=True)


def _read(download: StorageStreamDownloader[bytes]) -> tuple[str, Digest]:
    return download.properties.etag, digest_of(download)


def md5_and_committed(client: BlobClient) -> tuple[bytes | None, bool]:
    """The blob's Content-MD5 and whether its state tag is `committed`, by one Get Blob
    Properties under `x-ms-if-tags` (a second without it on 412)."""
    try:
        properties = client.get_blob_properties(if_tags_match_condition=IS_COMMITTED)
        committed = True
    except HttpResponseError as error:
        if error.status_code != 412:
            raise
        properties = client.get_blob_properties()
        committed = False
    md5 = properties.content_settings.content_md5
    return (None if md5 is None else bytes(md5)), committed


def source_url(source: BlobClient) -> str:
    """The URL Copy Blob reads `source` from: the SDK's `url` names a snapshot but not a
    version, which Copy Blob takes as `?versionid=`
    (https://learn.microsoft.com/rest/api/storageservices/copy-blob, x-ms-copy-source)."""
    if source.version_id and "versionid=" not in source.url:
        separator = "&" if "?" in source.url else "?"
        return f"{source.url}{separator}versionid={quote(source.version_id)}"
    return source.url


def make_committed(client: BlobClient) -> None:
    """The state tag a Ready row's blob carries (`committed`), other tags kept; an untagged
    blob is tagged under its ETag (a missing tag is no value `x-ms-if-tags` can test)."""
    tags = dict(client.get_blob_tags())
    state = tags.get(STATE_TAG, "")
    if state == COMMITTED:
        return
    if state:
        blobs.transition(client, state, COMMITTED)
        return
    etag = client.get_blob_properties().etag
    client.set_blob_tags(
        {**tags, STATE_TAG: COMMITTED}, etag=etag, match_condition=MatchConditions.IfNotModified
    )
