"""Continuous verification against Azurite: its history blobs, its telemetry, the canary's life."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.policies.continuous.history import HistoryError, read_history, write_record
from blob_safetynet.policies.continuous.run import SettingsVerdict, verify_continuously
from blob_safetynet.policies.probes import PROBES, ProbeSettings, Target
from blob_safetynet.policies.probes.liveness import PENDING_LIFECYCLE, SWEEPER_HEARTBEAT
from blob_safetynet.policies.rules import RULES, Finding, Outcome
from blob_safetynet.settings import signals
from blob_safetynet.settings.vocabulary import HISTORY_PREFIX
from testkit.service_doubles import soft_deleting_service
from testkit.telemetry import RecordedTelemetry

LIFE = (PENDING_LIFECYCLE, SWEEPER_HEARTBEAT)
"""Two cheap probes: a run of these is what the canary tests need."""


@pytest.fixture
def recorded() -> Iterator[RecordedTelemetry]:
    recorder = RecordedTelemetry()
    yield recorder
    recorder.close()


def at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def test_a_run_writes_one_history_blob_and_one_event_per_check(
    service_client: BlobServiceClient, container: ContainerClient, recorded: RecordedTelemetry
) -> None:
    """Every probe and every settings rule of a run becomes one custom event carrying its
    outcome, its id and the run id, and the same checks land in the run's history blob."""
    finding = Finding(RULES[0], "acct", None, Outcome.FAIL, "soft delete is off")
    target = Target(service_client, container.container_name)

    record = verify_continuously(
        target,
        audit=lambda: SettingsVerdict([finding], []),
        telemetry=recorded.telemetry,
    )

    events = recorded.events(signals.CHECK_EVENT)
    assert [(e[signals.CHECK_KIND], e[signals.CHECK_ID]) for e in events] == [
        *((signals.KIND_PROBE, probe.id) for probe in PROBES),
        (signals.KIND_RULE, RULES[0].id),
    ]
    assert {e[signals.RUN_ID] for e in events} == {target.run_id}
    assert events[-1][signals.OUTCOME] == "FAIL"
    [run_event] = recorded.events(signals.RUN_EVENT)
    assert run_event[signals.RUN_ID] == target.run_id
    assert recorded.gauge(signals.FAILURES_METRIC) >= 1
    stored = json.loads(container.get_blob_client(record["history_blob"]).download_blob().readall())
    assert record["history_blob"] == f"{HISTORY_PREFIX}{target.run_id}.json"
    assert [c["id"] for c in stored["checks"]] == [e[signals.CHECK_ID] for e in events]


def test_a_history_record_is_never_rewritten(
    service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """The history is append-only: a second record under a run id already written is refused
    and the first stays as it was."""
    record = verify_continuously(Target(service_client, container.container_name), probes=LIFE)
    forged = {**record, "checks": []}

    with pytest.raises(HistoryError, match=r"409|412"):
        write_record(container, forged)

    [kept] = read_history(container).records
    assert kept["checks"] == record["checks"]


def test_history_and_probe_blobs_are_the_only_things_a_run_leaves(
    service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """After a run only its canary and its history record remain: probe blobs are cleaned up."""
    target = Target(service_client, container.container_name)

    verify_continuously(target)

    assert sorted(b.name for b in container.list_blobs()) == sorted(
        [f"{HISTORY_PREFIX}{target.run_id}.json", f"{target.prefix}canary"]
    )


def canary_runs(
    account: BlobServiceClient, container: str, days: int, *moments: datetime
) -> list[dict[str, Any]]:
    settings = ProbeSettings(pending_days=days)
    return [
        verify_continuously(
            Target(account, container, settings=settings, now=at(moment)), probes=LIFE
        )
        for moment in moments
    ]


def lifecycle(record: dict[str, Any]) -> dict[str, Any]:
    [check] = [c for c in record["checks"] if c["id"] == PENDING_LIFECYCLE.id]
    return check


def test_a_canary_left_alive_past_the_rules_days_turns_the_lifecycle_check_to_fail(
    service_client: BlobServiceClient, container: ContainerClient, recorded: RecordedTelemetry
) -> None:
    """Planted: NOT_VERIFIABLE, nothing overdue. Still NOT_VERIFIABLE the day the rule is due;
    alive past the days plus the slack: overdue, FAIL, and the overdue gauge says so."""
    now = datetime.now(UTC)
    planted, due, overdue = canary_runs(
        service_client,
        container.container_name,
        7,
        now,
        now + timedelta(days=8),
        now + timedelta(days=10),
    )

    assert lifecycle(planted)["outcome"] == "NOT_VERIFIABLE"
    assert planted["canary"] == {
        "alive": 0,
        "overdue": 0,
        "collected": 0,
        "early": 0,
        "oldest_days": 0.0,
    }
    assert lifecycle(due)["outcome"] == "NOT_VERIFIABLE"
    assert due["canary"]["overdue"] == 0
    assert lifecycle(overdue)["outcome"] == "FAIL"
    # The service stamps canaries with its own clock: both earlier ones were planted just now.
    assert overdue["canary"]["overdue"] == 2
    assert overdue["canary"]["oldest_days"] >= 10
    recorded.telemetry.report(overdue)
    assert recorded.gauge(signals.CANARY_OVERDUE_METRIC) == 2


def test_a_canary_collected_by_the_rule_proves_it_and_keeps_it_proven(
    azurite: Azurite, container: ContainerClient
) -> None:
    """Once the rule has deleted the canaries (found soft-deleted, deleted the rule's days after
    planting), the check turns PASS by itself and stays PASS on the following runs."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    name = container.container_name
    # The double dates each delete 7 days after the blob's creation: the rule's own timing.
    with soft_deleting_service(azurite.port, admin, timedelta(days=7)) as double:
        account = BlobServiceClient.from_connection_string(double.connection_string)
        now = datetime.now(UTC)
        records = []
        for day in (0, 8, 9):
            [record] = canary_runs(account, name, 7, now + timedelta(days=day))
            records.append(record)
            for blob in container.list_blobs():
                if blob.name.endswith("/canary"):
                    account.get_blob_client(name, blob.name).delete_blob()

    first, proven, still = records
    assert lifecycle(first)["outcome"] == "NOT_VERIFIABLE"
    assert lifecycle(proven)["outcome"] == "PASS", lifecycle(proven)["detail"]
    assert lifecycle(still)["outcome"] == "PASS"
    assert still["canary"]["collected"] == 2


def test_a_canary_deleted_by_something_else_proves_nothing(
    azurite: Azurite, container: ContainerClient
) -> None:
    """A canary deleted at once (not by the rule) is counted as such and leaves the check
    NOT_VERIFIABLE: the failed canary is never read as the rule's proof."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with soft_deleting_service(azurite.port, admin) as double:
        account = BlobServiceClient.from_connection_string(double.connection_string)
        now = datetime.now(UTC)
        canary_runs(account, container.container_name, 7, now)
        canary = next(b.name for b in container.list_blobs() if b.name.endswith("/canary"))
        account.get_blob_client(container.container_name, canary).delete_blob()
        [later] = canary_runs(account, container.container_name, 7, now + timedelta(days=8))

    assert lifecycle(later)["outcome"] == "NOT_VERIFIABLE"
    assert later["canary"]["early"] == 1
    assert "deleted by something else" in lifecycle(later)["detail"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"\x00not json", "not JSON"),
        (b'{"schema": "other"}', "not a safetynet.verify.history/1 record"),
        (
            b'{"schema": "safetynet.verify.history/1", "run_id": "r", "checks": [{"id": 1}]}',
            "a check without",
        ),
        (b"[" * 100_000, "not JSON"),
    ],
    ids=["binary", "foreign-schema", "bad-check", "deep-nesting"],
)
def test_history_reading_rejects_what_is_not_a_record(
    container: ContainerClient, body: bytes, why: str
) -> None:
    """A blob under the history prefix that is not a record is named and skipped, never trusted
    and never a crash."""
    container.upload_blob(f"{HISTORY_PREFIX}20260101T000000Z-abcdef.json", body)

    history = read_history(container)

    assert history.records == []
    [rejected] = history.rejected
    assert why in rejected


def test_history_reading_keeps_the_newest_records_up_to_its_limit(
    service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """With more records than the limit, the newest are read, oldest first."""
    days = [datetime(2026, 11, day, tzinfo=UTC) for day in (1, 2, 3)]
    runs = [
        verify_continuously(
            Target(service_client, container.container_name, run_id=f"{d:%Y%m%dT%H%M%SZ}-00000{i}"),
            probes=LIFE,
        )
        for i, d in enumerate(days)
    ]

    history = read_history(container, limit=2)

    assert [r["run_id"] for r in history.records] == [r["run_id"] for r in runs[1:]]


def test_a_runs_id_is_dated_by_the_runs_clock(service_client: BlobServiceClient) -> None:
    """A run's id (and so its history blob's place in the order) comes from the clock the run
    is given, not from this machine's: records of runs on a moved clock sort as the runs did."""
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    target = Target(service_client, "unused", now=at(moment))

    assert target.run_id.startswith("20260102T030405Z-")
