"""Whether a blob's bytes bear out the identity its metadata claims: the only way the roll-forward
trusts metadata enough to point a row at the blob.

The blob's properties and metadata are read, then its bytes under `If-Match` that ETag (so the
bytes measured are the bytes whose metadata was read,
https://learn.microsoft.com/rest/api/storageservices/get-blob), and `identity.verify` compares
the metadata's length and SHA-256 with them. The service's Content-MD5 cannot stand in for that
read: the metadata claims a SHA-256, and an MD5 proves nothing about it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Final

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import identity
from blob_safetynet.recover.rollforward_plan import MOVE, REBUILD, UNVERIFIED, Finding, Judgement
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.tables import Content

SKIPPED: Final = "skipped"
LEFT: Final = "left"


class Refused(Exception):
    """The step's premise does not hold now; its status and why."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Checked:
    """A committed blob whose metadata names the document and whose bytes bear it out."""

    verified: identity.Verified
    etag: str


def measure(container: ContainerClient, name: str, etag: str) -> Content:
    """Length and SHA-256 of the blob's bytes, read under `If-Match` the ETag its metadata was
    read with (412: the blob changed since)."""
    digest = hashlib.sha256()
    length = 0
    stream = container.get_blob_client(name).download_blob(
        etag=etag, match_condition=MatchConditions.IfNotModified
    )
    for chunk in stream.chunks():
        digest.update(chunk)
        length += len(chunk)
    return Content(length, digest.hexdigest())


def check_blob(
    container: ContainerClient,
    name: str,
    document_id: str | None,
    document_name: str | None,
    not_document: str | None = None,
) -> Checked:
    """The blob, committed, its metadata naming `document_id` (any document but `not_document`
    when None) and `document_name` when given, its bytes measured and bearing the metadata out;
    Refused otherwise (LEFT: not trusted; SKIPPED: it changed, judge again)."""
    client = container.get_blob_client(name)
    try:
        properties = client.get_blob_properties()
        state = client.get_blob_tags().get(STATE_TAG, "")
    except ResourceNotFoundError:
        raise Refused(SKIPPED, f"blob {name} is gone") from None
    if state != COMMITTED:
        raise Refused(SKIPPED, f"blob {name} is tagged {state!r} now, not committed")
    try:
        claimed = identity.read_identity(properties.metadata)
        if claimed is None:
            raise identity.IdentityError("its metadata names no document")
        if claimed.document_id != (document_id or claimed.document_id) or (
            claimed.document_id == not_document
        ):
            raise identity.IdentityError(f"its metadata names document {claimed.document_id}")
        if document_name is not None and claimed.name != document_name:
            raise identity.IdentityError("its metadata names the document by another name")
        try:
            content = measure(container, name, properties.etag)
        except HttpResponseError as error:
            if error.status_code in (404, 412):
                raise Refused(SKIPPED, f"blob {name} changed while read") from None
            raise
        verified = identity.verify(claimed, name, content)
    except identity.IdentityError as error:
        raise Refused(LEFT, f"blob {name} not trusted: {error}") from None
    return Checked(verified, properties.etag)


def verified(judgement: Judgement, container: ContainerClient) -> Judgement:
    """`judgement` with every step that points a row at a blob checked against the blob's bytes
    now (a dry run's plan, the judgement after a run): a blob whose bytes do not bear out its
    metadata becomes a finding instead of a step."""
    steps, findings = [], list(judgement.findings)
    for step in judgement.steps:
        try:
            if step.action in (MOVE, REBUILD):
                check_blob(container, step.blob, step.document, step.name)
            elif step.taker is not None:
                check_blob(container, step.taker, None, step.name, not_document=step.document)
        except Refused as refused:
            if refused.status == LEFT:
                findings.append(Finding(UNVERIFIED, step.blob, step.document, refused.detail))
                continue
        steps.append(step)
    return replace(judgement, steps=steps, findings=findings)
