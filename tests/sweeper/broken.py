"""Deliberately broken variants of the protocol, store and sweeper.

Each breaks one safety property the way a plausible edit would. The tests in
test_invariants_broken.py run the same checks over the real part and its broken twin: the real
one passes, the twin is caught. A check that cannot tell them apart proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

import sqlalchemy as sa

from safetynet.constants import PENDING, STATE_TAG
from sweeper import blobs
from sweeper.protocol import UploadProtocol
from sweeper.store import Document, DocumentStore, StaleBatch
from sweeper.sweep import BlobOutcome, Sweeper, SweepReport


class PublishBeforeSeal(UploadProtocol):
    """The order rule reversed: the row turns Ready while its blob still says pending."""

    def complete(
        self, document_id: str, data: blobs.UploadData, length: int | None = None
    ) -> Document:
        document = self.store.get(document_id)
        assert document is not None
        self.upload(document, data, length)
        published = self.publish(document)
        self.seal(document)
        return published


class DeleteFirstReplace(UploadProtocol):
    """Replace that drops the old blob before the row points at the new one."""

    def replace(
        self,
        document_id: str,
        data: blobs.UploadData,
        extension: str = "",
        length: int | None = None,
    ) -> Document:
        self._drop(self._ready(document_id).blob_name, "replace")
        return super().replace(document_id, data, extension, length)


class UnguardedDrop(UploadProtocol):
    """Replace and delete that remove the old blob with a plain delete, no retire, no guard."""

    def _drop(self, blob_name: str, step: str | None = None) -> None:
        self.container.get_blob_client(blob_name).delete_blob()


class LeakyDrop(UploadProtocol):
    """Replace and delete that never remove the old blob: committed orphans pile up."""

    def _drop(self, blob_name: str, step: str | None = None) -> None:
        return None


class OverwritingUpload(UploadProtocol):
    """An upload without the create-only condition: a retry overwrites the first bytes."""

    def upload(self, document: Document, data: blobs.UploadData, length: int | None = None) -> bool:
        blob = self.container.get_blob_client(document.blob_name)
        blob.upload_blob(data, length=length, overwrite=True, tags={STATE_TAG: PENDING})
        self.checkpoint("upload")
        return True


class ClaimsEveryStatus(DocumentStore):
    """A claim query that lost its status filter: old Ready rows are claimed too."""

    @contextmanager
    def claim_stale(
        self, cutoff: datetime, limit: int, after: Document | None = None
    ) -> Iterator[StaleBatch]:
        c = self.table.c
        query = self._select().where(c.created < cutoff)
        if after is not None:
            query = query.where(
                sa.or_(
                    c.created > after.created_utc,
                    sa.and_(c.created == after.created_utc, c.id > after.id),
                )
            )
        query = query.order_by(c.created, c.id).limit(limit)
        with self._connect() as conn:
            rows = [self._to_document(r) for r in conn.execute(query)]
            yield StaleBatch(self, conn, rows)


class ClaimsFreshRows(DocumentStore):
    """A claim query that ignores the cutoff: uploads still in progress are swept."""

    @contextmanager
    def claim_stale(
        self, cutoff: datetime, limit: int, after: Document | None = None
    ) -> Iterator[StaleBatch]:
        with super().claim_stale(datetime.max.replace(tzinfo=cutoff.tzinfo), limit, after) as b:
            yield b


class UnguardedSweeper(Sweeper):
    """Deletes stale rows' blobs without the `state = 'pending'` condition."""

    def _send_batch(self, names: Sequence[str]) -> list[int]:
        responses = self.container.delete_blobs(*names, raise_on_any_failure=False)
        return [r.status_code for r in responses]


class DeletesSealedSweeper(Sweeper):
    """Treats a sealed blob (412) like a missing one: the row goes, its complete bytes orphaned."""

    def _finish(
        self, batch: StaleBatch, outcomes: dict[str, BlobOutcome], report: SweepReport
    ) -> None:
        demoted = {
            name: BlobOutcome.MISSING if outcome is BlobOutcome.SEALED else outcome
            for name, outcome in outcomes.items()
        }
        super()._finish(batch, demoted, report)


class IdleSweeper(Sweeper):
    """Claims stale rows and then changes nothing."""

    def _finish(
        self, batch: StaleBatch, outcomes: dict[str, BlobOutcome], report: SweepReport
    ) -> None:
        report.examined += len(batch.documents)
