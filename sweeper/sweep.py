"""The sweeper: abandoned uploads removed under a tag guard, blob first, row second.

Cost grows with the stale rows (one indexed query per chunk, one Blob Batch per 256 blobs),
never with the container: there is no List Blobs call. Every step is idempotent, so a sweep
interrupted anywhere is finished by the next one.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import ContainerClient

from safetynet.constants import PENDING, tag_condition
from sweeper import blobs
from sweeper.lease import SweepLease
from sweeper.protocol import Clock, utc_now
from sweeper.settings import SweepSettings
from sweeper.store import Document, DocumentStore, StaleBatch

log = logging.getLogger("safetynet.sweeper")

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class BlobOutcome(enum.Enum):
    DELETED = "deleted"
    MISSING = "missing"
    """404: the upload never landed; the row can go."""
    SEALED = "sealed"
    """412 under the pending guard: the bytes are complete, so the row rolls forward."""
    FAILED = "failed"


_STATUS_OUTCOMES = {202: BlobOutcome.DELETED, 404: BlobOutcome.MISSING, 412: BlobOutcome.SEALED}


@dataclass
class SweepReport:
    examined: int = 0
    deleted_blobs: int = 0
    missing_blobs: int = 0
    rolled_forward: int = 0
    deleted_rows: int = 0
    errors: list[str] = field(default_factory=list)
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def changed_anything(self) -> bool:
        return any((self.deleted_blobs, self.rolled_forward, self.deleted_rows))


def _status_of(response: Any) -> int:
    """The sub-response status, or 0 (a failure) where the code alone would mislead.

    Only BlobNotFound means "never landed" (ContainerNotFound must not delete rows), and only
    ConditionNotMet means "sealed" (a 412 for a lease held on the blob must not publish it).
    """
    status: int = response.status_code
    code = response.headers.get("x-ms-error-code")
    if status == 404 and code not in (None, "BlobNotFound"):
        return 0
    if status == 412 and code not in (None, "ConditionNotMet"):
        return 0
    return status


def _chunks(items: Sequence[Document], size: int) -> Iterator[Sequence[Document]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Sweeper:
    def __init__(
        self,
        store: DocumentStore,
        container: ContainerClient,
        settings: SweepSettings,
        clock: Clock = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        on_progress: Callable[[SweepReport], None] | None = None,
    ) -> None:
        self.store = store
        self.container = container
        self.settings = settings
        self.clock = clock
        self.sleep = sleep
        self.on_progress = on_progress

    def run(self) -> SweepReport:
        """Sweep every stale row once; raises SweepLeaseHeldError when another sweeper leads."""
        self.container.get_container_properties()  # a wrong container fails here, loudly
        if not self.settings.use_lease:
            return self._sweep()
        with SweepLease(self.container):
            return self._sweep()

    def _sweep(self) -> SweepReport:
        report = SweepReport(dry_run=self.settings.dry_run)
        cutoff = self.clock() - self.settings.cutoff
        last: Document | None = None
        with ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="sweep") as pool:
            while True:
                with self.store.claim_stale(cutoff, self.settings.chunk_size, after=last) as batch:
                    if not batch.documents:
                        break
                    last = batch.documents[-1]
                    batches = list(_chunks(batch.documents, self.settings.batch_size))
                    classify = self._inspect if self.settings.dry_run else self._delete_batch
                    outcomes: dict[str, BlobOutcome] = {}
                    for result in pool.map(classify, batches):
                        outcomes.update(result)
                    self._finish(batch, outcomes, report)
                log.info("sweep chunk finished", extra={"sweep": report.as_dict()})
                if self.on_progress is not None:
                    self.on_progress(report)
        return report

    def _finish(
        self, batch: StaleBatch, outcomes: dict[str, BlobOutcome], report: SweepReport
    ) -> None:
        removable: list[str] = []
        sealed: list[str] = []
        for document in batch.documents:
            report.examined += 1
            outcome = outcomes[document.blob_name]
            if outcome is BlobOutcome.DELETED:
                report.deleted_blobs += 1
                removable.append(document.id)
            elif outcome is BlobOutcome.MISSING:
                report.missing_blobs += 1
                removable.append(document.id)
            elif outcome is BlobOutcome.SEALED:
                sealed.append(document.id)
            else:
                report.errors.append(f"document {document.id}: blob {document.blob_name} not swept")
        if self.settings.dry_run:
            report.rolled_forward += len(sealed)
            report.deleted_rows += len(removable)
            return
        report.rolled_forward += batch.roll_forward(sealed)
        report.deleted_rows += batch.delete_pending(removable)

    def _delete_batch(self, documents: Sequence[Document]) -> dict[str, BlobOutcome]:
        """One Blob Batch of tag-guarded deletes; transient per-blob failures retried alone."""
        todo = [d.blob_name for d in documents]
        outcomes: dict[str, BlobOutcome] = {}
        for attempt in range(self.settings.max_attempts):
            if attempt:
                self.sleep(min(0.2 * 2**attempt, 10.0))
            statuses = self._send_batch(todo)
            retry = []
            for name, status in zip(todo, statuses, strict=True):
                if status in _STATUS_OUTCOMES:
                    outcomes[name] = _STATUS_OUTCOMES[status]
                elif status in TRANSIENT_STATUSES:
                    retry.append(name)
                else:
                    log.warning("blob %s: delete answered %s", name, status)
                    outcomes[name] = BlobOutcome.FAILED
            todo = retry
            if not todo:
                break
        for name in todo:
            log.warning(
                "blob %s: still failing after %d attempts", name, self.settings.max_attempts
            )
            outcomes[name] = BlobOutcome.FAILED
        return outcomes

    def _send_batch(self, names: Sequence[str]) -> list[int]:
        """Per-blob status codes; a failure of the whole batch counts as transient for each."""
        requests = [
            {
                "name": name,
                "delete_snapshots": "include",
                "if_tags_match_condition": tag_condition(PENDING),
            }
            for name in names
        ]
        try:
            responses = self.container.delete_blobs(*requests, raise_on_any_failure=False)
            return [_status_of(response) for response in responses]
        except HttpResponseError as error:
            log.warning("blob batch failed: %s", error.reason or error.status_code)
            # A whole-batch 404 or 412 says nothing about any one blob: never act on it.
            status = error.status_code if error.status_code in TRANSIENT_STATUSES else 0
            return [status] * len(names)
        except AzureError as error:
            log.warning("blob batch failed: %s", type(error).__name__)
            return [503] * len(names)

    def _inspect(self, documents: Sequence[Document]) -> dict[str, BlobOutcome]:
        """Dry run: what a sweep would do to each blob, learned by reading tags only."""
        outcomes = {}
        for document in documents:
            state = blobs.state_of(self.container.get_blob_client(document.blob_name))
            if state is None:
                outcomes[document.blob_name] = BlobOutcome.MISSING
            elif state == PENDING:
                outcomes[document.blob_name] = BlobOutcome.DELETED
            else:
                outcomes[document.blob_name] = BlobOutcome.SEALED
        return outcomes
