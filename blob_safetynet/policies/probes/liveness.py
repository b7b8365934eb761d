"""What acts on its own schedule: the lifecycle backstop (by canary) and the sweeper (by heartbeat).

- Lifecycle: each run plants a small canary tagged `state=pending` and never deletes it. A canary
  older than the rule's days plus two (lifecycle acts in whole days and may start up to 24 h
  late) that still exists means the backstop does not hold. A canary found soft-deleted, deleted
  no sooner than the rule's days after it was planted (so by the rule, not by a person or a
  tool), with none alive past the deadline, shows it does. Until one is that old, nothing
  can be said, and the probe names the date from which it can.
  https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-overview
- Sweeper: `blob_safetynet/sweeper/heartbeat.py` rewrites a heartbeat blob after each run; it must be younger
  than three schedule periods.

These are the only reads of blobs this run did not create: names and creation times under
`.safetynet/verify/` (earlier runs' canaries) and the heartbeat blob. Neither is ever written or
deleted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient

from blob_safetynet.policies.probes.base import (
    Observation,
    Probe,
    Target,
    describe_refusal,
    failed,
    not_verifiable,
    passed,
    payload,
)
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.redaction import printable
from blob_safetynet.settings.vocabulary import (
    DEFAULT_TABLE,
    HEARTBEAT_BLOB,
    HEARTBEAT_FINISHED_FIELD,
    HEARTBEAT_TABLE_FIELD,
    VERIFY_PREFIX,
)

CANARY = "canary"
LIFECYCLE_SLACK = timedelta(days=2)
HEARTBEAT_PERIODS = 3
CLOCK_SKEW = timedelta(minutes=5)
"""How far ahead of this machine's clock the sweeper's may run before its heartbeat is suspect."""
MAX_HEARTBEAT_BYTES = 64 * 2**10
"""A heartbeat holds a time, a source and a few counts: some hundred bytes."""


@dataclass(frozen=True)
class CanaryCensus:
    """Every lifecycle canary of every run, judged at one instant against the rule's days."""

    alive: tuple[tuple[datetime, str], ...]
    """(planted, name) of each canary that still exists, oldest first."""
    overdue: tuple[tuple[datetime, str], ...]
    """Alive past the rule's days plus the slack: the backstop did not act."""
    collected: tuple[tuple[datetime, str], ...]
    """Soft-deleted no sooner than the rule's days after planting: the rule acted."""
    early: tuple[str, ...]
    """Soft-deleted sooner than the rule could act: something else deleted them."""
    deadline: timedelta

    def oldest_days(self, now: datetime) -> float:
        """Age in days of the oldest canary still alive (0 when none is)."""
        return (now - self.alive[0][0]).total_seconds() / 86400 if self.alive else 0.0


def canary_census(target: Target) -> CanaryCensus:
    """List every earlier run's canary under the verify prefix (soft-deleted ones included) and
    sort them by what they show at `target.now()`; this run's own canary was only just planted."""
    now = target.now()
    rule_days = timedelta(days=target.settings.pending_days)
    deadline = rule_days + LIFECYCLE_SLACK
    alive: list[tuple[datetime, str]] = []
    collected: list[tuple[datetime, str]] = []
    early: list[str] = []
    for item in target.container.list_blobs(name_starts_with=VERIFY_PREFIX, include=["deleted"]):
        if not item.name.endswith(f"/{CANARY}") or item.creation_time is None:
            continue
        if item.name.startswith(target.prefix):
            continue
        planted = item.creation_time.astimezone(UTC)
        if not item.deleted:
            alive.append((planted, item.name))
        elif item.deleted_time is not None and item.deleted_time - planted >= rule_days:
            collected.append((planted, item.name))
        else:
            # The rule cannot act before its days: something else deleted this one.
            early.append(item.name)
    alive.sort()
    return CanaryCensus(
        alive=tuple(alive),
        overdue=tuple(c for c in alive if now - c[0] > deadline),
        collected=tuple(sorted(collected)),
        early=tuple(early),
        deadline=deadline,
    )


def check_pending_lifecycle(target: Target) -> Observation:
    target.create(target.blob(CANARY), payload("canary"), canary=True)
    census = canary_census(target)
    now = target.now()
    if census.overdue:
        planted, name = census.overdue[0]
        return failed(
            f"canary {name} planted {planted:%Y-%m-%d} still exists after {(now - planted).days} "
            f"days; a rule deleting pending blobs after {target.settings.pending_days} days would "
            "have removed it"
        )
    if census.collected:
        planted, name = census.collected[-1]
        return passed(
            f"canary {name} planted {planted:%Y-%m-%d} was deleted no sooner than "
            f"{target.settings.pending_days} days later (it is soft-deleted)"
        )
    oldest = census.alive[0][0] if census.alive else now
    # This run's canary, when none is older, is the one that will prove the rule.
    reason = (
        f"; {target.emulator_reason()}, which has no lifecycle management: never provable here"
        if target.emulator_host
        else ""
    )
    elsewhere = (
        f"; {len(census.early)} canary(ies) deleted by something else, sooner than the rule "
        f"could (first: {census.early[0]})"
        if census.early
        else ""
    )
    return not_verifiable(
        f"no canary is older than {target.settings.pending_days} + {LIFECYCLE_SLACK.days} days "
        f"yet; the oldest, planted {oldest:%Y-%m-%d}, proves the rule from "
        f"{oldest + census.deadline:%Y-%m-%d}{elsewhere}{reason}"
    )


PENDING_LIFECYCLE = Probe(
    id="SNV-PENDING-LIFECYCLE",
    title="The lifecycle rule deletes blobs left pending (canary)",
    proves=("SN-PENDING-LIFECYCLE",),
    action=(
        "plants a canary tagged pending (never deleted by verify) and lists earlier canaries: "
        "one alive past the rule's days + 2 fails, one found soft-deleted, deleted no sooner than the rule's days after planting, passes"
    ),
    reference="https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-overview",
    requests=2,
    on_emulator="NOT_VERIFIABLE: no lifecycle management",
    on_live="NOT_VERIFIABLE until a canary is days + 2 old; then PASS (found soft-deleted by the rule) or FAIL (still there)",
    run=check_pending_lifecycle,
)


def _heartbeat(data: bytes) -> tuple[dict[str, Any], datetime]:
    """The heartbeat's fields and finish time; anyone who may write the blob wrote them."""
    what = f"the heartbeat at {HEARTBEAT_BLOB}"
    body = untrusted.load_json(data, what, max_bytes=MAX_HEARTBEAT_BYTES)
    if not isinstance(body, dict):
        raise untrusted.UntrustedInputError(f"{what} is not a JSON object")
    return body, untrusted.utc_time(
        body.get(HEARTBEAT_FINISHED_FIELD), f"its {HEARTBEAT_FINISHED_FIELD}"
    )


def _first_bytes(blob: BlobClient, length: int) -> bytes:
    """At most `length` bytes of a blob, by a ranged read: an oversized heartbeat is never
    fetched whole. A range on an empty blob is 416 InvalidRange (Get Blob,
    https://learn.microsoft.com/rest/api/storageservices/get-blob): no bytes."""
    try:
        return blob.download_blob(offset=0, length=length).readall()
    except HttpResponseError as error:
        if error.status_code == 416:
            return b""
        raise


def check_sweeper_heartbeat(target: Target) -> Observation:
    heartbeat = target.container.get_blob_client(HEARTBEAT_BLOB)
    try:
        body, finished = _heartbeat(_first_bytes(heartbeat, MAX_HEARTBEAT_BYTES + 1))
    except ResourceNotFoundError:
        return not_verifiable(
            f"no heartbeat at {HEARTBEAT_BLOB}: no sweeper has finished a run against this "
            "container yet (or it predates heartbeats)"
        )
    except HttpResponseError as error:
        why = " (this identity may not read it)" if error.status_code == 403 else ""
        return not_verifiable(f"the heartbeat could not be read: {describe_refusal(error)}{why}")
    except untrusted.UntrustedInputError as error:
        return failed(f"the heartbeat is unreadable: {error}")
    age = target.now() - finished
    if age < -CLOCK_SKEW:
        return failed(
            f"the heartbeat is dated {finished:%Y-%m-%d %H:%M:%S} UTC, {_duration(-age)} in the "
            "future: it cannot show when the sweeper last ran"
        )
    allowed = HEARTBEAT_PERIODS * target.settings.sweeper_period
    counts = ", ".join(
        f"{key} {value}" for key, value in sorted(body.items()) if isinstance(value, int)
    )
    source = body.get("source", "?")
    # A heartbeat from before tables were named was written by a sweeper of the default table.
    table = body.get(HEARTBEAT_TABLE_FIELD, DEFAULT_TABLE)
    expected = target.settings.sweeper_table
    if expected is not None and table != expected:
        return failed(
            f"the last sweeper run ({source}) swept table '{printable(str(table))}', not "
            f"'{expected}': no heartbeat shows that table is swept"
        )
    if age > allowed:
        return failed(
            f"the last sweeper run ({source}) finished {finished:%Y-%m-%d %H:%M:%S} UTC, "
            f"{_duration(age)} ago: more than {HEARTBEAT_PERIODS} periods of {_duration(target.settings.sweeper_period)}"
        )
    return passed(
        f"the last sweeper run ({source}, table '{printable(str(table))}') finished "
        f"{_duration(age)} ago ({counts})"
    )


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds // 60}m{seconds % 60}s"


SWEEPER_HEARTBEAT = Probe(
    id="SNV-SWEEPER-HEARTBEAT",
    title="The deployed sweeper is alive",
    proves=(),
    action=(
        f"reads the sweeper's heartbeat ({HEARTBEAT_BLOB}); its last run must be within "
        f"{HEARTBEAT_PERIODS} schedule periods"
    ),
    reference="blob_safetynet/sweeper/heartbeat.py",
    requests=1,
    on_emulator="NOT_VERIFIABLE until a sweeper ran; PASS after `safetynet sweep`",
    on_live="PASS within 3 periods; FAIL when stale; NOT_VERIFIABLE before the first run",
    run=check_sweeper_heartbeat,
)
