"""The sweeper: abandoned uploads removed under a tag guard, blob first, row second.

Cost grows with the stale rows and the recorded crash windows (one indexed query per chunk,
one Blob Batch per 256 blobs), never with the container: there is no List Blobs call. No
database transaction is open during a blob call: rows are claimed in a short transaction that
stamps them, the blob work runs outside it, and conditional statements finish only the rows
the claim still holds. Every step is idempotent, so an interrupted sweep is finished by the
next one.

Over 500 lines on purpose: one `Sweeper` whose chunk loop, Blob Batch outcomes and
lost-answer handling are one state machine (claim, delete under a tag guard, finish the claim);
its pieces only make sense next to each other.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceResponseError,
)
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import MAX_NAME_LENGTH, Clock
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG, tag_condition
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import BlobRecord, BlobRecordKind, Document, Status
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.binding import ContainerBindingError as ContainerBindingError
from blob_safetynet.sweeper.lease import SweepLease, SweepLeaseLostError

log = logging.getLogger("safetynet.sweeper")

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class BlobOutcome(enum.Enum):
    DELETED = "deleted"
    MISSING = "missing"
    """404: the upload never landed; the row can go."""
    SEALED = "sealed"
    """412 under the pending guard and the tag reads exactly `committed`: roll forward."""
    FAILED = "failed"


@dataclass(frozen=True)
class Verdict:
    outcome: BlobOutcome
    detail: str = ""


_STATUS_OUTCOMES = {202: BlobOutcome.DELETED, 404: BlobOutcome.MISSING}


@dataclass
class SweepReport:
    examined: int = 0
    deleted_blobs: int = 0
    missing_blobs: int = 0
    rolled_forward: int = 0
    deleted_rows: int = 0
    retired_deleted: int = 0
    """Old blobs of replaced or deleted documents, deleted after their grace period."""
    abandoned_replacements: int = 0
    """New blobs of replaces that never switched, removed."""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dry_run: bool = False
    stopped: str | None = None
    """Why the run stopped before the end (the database or the lease failed mid-run, or a
    signal asked it to), else None. The CLI exits 4 for a failure (a service failed mid-run),
    not 1 (rows that could not be swept), and 130 or 143 for a signal."""
    interrupted: str | None = None
    """The signal that stopped the run between chunks (`SIGINT`, `SIGTERM`), else None."""
    claims_waiting: int = 0
    """Stale rows and records another run holds a live claim on: a sweeper running now, or
    one that died holding them. This run could not touch them; the next one after
    `claims_waiting_until` can."""
    claims_waiting_until: str | None = None
    """When the oldest of those claims expires (ISO 8601, UTC)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def changed_anything(self) -> bool:
        return any(
            (
                self.deleted_blobs,
                self.rolled_forward,
                self.deleted_rows,
                self.retired_deleted,
                self.abandoned_replacements,
            )
        )


def _status_of(response: Any) -> int:
    """The sub-response status, or 0 (a failure) where the code alone would mislead.

    Only BlobNotFound means "never landed" (ContainerNotFound must not delete rows), and only
    ConditionNotMet means "the tag is not pending" (a 412 for a lease held on the blob is not).
    """
    status: int = response.status_code
    code = response.headers.get("x-ms-error-code")
    if status == 404 and code not in (None, "BlobNotFound"):
        return 0
    if status == 412 and code not in (None, "ConditionNotMet"):
        return 0
    return status


def blob_name_problem(name: str | None) -> str | None:
    """Why a row's blob name cannot be sent to the service, or None when it can."""
    if name is None or not name.strip():
        return "blob name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"blob name is {len(name)} characters; at most {MAX_NAME_LENGTH}"
    if any(ord(ch) < 32 for ch in name):
        return "blob name contains control characters"
    return None


def _chunks(items: Sequence[Document], size: int) -> Iterator[Sequence[Document]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _code(error: HttpResponseError) -> str | None:
    """The service's error code as it sent it (`LeaseIdMissing`): the SDK gives a
    StorageErrorCode, which formats as `StorageErrorCode.LEASE_ID_MISSING` in a message."""
    code: object = getattr(error, "error_code", None)
    return None if code is None else str(getattr(code, "value", code))


class AnswerLost:
    """The blobs of requests that were sent but whose answer never came (a connection reset
    or a timeout after sending: ServiceResponseError), whether the SDK's retry policy or the
    sweep sent them again. The service may have executed such a delete, so a later 404 for
    one of them is the sweep's own delete, not an upload that never landed; the one case it
    cannot tell apart, an upload that never landed whose delete answer was also lost, is
    counted as deleted too.
    """

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._lock = threading.Lock()

    def note(self, names: Sequence[str], error: object) -> None:
        if isinstance(error, ServiceResponseError):
            with self._lock:
                self.names.update(names)

    def hook(self, names: Sequence[str]) -> Callable[..., None]:
        """The SDK's `retry_hook` option, called before each of its retries with the error
        that caused it, if any (StorageRetryPolicy in azure-storage-blob: https://
        azuresdkdocs.z19.web.core.windows.net/python/azure-storage-blob/12.26.0/_modules/azure/
        storage/blob/_shared/policies.html)."""

        def retrying(**context: Any) -> None:
            self.note(names, context.get("error"))

        return retrying


def _no_lease() -> None:
    """Without a lease there is nothing to check between chunks."""


def _never_stop() -> str | None:
    return None


class StopRequested(Exception):
    """A signal asked the run to stop; raised between chunks, never inside one."""


class Sweeper:
    def __init__(
        self,
        store: DocumentStore,
        container: ContainerClient,
        settings: SweepSettings,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_progress: Callable[[SweepReport], None] | None = None,
        lease: SweepLease | None = None,
        stop_requested: Callable[[], str | None] = _never_stop,
        container_checked: bool = False,
    ) -> None:
        """`stop_requested` names the signal that asked the run to stop (None: go on); it is
        asked before every chunk is claimed, so a stopped run has finished or handed back its
        claims. `container_checked`: the caller has just read the container's properties (the
        CLI's target check), so `run` does not read them again."""
        self.store = store
        self.container = container
        self.settings = settings
        # The database's clock by default: the one that stamped the rows and records it judges.
        self.clock = clock or store.now
        self.sleep = sleep
        self.on_progress = on_progress
        self.lease = lease
        self.stop_requested = stop_requested
        self.container_checked = container_checked

    def _between_chunks(self, check_lease: Callable[[], None]) -> None:
        signal_name = self.stop_requested()
        if signal_name is not None:
            raise StopRequested(signal_name)
        check_lease()

    def run(self) -> SweepReport:
        """Sweep once. Raises SweepLeaseHeldError when another sweeper leads, SweepLeaseStuckError
        when the lease has been held past its limit, ContainerBindingError for a wrong table or
        an unbound pair that cannot be shown to belong together (`binding.ensure_bound`)."""
        if not self.container_checked:
            self.container.get_container_properties()  # a wrong container fails here, loudly
        if not self.settings.dry_run:
            binding.ensure_bound(self.store, self.container)
        if not self.settings.use_lease:
            return self._sweep(_no_lease)
        lease = self.lease or SweepLease(self.container)
        lease.acquire()
        try:
            report = self._sweep(lease.ensure_held)
        finally:
            warning = lease.release()
        if warning is not None:
            report.warnings.append(warning)
        return report

    def _sweep(self, check_lease: Callable[[], None]) -> SweepReport:
        report = SweepReport(dry_run=self.settings.dry_run)
        now = self.clock()
        token = str(uuid.uuid4())
        try:
            with ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="sweep") as pool:
                self._sweep_rows(pool, report, token, check_lease)
                for kind, before in (
                    (BlobRecordKind.INTENT, now - self.settings.cutoff),
                    (BlobRecordKind.RETIRED, now - self.settings.retired_grace),
                ):
                    self._sweep_records(pool, report, token, kind, before, check_lease)
        except SweepLeaseLostError as lost:
            report.errors.append(str(lost))
            report.stopped = str(lost)
            log.error("sweep stopped: %s", lost)
        except StoreError as error:
            report.errors.append(f"sweep stopped: {error}")
            report.stopped = str(error)
            log.error("sweep stopped: %s", error)
        except StopRequested as stop:
            report.interrupted = str(stop)
            report.stopped = f"interrupted by {stop} between chunks"
            log.warning("sweep stopped: %s", report.stopped)
        if not self.settings.dry_run and report.stopped is None:
            self._count_waiting(report, token)
        return report

    def _count_waiting(self, report: SweepReport, token: str) -> None:
        """A claim of a run that died is never a silent no-op: it is counted, with its end."""
        waiting, oldest = self.store.claims_held(self.clock() - self.settings.claim_ttl, token)
        if not waiting or oldest is None:
            return
        until = (oldest + self.settings.claim_ttl).isoformat()
        report.claims_waiting, report.claims_waiting_until = waiting, until
        report.warnings.append(
            f"{waiting} stale row(s) or record(s) are claimed by another run (running now, or "
            f"stopped without releasing them); they wait until {until}, when a sweep takes them"
        )

    def _sweep_rows(
        self,
        pool: ThreadPoolExecutor,
        report: SweepReport,
        token: str,
        check_lease: Callable[[], None],
    ) -> None:
        """Chunk after chunk, pipelined: while one chunk's deletes are in flight the next chunk
        is claimed (a stamp in the database; no blob is touched), unless a signal asked to
        stop. Its deletes start only once the chunk before it is finished and the stop and
        lease checks after that have passed; a run that stops there hands it back at once
        (docs/sweeper.md, "What overlaps")."""
        now = self.clock()
        cutoff = now - self.settings.cutoff
        self._between_chunks(check_lease)
        documents = self._claim_rows(cutoff, token, now, after=None)
        while documents:
            sendable = self._sendable(documents, report)
            classify = self._inspect if self.settings.dry_run else self._delete_batch
            in_flight = [
                pool.submit(classify, batch)
                for batch in _chunks(sendable, self.settings.batch_size)
            ]
            following: Sequence[Document] = ()
            claim_failed: StoreError | None = None
            if self.stop_requested() is None:
                try:
                    following = self._claim_rows(cutoff, token, now, after=documents[-1])
                except StoreError as error:
                    claim_failed = error  # raised once the chunk in flight is finished
            try:
                verdicts: dict[str, Verdict] = {}
                for future in in_flight:
                    verdicts.update(future.result())
                self._finish(token, documents, sendable, verdicts, report)
                self._progress(report)
                if claim_failed is not None:
                    raise claim_failed
                if following:
                    self._between_chunks(check_lease)
            except BaseException:
                self._hand_back(token, following)
                raise
            documents = following

    def _claim_rows(
        self, cutoff: datetime, token: str, now: datetime, after: Document | None
    ) -> Sequence[Document]:
        if self.settings.dry_run:
            return self.store.peek_stale(cutoff, self.settings.chunk_size, after=after)
        return self.store.claim_stale(
            cutoff,
            self.settings.chunk_size,
            token,
            now,
            now - self.settings.claim_ttl,
            after=after,
        )

    def _sendable(self, documents: Sequence[Document], report: SweepReport) -> list[Document]:
        """The rows whose blob name the service can take; the others are reported and left."""
        sendable = []
        for document in documents:
            problem = blob_name_problem(document.blob_name)
            if problem is None:
                sendable.append(document)
            else:
                report.examined += 1
                report.errors.append(f"document {document.id}: {problem}; left for a human")
        return sendable

    def _hand_back(self, token: str, claimed: Sequence[Document]) -> None:
        """Release a chunk claimed ahead that this run will not sweep; none of its blobs was
        touched. A database failing now leaves the claim to expire (`claim_ttl`)."""
        if not claimed or self.settings.dry_run:
            return
        try:
            self.store.finish_claim(token, [d.id for d in claimed], [], [])
        except StoreError as error:
            log.warning("%d claimed row(s) not handed back: %s", len(claimed), error)

    def _finish(
        self,
        token: str,
        claimed: Sequence[Document],
        documents: Sequence[Document],
        verdicts: dict[str, Verdict],
        report: SweepReport,
    ) -> None:
        """Count `documents`' verdicts and finish them; every other row in `claimed` is handed
        back unchanged."""
        removable: list[str] = []
        sealed: list[str] = []
        for document in documents:
            report.examined += 1
            verdict = verdicts.get(document.blob_name, Verdict(BlobOutcome.FAILED, "no answer"))
            if verdict.outcome is BlobOutcome.DELETED:
                report.deleted_blobs += 1
                removable.append(document.id)
            elif verdict.outcome is BlobOutcome.MISSING:
                report.missing_blobs += 1
                removable.append(document.id)
            elif verdict.outcome is BlobOutcome.SEALED:
                sealed.append(document.id)
            else:
                report.errors.append(
                    f"document {document.id}: blob {document.blob_name} not swept"
                    + (f": {verdict.detail}" if verdict.detail else "")
                )
        if self.settings.dry_run:
            report.rolled_forward += len(sealed)
            report.deleted_rows += len(removable)
            return
        deleted, published = self.store.finish_claim(
            token, [d.id for d in claimed], removable, sealed
        )
        report.deleted_rows += deleted
        report.rolled_forward += published

    def _delete_batch(self, documents: Sequence[Document]) -> dict[str, Verdict]:
        """One Blob Batch of tag-guarded deletes; transient per-blob failures retried alone.

        A 404 for a blob whose earlier delete may have reached the service (its answer was
        lost, so the SDK or this loop sent it again) counts as deleted, not as never landed.
        """
        todo = [d.blob_name for d in documents]
        verdicts: dict[str, Verdict] = {}
        lost = AnswerLost()
        for attempt in range(self.settings.max_attempts):
            if attempt:
                self.sleep(min(0.2 * 2**attempt, 10.0))
            statuses = self._send_batch(todo, lost)
            retry = []
            for name, status in statuses.items():
                if status == 404 and name in lost.names:
                    verdicts[name] = Verdict(BlobOutcome.DELETED, "answer lost, then gone")
                elif status in _STATUS_OUTCOMES:
                    verdicts[name] = Verdict(_STATUS_OUTCOMES[status])
                elif status == 412:
                    verdicts[name] = self._judge_unpending(name)
                elif status in TRANSIENT_STATUSES:
                    retry.append(name)
                else:
                    log.warning("blob %s: delete answered %s", name, status)
                    verdicts[name] = Verdict(BlobOutcome.FAILED, f"delete answered {status}")
            todo = retry
            if not todo:
                break
        for name in todo:
            log.warning(
                "blob %s: still failing after %d attempts", name, self.settings.max_attempts
            )
            verdicts[name] = Verdict(
                BlobOutcome.FAILED, f"still failing after {self.settings.max_attempts} attempts"
            )
        return verdicts

    def _judge_unpending(self, name: str) -> Verdict:
        """A 412 says only "not pending": the row rolls forward only if the tag is `committed`."""
        try:
            state = blobs.state_of(self.container.get_blob_client(name))
        except AzureError as error:
            return Verdict(BlobOutcome.FAILED, f"tag unreadable: {type(error).__name__}")
        if state == COMMITTED:
            return Verdict(BlobOutcome.SEALED)
        if state is None:
            return Verdict(BlobOutcome.MISSING)
        return Verdict(
            BlobOutcome.FAILED,
            f"tagged {STATE_TAG}={state!r}, neither pending nor committed; not rolled forward",
        )

    def _send_batch(self, names: Sequence[str], lost: AnswerLost) -> dict[str, int]:
        """Per-blob status codes; a failure of the whole batch counts as transient for each.
        `lost` learns the names of a batch whose answer was lost after it was sent."""
        requests = [
            {
                "name": name,
                "delete_snapshots": "include",
                "if_tags_match_condition": tag_condition(PENDING),
            }
            for name in names
        ]
        try:
            responses = list(
                self.container.delete_blobs(
                    *requests, raise_on_any_failure=False, retry_hook=lost.hook(names)
                )
            )
        except HttpResponseError as error:
            log.warning("blob batch failed: %s", error.reason or error.status_code)
            # A whole-batch 404 or 412 says nothing about any one blob: never act on it.
            status = error.status_code if error.status_code in TRANSIENT_STATUSES else 0
            return dict.fromkeys(names, status)
        except AzureError as error:
            log.warning("blob batch failed: %s", type(error).__name__)
            lost.note(names, error)
            return dict.fromkeys(names, 503)
        except ValueError as error:
            # The SDK refuses a request it cannot build (an empty name) before sending anything.
            log.warning("blob batch not sent: %s; deleting one by one", error)
            return {name: self._delete_one(name, lost) for name in names}
        if len(responses) != len(names):
            # Answers cannot be matched to requests any more: ask about each blob on its own.
            log.warning(
                "blob batch answered %d of %d; deleting one by one", len(responses), len(names)
            )
            return {name: self._delete_one(name, lost) for name in names}
        return {name: _status_of(r) for name, r in zip(names, responses, strict=True)}

    def _delete_one(self, name: str, lost: AnswerLost | None = None) -> int:
        lost = lost or AnswerLost()
        try:
            self.container.get_blob_client(name).delete_blob(
                delete_snapshots="include",
                if_tags_match_condition=tag_condition(PENDING),
                retry_hook=lost.hook([name]),
            )
        except ResourceNotFoundError as error:
            return 404 if _code(error) in (None, "BlobNotFound") else 0
        except HttpResponseError as error:
            if error.status_code == 412 and _code(error) not in (None, "ConditionNotMet"):
                return 0
            return error.status_code or 0
        except AzureError as error:
            lost.note([name], error)
            return 503
        except ValueError:
            return 0
        return 202

    def _inspect(self, documents: Sequence[Document]) -> dict[str, Verdict]:
        """Dry run: what a sweep would do to each blob, learned by reading tags only."""
        verdicts = {}
        for document in documents:
            state = blobs.state_of(self.container.get_blob_client(document.blob_name))
            if state is None:
                verdicts[document.blob_name] = Verdict(BlobOutcome.MISSING)
            elif state == PENDING:
                verdicts[document.blob_name] = Verdict(BlobOutcome.DELETED)
            elif state == COMMITTED:
                verdicts[document.blob_name] = Verdict(BlobOutcome.SEALED)
            else:
                verdicts[document.blob_name] = Verdict(
                    BlobOutcome.FAILED, f"tagged {STATE_TAG}={state!r}; would not roll forward"
                )
        return verdicts

    # Crash windows of replace and delete, found through their records.

    def _sweep_records(
        self,
        pool: ThreadPoolExecutor,
        report: SweepReport,
        token: str,
        kind: BlobRecordKind,
        before: datetime,
        check_lease: Callable[[], None],
    ) -> None:
        now = self.clock()
        last: BlobRecord | None = None
        while True:
            self._between_chunks(check_lease)
            if self.settings.dry_run:
                records = self.store.peek_records(
                    kind, before, self.settings.chunk_size, after=last
                )
            else:
                records = self.store.claim_records(
                    kind,
                    before,
                    self.settings.chunk_size,
                    token,
                    now,
                    now - self.settings.claim_ttl,
                    after=last,
                )
            if not records:
                return
            last = records[-1]
            clear = self._inspect_record if self.settings.dry_run else self._clear_record
            done = []
            for record, error in zip(records, pool.map(clear, records), strict=True):
                if error is not None:
                    report.errors.append(
                        f"{kind} blob {record.blob_name} of document {record.document_id}: {error}"
                    )
                    continue
                done.append(record.blob_name)
                if kind is BlobRecordKind.RETIRED:
                    report.retired_deleted += 1
                else:
                    report.abandoned_replacements += 1
            if not self.settings.dry_run:
                self.store.finish_records(token, [r.blob_name for r in records], done)
            self._progress(report)

    def _progress(self, report: SweepReport) -> None:
        """After every chunk of rows or records: the run's totals so far (never one chunk's
        counts), so the last record a collector keeps is the run's summary."""
        totals = {**report.as_dict(), "totals_so_far": True}
        log.info("sweep progress (totals so far)", extra={"sweep": totals})
        if self.on_progress is not None:
            self.on_progress(report)

    def _clear_record(self, record: BlobRecord) -> str | None:
        """Delete the recorded blob under its tag guard; None when gone, else why not."""
        # A row may reference the blob again (a deleted row restored by the application, a
        # table restored without its records): whatever the tag says, it is live then.
        owner = self.store.document_for_blob(record.blob_name)
        if owner is not None:
            return f"row {owner.id} references it; record kept, blob not deleted"
        blob = self.container.get_blob_client(record.blob_name)
        guard = PENDING if record.kind is BlobRecordKind.INTENT else RETIRED
        try:
            try:
                blobs.delete_guarded(blob, guard)
                return None
            except HttpResponseError as error:
                if error.status_code != 412 or _code(error) not in (None, "ConditionNotMet"):
                    return f"delete answered {error.status_code} {_code(error) or ''}".strip()
            state = blobs.state_of(blob)
            if state is None:
                return None
            if state == RETIRED:
                blobs.delete_guarded(blob, RETIRED)
                return None
            if state == "" and record.kind is BlobRecordKind.RETIRED:
                # A document replaced or deleted before `adopt` tagged its blob, whose writer
                # stopped before retiring it: the record says retired, no row names it.
                blobs.retire_untagged(blob)
                blobs.delete_guarded(blob, RETIRED)
                return None
            if state != COMMITTED:
                return f"tagged {STATE_TAG}={state!r}; left for a human"
            if record.kind is BlobRecordKind.INTENT:
                only_copy = self._only_copy(record)
                if only_copy is not None:
                    return only_copy
            blobs.retire(blob)
            blobs.delete_guarded(blob, RETIRED)
        except blobs.TagTransitionError as error:
            return str(error)
        except AzureError as error:
            return f"{type(error).__name__}"
        return None

    def _only_copy(self, record: BlobRecord) -> str | None:
        """Why a sealed intent's blob must be kept: its document's own blob is retired or gone.

        A stalled replace never retired the blob its row points at, so a consistent database
        never shows this. A database restored to a point between a replace's intent and its
        switch does: the switch happened after all, the old blob was retired (and perhaps
        swept), and the intent's blob holds the document's newest, maybe only, bytes.
        """
        document = self.store.get(record.document_id)
        if document is None or document.status is not Status.READY:
            return None
        state = blobs.state_of(self.container.get_blob_client(document.blob_name))
        if state is None:
            return (
                f"document {document.id}'s blob {document.blob_name} is missing and this sealed "
                "replacement is the only copy left; kept for a person (reconcile lists the row)"
            )
        if state == RETIRED:
            return (
                f"document {document.id}'s blob {document.blob_name} is already retired: the "
                "database looks older than the container (restored?); this sealed replacement "
                "is kept for a person"
            )
        return None

    def _inspect_record(self, record: BlobRecord) -> str | None:
        state = blobs.state_of(self.container.get_blob_client(record.blob_name))
        if state in (None, PENDING, RETIRED, COMMITTED):
            return None
        if state == "" and record.kind is BlobRecordKind.RETIRED:
            return None
        return f"tagged {STATE_TAG}={state!r}; would be left for a human"
