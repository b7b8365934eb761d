"""Applying the roll-forward: each step checked against the row and the blob read now, then made
with the protocol's own conditioned writes.

The steps run in `rollforward.ACTIONS` order: after the restored Pending rows whose puts
finished are published (database statements only), the retired blobs that kept documents need
are tagged committed (under the tag condition `"state" = 'retired'`, Set Blob Tags'
`x-ms-if-tags`: https://learn.microsoft.com/rest/api/storageservices/set-blob-tags), before any
byte is read, so the lifecycle rule, which deletes retired blobs after `retiredBlobDays`, cannot
take them while the rest runs. Before each step its row and blobs are read again; a step whose premise no longer
holds (a writer replaced or deleted the document meanwhile, the application being back online)
is skipped and judged afresh by the next run. A step already done (a run killed after it) is
recognised as done. So a run killed anywhere is finished by running it again.

Every row moved or rebuilt points at bytes read just before, whose length and SHA-256 bear out
the blob's metadata (`rollforward_bytes.check_blob`).

Nothing here deletes a blob. A move is the replace's own path: the intent recorded (or a
restored one taken back), the row switched only while it still names the blob judged, that
blob recorded and tagged retired by `UploadProtocol.retire_recorded`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import sqlalchemy as sa
from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import check_binding
from blob_safetynet.recover.plan import Target
from blob_safetynet.recover.rollforward import View, judge
from blob_safetynet.recover.rollforward_bytes import LEFT, SKIPPED, Refused, check_blob, verified
from blob_safetynet.recover.rollforward_plan import (
    ACTIONS,
    DELETE,
    MOVE,
    PUBLISH,
    REBUILD,
    RECORD,
    RESEAL,
    RETIRE,
    Judgement,
    Step,
    check_plan,
)
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED
from blob_safetynet.store.documents import DocumentStore, NameConflictError, SwitchResult
from blob_safetynet.store.tables import Status

DONE: Final = "done"
FAILED: Final = "failed"
DEFAULT_WORKERS: Final = 8
CLAIM_TTL: Final = timedelta(minutes=10)
"""The sweeper's default `claim_ttl`: an intent it claimed longer ago is taken back by a move."""


@dataclass(frozen=True)
class Outcome:
    step: Step
    status: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.step.as_dict(), "status": self.status, "outcome": self.detail}


@dataclass
class RollForward:
    outcomes: list[Outcome] = field(default_factory=list)
    after: Judgement = field(default_factory=Judgement)
    """What a fresh judgement finds once the run is over: empty when the table and the
    container agree."""
    stopped: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    @property
    def agree(self) -> bool:
        return not (self.after.steps or self.after.findings)


@dataclass
class _Applier:
    store: DocumentStore
    container: ContainerClient
    claim_ttl: timedelta

    def __post_init__(self) -> None:
        self.protocol = UploadProtocol(self.store, self.container)

    def run(self, step: Step) -> Outcome:
        act: Mapping[str, Callable[[Step], str]] = {
            RESEAL: self.reseal,
            PUBLISH: self.publish,
            DELETE: self.delete,
            MOVE: self.move,
            REBUILD: self.rebuild,
            RETIRE: self.retire,
            RECORD: self.record,
        }
        try:
            return Outcome(step, DONE, act[step.action](step))
        except Refused as refused:
            return Outcome(step, refused.status, refused.detail)
        except NameConflictError as conflict:
            return Outcome(step, LEFT, f"{conflict}; no row rebuilt")
        except HttpResponseError as error:
            code = getattr(error, "error_code", None)
            answer = str(getattr(code, "value", code) or error.reason)
            return Outcome(step, FAILED, f"HTTP {error.status_code} {answer}")
        except (AzureError, blobs.TagTransitionError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            return Outcome(step, FAILED, f"{type(error).__name__}: {first}")

    def row_names(self, step: Step, blob: str | None) -> Status:
        """The row's status while it still names `blob`; Refused otherwise."""
        row = self.store.get(step.document)
        if row is None:
            raise Refused(SKIPPED, "the row went away since the plan")
        if row.blob_name != blob:
            raise Refused(SKIPPED, "the row names another blob since the plan")
        return row.status

    def state(self, name: str) -> str | None:
        return blobs.state_of(self.container.get_blob_client(name))

    def reseal(self, step: Step) -> str:
        self.row_names(step, step.row_blob)
        state = self.state(step.blob)
        if state == COMMITTED:
            return "already committed"
        if state is None:
            raise Refused(LEFT, "the blob is gone: the lifecycle rule or the sweeper took it")
        if state != RETIRED:
            raise Refused(SKIPPED, f"the blob is tagged {state!r} now")
        client = self.container.get_blob_client(step.blob)
        blobs.transition(client, RETIRED, COMMITTED)
        row = self.store.get(step.document)
        if row is None or row.blob_name != step.row_blob:
            self.protocol.retire_recorded(step.blob)
            raise Refused(SKIPPED, "the row changed while its blob was re-sealed; retired again")
        return "tagged committed: the lifecycle rule leaves it"

    def publish(self, step: Step) -> str:
        if self.row_names(step, step.blob) is Status.READY:
            return "already Ready"
        if self.state(step.blob) not in (COMMITTED, RETIRED):
            raise Refused(SKIPPED, "its blob is not sealed now")
        if not self.store.publish(step.document, blob_name=step.blob):
            raise Refused(SKIPPED, "the row changed since the plan")
        return "Ready"

    def delete(self, step: Step) -> str:
        if self.store.get(step.document) is None:
            return "already deleted"
        self.row_names(step, step.blob)
        if self.state(step.blob) not in (RETIRED, None):
            raise Refused(SKIPPED, "its blob is not retired now")
        if step.taker is not None:
            check_blob(self.container, step.taker, None, step.name, not_document=step.document)
        if not self.store.delete_row(step.document, step.blob):
            raise Refused(SKIPPED, "the row changed since the plan")
        self.protocol.retire_recorded(step.blob)
        return "deleted again; its blob recorded retired"

    def move(self, step: Step) -> str:
        row = self.store.get(step.document)
        if row is not None and row.blob_name == step.blob and row.status is Status.READY:
            return "already moved"
        if self.row_names(step, step.row_blob) is not Status.READY:
            raise Refused(SKIPPED, "the row is not Ready")
        assert step.row_blob is not None
        if self.state(step.row_blob) not in (RETIRED, None):
            raise Refused(SKIPPED, "the row's blob is not retired now")
        checked = check_blob(self.container, step.blob, step.document, step.name)
        # A restored intent, or one a killed run recorded, is there already: the switch takes it.
        with suppress(sa.exc.IntegrityError):
            self.store.record_intent(step.document, step.blob)
        expired = self.store.now() - self.claim_ttl
        outcome = self.store.switch_blob(
            step.document, step.row_blob, step.blob, checked.verified.content, expired
        )
        if outcome is SwitchResult.INTENT_LOST:
            raise Refused(
                SKIPPED,
                "the sweeper holds this blob's intent (a claim younger than "
                f"{self.claim_ttl}); run again later",
            )
        if outcome is SwitchResult.ROW_CHANGED:
            raise Refused(SKIPPED, "the row changed while it was moved")
        self.protocol.retire_recorded(step.row_blob)
        return "row moved; its old blob recorded retired"

    def rebuild(self, step: Step) -> str:
        row = self.store.get(step.document)
        if row is not None:
            if row.blob_name == step.blob:
                return "already rebuilt"
            raise Refused(SKIPPED, "a row with this id exists now")
        if self.store.is_referenced(step.blob):
            raise Refused(SKIPPED, "a row or record names the blob now")
        checked = check_blob(self.container, step.blob, step.document, step.name)
        document = checked.verified.document(self.store.now())
        made = self.store.reserve(document, checked.verified.content)
        if made.blob_name != step.blob or made.status is not Status.READY:
            raise Refused(SKIPPED, "a row with this id exists now")
        return "row rebuilt from metadata the bytes bear out"

    def retire(self, step: Step) -> str:
        if self.store.document_for_blob(step.blob) is not None:
            raise Refused(SKIPPED, "a row names the blob now")
        state = self.state(step.blob)
        if state != RETIRED:
            if state != COMMITTED:
                raise Refused(SKIPPED, f"the blob is tagged {state!r} now")
            row = self.store.get(step.document)
            if step.row_blob is None and row is not None:
                raise Refused(SKIPPED, "the document has a row again")
            if step.row_blob is not None and (
                row is None or row.blob_name != step.row_blob or row.status is not Status.READY
            ):
                raise Refused(SKIPPED, "the row does not name the blob that supersedes it")
        self.store.record_orphan(step.document, step.blob)
        if not self.protocol.retire_recorded(step.blob):
            return "recorded retired; its tag write failed, the sweeper retires it"
        return "recorded and tagged retired: the sweeper deletes it after its grace"

    def record(self, step: Step) -> str:
        if self.store.is_referenced(step.blob):
            return "already named by a row or record"
        if step.row_blob is not None and self.store.get(step.document) is None:
            raise Refused(SKIPPED, "its document's row is not rebuilt yet")
        if self.state(step.blob) != RETIRED:
            raise Refused(SKIPPED, "the blob is not retired now")
        self.store.record_orphan(step.document, step.blob)
        return "recorded retired: the sweeper deletes it after its grace"


def roll_forward(
    store: DocumentStore,
    container: ContainerClient,
    *,
    plan: Mapping[str, Any] | None = None,
    reapply_deletes: bool = False,
    stop_requested: Callable[[], str | None] = lambda: None,
    phase_done: Callable[[str], None] = lambda _action: None,
    claim_ttl: timedelta = CLAIM_TTL,
    workers: int = DEFAULT_WORKERS,
) -> RollForward:
    """Apply `plan`'s steps (refused, nothing written, when made against another target), or
    judge now and apply; then judge once more to say what is left. RepairRefusedError when the
    container and the database are not bound to each other.

    One action's steps run `workers` at a time (each names its own blob and row), the next
    action's once they are all done; `stop_requested` is asked before each step starts, and a
    stop lets the started ones finish. `phase_done` is called after each action's steps (a
    test runs the lifecycle rule there)."""
    check_binding(store, container)
    if plan is not None:
        steps: Sequence[Step] = check_plan(plan, Target.of(store, container))
    else:
        steps = judge(View.read(store, container), reapply_deletes).steps
    applier = _Applier(store, container, claim_ttl)
    result = RollForward()

    def one(step: Step) -> Outcome | None:
        result.stopped = result.stopped or stop_requested()
        return None if result.stopped is not None else applier.run(step)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for action in ACTIONS:
            done = pool.map(one, [s for s in steps if s.action == action])
            result.outcomes += [outcome for outcome in done if outcome is not None]
            if result.stopped is not None:
                return result
            phase_done(action)
    chosen = bool(plan["reapply_deletes"]) if plan is not None else reapply_deletes
    result.after = verified(judge(View.read(store, container), chosen), container)
    return result
