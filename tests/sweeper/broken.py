"""Deliberately broken variants of the protocol, the store, the sweeper and the blob client.

Each breaks one safety property the way a plausible edit would. The tests in
test_invariants_broken.py run the same checks over the real part and its broken twin: the real
one passes, the twin is caught. A check that cannot tell them apart proves nothing.

The twins override public or long-standing methods only (or sit in the blob client the code
is handed), so they keep breaking the same property while the internals they wrap evolve.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

from azure.storage.blob import BlobClient, ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.vocabulary import PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport

FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


class PublishBeforeSeal(UploadProtocol):
    """The order rule reversed: the row turns Ready while its blob still says pending."""

    def _seal_and_publish(
        self, document: Document, created: bool, tags: Mapping[str, str] | None
    ) -> Document:
        published = self.publish(document)
        self.seal(document, dict(tags or {}) if created else None)
        return published


class DeleteFirstReplace(UploadProtocol):
    """Replace that retires and deletes the old blob before the row points at the new one."""

    def replace(self, document_id: str, *args: Any, **kwargs: Any) -> Document:
        old = self.container.get_blob_client(self._ready(document_id).blob_name)
        blobs.retire(old)
        self.checkpoint("replace.retire")
        blobs.delete_guarded(old, RETIRED)
        return super().replace(document_id, *args, **kwargs)


class OverwritingUpload(UploadProtocol):
    """An upload without the create-only condition: a retry overwrites the first bytes."""

    def upload(
        self, document: Document, data: blobs.UploadData, length: int | None = None, *more: Any
    ) -> bool:
        blob = self.container.get_blob_client(document.blob_name)
        blob.upload_blob(data, length=length, overwrite=True, tags={STATE_TAG: PENDING})
        self.checkpoint("upload")
        return True


class ClaimsEveryStatus(DocumentStore):
    """A claim that lost its status filter: the first chunk includes old Ready rows too."""

    def claim_stale(self, cutoff: datetime, *args: Any, **kwargs: Any) -> Any:
        claimed = super().claim_stale(cutoff, *args, **kwargs)
        if kwargs.get("after") is not None:
            return claimed
        ready = [d for d in self.all() if d.status is Status.READY and d.created_utc < cutoff]
        if isinstance(claimed, list):
            return claimed + ready
        return _extended(claimed, ready)


@contextmanager
def _extended(claimed: AbstractContextManager[Any], extra: list[Document]) -> Iterator[Any]:
    with claimed as batch:
        batch.documents = [*batch.documents, *extra]
        yield batch


class ClaimsFreshRows(DocumentStore):
    """A claim that ignores the cutoff: uploads still in progress are swept."""

    def claim_stale(self, cutoff: datetime, *args: Any, **kwargs: Any) -> Any:
        return super().claim_stale(FAR_FUTURE, *args, **kwargs)


class IdleSweeper(Sweeper):
    """A sweeper that reports success and changes nothing."""

    def run(self) -> SweepReport:
        return SweepReport()


class UnguardedBlob(BlobClient):
    def delete_blob(self, delete_snapshots: str | None = None, **kwargs: Any) -> None:
        kwargs.pop("if_tags_match_condition", None)
        super().delete_blob(delete_snapshots, **kwargs)


class UnguardedContainer(ContainerClient):
    """A blob client that drops the tag guard from every delete, single or batched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hook = kwargs.get("raw_request_hook")

    def get_blob_client(self, blob: Any, snapshot: str | None = None, **kwargs: Any) -> BlobClient:
        name = blob if isinstance(blob, str) else blob.name
        return UnguardedBlob.from_blob_url(
            f"{self.url}/{name}", credential=self.credential, raw_request_hook=self._hook
        )

    def delete_blobs(self, *blobs: Any, **kwargs: Any) -> Any:
        stripped = [
            {k: v for k, v in b.items() if k != "if_tags_match_condition"}
            if isinstance(b, dict)
            else b
            for b in blobs
        ]
        return super().delete_blobs(*stripped, **kwargs)


class SealedLooksMissing(ContainerClient):
    """A batch delete whose 412 answers (the tag is not pending) read as 404 (never landed)."""

    def delete_blobs(self, *blobs: Any, **kwargs: Any) -> Any:
        responses = list(super().delete_blobs(*blobs, **kwargs))
        for response in responses:
            if response.status_code == 412:
                response.status_code = 404
                response.headers["x-ms-error-code"] = "BlobNotFound"
        return iter(responses)
