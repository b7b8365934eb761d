"""The roll-forward's vocabulary and its plan: the steps it writes, the findings it leaves for a
person, and the plan file (JSON, `kind: safetynet-rollforward-plan`, `version: 1`) bound to the
account, endpoint, container, database and table it was made against (`recover.plan.Target`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from blob_safetynet.reconcile.listing import RepairRefusedError
from blob_safetynet.recover.plan import Target

PLAN_KIND: Final = "safetynet-rollforward-plan"
PLAN_VERSION: Final = 1

RESEAL: Final = "reseal"
DELETE: Final = "delete"
PUBLISH: Final = "publish"
MOVE: Final = "move"
REBUILD: Final = "rebuild"
RETIRE: Final = "retire"
RECORD: Final = "record"
ACTIONS: Final = (PUBLISH, RESEAL, DELETE, MOVE, REBUILD, RETIRE, RECORD)
"""In the order applied. Before any byte is read, the restored Pending rows whose puts finished
are published (one statement each: a move can then act on them even once their old blob is
gone) and the retired blobs that kept documents need are tagged committed, so the lifecycle
rule cannot take them while the rest runs."""

AMBIGUOUS: Final = "ambiguous"
UNVERIFIED: Final = "metadata does not match the bytes"
UNREADABLE: Final = "identity unreadable"
UNKNOWN: Final = "identity unknown"
NAME_TAKEN: Final = "name taken"
MISSING: Final = "blob missing"
PENDING_GONE: Final = "pending row, blob gone"

KEPT: Final = "deleted after the restore point; kept (the default)"
REAPPLIED: Final = (
    "deleted after the restore point; the delete is applied again (--reapply-deletes)"
)


@dataclass(frozen=True)
class Step:
    """One write the roll-forward makes, for one document."""

    action: str
    document: str
    name: str
    blob: str
    """The blob acted on: the one re-sealed, moved to, rebuilt from, recorded; for `delete` and
    `publish` the row's."""
    row_blob: str | None = None
    """The blob the row named when judged (None: no row)."""
    detail: str = ""
    taker: str | None = None
    """`delete` only: the blob of the later document that holds the name, whose bytes must
    bear out its metadata before the delete is applied."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "document": self.document,
            "name": self.name,
            "blob": self.blob,
            "row_blob": self.row_blob,
            "detail": self.detail,
            "taker": self.taker,
        }

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Step:
        return cls(
            str(entry["action"]),
            str(entry["document"]),
            str(entry["name"]),
            str(entry["blob"]),
            None if entry.get("row_blob") is None else str(entry["row_blob"]),
            str(entry.get("detail") or ""),
            None if entry.get("taker") is None else str(entry["taker"]),
        )


@dataclass(frozen=True)
class Finding:
    """A blob or row left for a person, with why."""

    kind: str
    blob: str
    document: str | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "blob": self.blob,
            "document": self.document,
            "detail": self.detail,
        }


@dataclass
class Judgement:
    steps: list[Step] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unknown: int = 0
    """Committed blobs no row nor record names and whose metadata names no document."""


def plan_dict(
    target: Target, judgement: Judgement, reapply_deletes: bool, now: datetime | None = None
) -> dict[str, Any]:
    counts = dict.fromkeys(ACTIONS, 0)
    for step in judgement.steps:
        counts[step.action] += 1
    return {
        "kind": PLAN_KIND,
        "version": PLAN_VERSION,
        "made_utc": (now or datetime.now(UTC)).isoformat(),
        "target": target.as_dict(),
        "reapply_deletes": reapply_deletes,
        "steps": [step.as_dict() for step in judgement.steps],
        "findings": [finding.as_dict() for finding in judgement.findings],
        "summary": {**counts, "left": len(judgement.findings)},
    }


def check_plan(plan: Mapping[str, Any], here: Target) -> list[Step]:
    """The plan's steps when it is a roll-forward plan made against `here`; RepairRefusedError
    (nothing written) otherwise, or when an entry is malformed."""
    if plan.get("kind") != PLAN_KIND or plan.get("version") != PLAN_VERSION:
        raise RepairRefusedError(
            "not a roll-forward plan (kind or version missing); nothing written"
        )
    made = plan.get("target")
    if not isinstance(made, Mapping):
        raise RepairRefusedError("the plan names no target; nothing written")
    for key, value in here.as_dict().items():
        if made.get(key) != value:
            raise RepairRefusedError(
                f"the plan was made against {key} {made.get(key)!r}, not {value!r}; nothing written"
            )
    entries = plan.get("steps")
    if not isinstance(entries, list) or not isinstance(plan.get("reapply_deletes"), bool):
        raise RepairRefusedError(
            "the plan has no `steps` list or `reapply_deletes`; nothing written"
        )
    steps = []
    for number, entry in enumerate(entries, start=1):
        if not (
            isinstance(entry, Mapping)
            and entry.get("action") in ACTIONS
            and all(isinstance(entry.get(key), str) for key in ("document", "name", "blob"))
            and all(
                entry.get(key) is None or isinstance(entry.get(key), str)
                for key in ("row_blob", "detail", "taker")
            )
        ):
            raise RepairRefusedError(f"plan step {number} is malformed; nothing written")
        steps.append(Step.from_dict(entry))
    return steps
