"""Invariants I1-I6 of DESIGN.md section 2, checked against a real table and container."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from azure.storage.blob import ContainerClient

from safetynet.constants import PENDING, RETIRED
from sweeper.reconcile import ListedBlob, list_blobs
from sweeper.store import DocumentStore, Status
from sweeper.sweep import SweepReport

DESCRIPTIONS = {
    "I1": "no Ready row points to a missing blob",
    "I2": "no blob of a Ready row carries state=pending",
    "I3": "only pending or retired blobs were deleted",
    "I4": "no stale Pending row remains and a second sweep changes nothing",
    "I5": "every blob is reachable from a row or tagged pending",
    "I6": "no existing bytes were overwritten",
}


@dataclass(frozen=True)
class InvariantResult:
    id: str
    holds: bool
    detail: str

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.id]


def snapshot(container: ContainerClient) -> dict[str, ListedBlob]:
    """The container as the invariants compare it before and after an operation."""
    return list_blobs(container)


def check_invariants(
    store: DocumentStore,
    container: ContainerClient,
    before: Mapping[str, ListedBlob],
    stale_before: datetime,
    second_sweep: SweepReport,
) -> list[InvariantResult]:
    """Judge the current state against `before`, a snapshot taken before the crash and sweep."""
    after = snapshot(container)
    rows = store.all()
    # A blob recorded by replace or delete is reachable: the sweeper deletes it from the record.
    referenced = {d.blob_name for d in rows} | {r.blob_name for r in store.records()}
    ready = [d for d in rows if d.status is Status.READY]

    def result(invariant: str, offenders: list[str]) -> InvariantResult:
        return InvariantResult(invariant, not offenders, ", ".join(offenders[:5]))

    return [
        result("I1", [d.name for d in ready if d.blob_name not in after]),
        result("I2", [d.name for d in ready if after.get(d.blob_name, _NONE).state == PENDING]),
        # A committed blob may go only after no row references it (replace, delete, orphan).
        result(
            "I3",
            [
                name
                for name, blob in before.items()
                if name not in after and blob.state not in (PENDING, RETIRED) and name in referenced
            ],
        ),
        result(
            "I4",
            [
                *(
                    f"stale row {d.name}"
                    for d in rows
                    if d.status is Status.PENDING and d.created_utc < stale_before
                ),
                *(["second sweep changed rows or blobs"] if second_sweep.changed_anything else []),
            ],
        ),
        result(
            "I5",
            [n for n, b in after.items() if n not in referenced and b.state != PENDING],
        ),
        result(
            "I6",
            [n for n, b in before.items() if n in after and after[n].etag != b.etag],
        ),
    ]


_NONE = ListedBlob("", "", datetime.min, "")
