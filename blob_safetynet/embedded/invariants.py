"""Invariants I1-I6 (docs/protocol.md, "Invariants"), checked against a real table and container.

Two kinds of check. `InvariantWatch.check` judges one instant against the instant before it:
I1 and I2 (what a reader could see now), I3 (every blob that disappeared since, referenced or
not) and I6 (every blob that survived kept its bytes). Call it after every protocol step (it
is a `Checkpoint`), after a crash before any repair, and after each repair. `check_invariants`
adds what only makes sense once repair is over: I4 (nothing stale left, a second sweep idle)
and I5 (no orphan outside a crash window).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.storage.blob import ContainerClient

from blob_safetynet.reconcile.listing import ListedBlob, list_blobs
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, tag_condition
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecord, Document, Status
from blob_safetynet.sweeper.sweep import SweepReport

DESCRIPTIONS = {
    "I1": "no Ready row points to a missing blob",
    "I2": "the blob of every Ready row says state=committed",
    "I3": "only pending or retired blobs were deleted, each under its tag guard",
    "I4": "no stale Pending row remains and a second sweep changes nothing",
    "I5": "every blob is reachable from a row or tagged pending",
    "I6": "no existing bytes were overwritten",
}
INSTANT = ("I1", "I2", "I3", "I6")
"""The invariants that hold at every instant, crash windows included."""

GUARDS = frozenset({tag_condition(PENDING), tag_condition(RETIRED)})
"""The only tag conditions a delete may carry (I3): the service refuses any other state."""

# One sub-request of a Blob Batch body: `DELETE /<path>?<query> HTTP/1.1` and its headers.
_BATCH_DELETE = re.compile(rb"DELETE (\S+) HTTP/1\.1\r\n((?:[^\r\n]+\r\n)*)")
_IF_TAGS = re.compile(rb"^x-ms-if-tags: (.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class InvariantResult:
    id: str
    holds: bool
    detail: str

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.id]


@dataclass(frozen=True)
class DeleteRequest:
    blob: str
    condition: str | None

    @property
    def guarded(self) -> bool:
        return self.condition in GUARDS


class DeleteLog:
    """Every delete the code under test sent, with its tag condition, single or batched.

    Pass it as `raw_request_hook=` to the blob clients under test; I3 then judges what was
    asked of the service, not only what disappeared.
    """

    def __init__(self, container_name: str) -> None:
        self._marker = f"/{container_name}/"
        self._lock = threading.Lock()
        self._requests: list[DeleteRequest] = []

    def __call__(self, request: Any) -> None:
        http = request.http_request
        if http.method == "DELETE":
            self._record(urlsplit(http.url).path, http.headers.get("x-ms-if-tags"))
        elif http.method == "POST" and "comp=batch" in http.url and isinstance(http.body, bytes):
            for path, headers in _BATCH_DELETE.findall(http.body):
                condition = _IF_TAGS.search(headers)
                self._record(
                    urlsplit(path.decode()).path,
                    condition.group(1).decode().strip() if condition else None,
                )

    def _record(self, path: str, condition: str | None) -> None:
        if self._marker not in path:
            return
        blob = unquote(path.split(self._marker, 1)[1])
        if blob:
            with self._lock:
                self._requests.append(DeleteRequest(blob, condition))

    def take(self) -> list[DeleteRequest]:
        """The deletes sent since the last call."""
        with self._lock:
            taken, self._requests = self._requests, []
        return taken


def snapshot(container: ContainerClient) -> dict[str, ListedBlob]:
    """The container as the invariants compare it before and after an operation."""
    return list_blobs(container)


def _result(invariant: str, offenders: Sequence[str]) -> InvariantResult:
    return InvariantResult(invariant, not offenders, ", ".join(offenders[:5]))


def instant_invariants(
    rows: Iterable[Document],
    before: Mapping[str, ListedBlob],
    after: Mapping[str, ListedBlob],
    deletes: Sequence[DeleteRequest] | None = None,
) -> list[InvariantResult]:
    """I1, I2, I3 and I6 for the step that led from `before` to `after`.

    With `deletes` (a DeleteLog's take), a blob may disappear only through a delete that
    carried a pending or retired guard, and no unguarded delete may be sent at all; without
    it, a blob may disappear only if `before` showed it pending or retired.
    """
    ready = [d for d in rows if d.status is Status.READY]
    gone = [name for name in before if name not in after]
    if deletes is None:
        unguarded = [n for n in gone if before[n].state not in (PENDING, RETIRED)]
    else:
        guarded = {d.blob for d in deletes if d.guarded}
        unguarded = sorted(
            {f"{d.blob} (delete without guard)" for d in deletes if not d.guarded}
            | {f"{n} (was {before[n].state or 'untagged'})" for n in gone if n not in guarded}
        )
    return [
        _result("I1", [d.name for d in ready if d.blob_name not in after]),
        _result(
            "I2",
            [
                f"{d.name} ({after[d.blob_name].state or 'untagged'})"
                for d in ready
                if d.blob_name in after and after[d.blob_name].state != COMMITTED
            ],
        ),
        _result("I3", unguarded),
        _result("I6", [n for n, b in before.items() if n in after and _rewritten(b, after[n])]),
    ]


def _rewritten(before: ListedBlob, after: ListedBlob) -> bool:
    """Whether the blob was written again between two listings: its ETag moved. One write
    moves it and keeps the bytes: `adopt` adding the identity to a blob that had none (Set Blob
    Metadata), told by the identity appearing while the service's MD5 of the bytes stays."""
    if after.etag == before.etag:
        return False
    identity_added = not before.identified and after.identity is not None
    same_bytes = before.content_md5 is not None and before.content_md5 == after.content_md5
    return not (identity_added and same_bytes)


@dataclass(frozen=True)
class Violation:
    moment: str
    result: InvariantResult


@dataclass
class InvariantWatch:
    """I1, I2, I3 and I6 judged at every instant it is asked, each against the one before.

    Use `watch.check` as the protocol's checkpoint (or wrap another checkpoint with
    `watch.then`), and call it after a crash and after every repair.
    """

    store: DocumentStore
    container: ContainerClient
    deletes: DeleteLog | None = None
    violations: list[Violation] = field(default_factory=list)
    moments: int = 0
    previous: dict[str, ListedBlob] = field(init=False)

    def __post_init__(self) -> None:
        self.previous = snapshot(self.container)
        if self.deletes is not None:
            self.deletes.take()

    def check(self, moment: str) -> list[InvariantResult]:
        current = snapshot(self.container)
        deletes = None if self.deletes is None else self.deletes.take()
        results = instant_invariants(self.store.all(), self.previous, current, deletes)
        self.previous = current
        self.moments += 1
        self.violations += [Violation(moment, r) for r in results if not r.holds]
        return results

    def then(self, checkpoint: Callable[[str], None]) -> Callable[[str], None]:
        """A checkpoint that checks first, then calls `checkpoint` (which may crash)."""

        def checked(step: str) -> None:
            self.check(step)
            checkpoint(step)

        return checked

    def summary(self) -> list[InvariantResult]:
        """One result per instant invariant: it holds if it held at every moment checked."""
        return [
            _result(
                invariant,
                [
                    f"after {v.moment}: {v.result.detail}"
                    for v in self.violations
                    if v.result.id == invariant
                ],
            )
            for invariant in INSTANT
        ]


def unreachable(
    rows: Iterable[Document], records: Iterable[BlobRecord], blobs: Mapping[str, ListedBlob]
) -> list[str]:
    """I5's offenders: blobs neither named by a row or a crash-window record nor tagged pending.

    A blob recorded by replace, delete or a refused publish is reachable: the sweeper deletes it
    from the record."""
    referenced = {d.blob_name for d in rows} | {r.blob_name for r in records}
    return [n for n, b in blobs.items() if n not in referenced and b.state != PENDING]


def unreachable_blobs(store: DocumentStore, container: ContainerClient) -> list[str]:
    """I5's offenders now, at any instant (a moment where no crash window is open)."""
    return unreachable(store.all(), store.records(), snapshot(container))


def check_invariants(
    store: DocumentStore,
    container: ContainerClient,
    before: Mapping[str, ListedBlob],
    stale_before: datetime,
    second_sweep: SweepReport,
    deletes: Sequence[DeleteRequest] | None = None,
) -> list[InvariantResult]:
    """All six, judging the current state against `before` (the state before the operation).

    I3 here sees only the net change from `before`; a watch that saw every step judges it
    more finely (a committed blob retired and then deleted is legitimate).
    """
    after = snapshot(container)
    rows = store.all()
    by_id = {r.id: r for r in instant_invariants(rows, before, after, deletes)}
    stale = [
        f"stale row {d.name}"
        for d in rows
        if d.status is Status.PENDING and d.created_utc < stale_before
    ]
    busy = ["second sweep changed rows or blobs"] if second_sweep.changed_anything else []
    return [
        by_id["I1"],
        by_id["I2"],
        by_id["I3"],
        _result("I4", [*stale, *busy]),
        _result("I5", unreachable(rows, store.records(), after)),
        by_id["I6"],
    ]
