"""The alerts under mocks, and each alert query run against the telemetry the code emits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.infra.alerts import AlertRule, alert_rules, iso_duration, rounding_notes
from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.policies.continuous.run import verify_continuously
from blob_safetynet.policies.probes import ProbeSettings, Target
from blob_safetynet.policies.probes.liveness import PENDING_LIFECYCLE
from testkit.kql import UnsupportedQueryError, run_query
from testkit.telemetry import RecordedTelemetry
from tests.infra.harness import RAW_DEFAULTS, StackRun, run_stack, typed_principals

RULE = "azure-native:monitor:ScheduledQueryRule"
GROUP = "azure-native:monitor:ActionGroup"
INSIGHTS = "azure-native:applicationinsights:Component"
RULES = {rule.key: rule for rule in alert_rules(timedelta(minutes=5), timedelta(days=1))}
HOOK = "https://hooks.example.com/alert?token=s3cr3t"


@pytest.fixture(scope="module")
def stack() -> StackRun:
    return run_stack({"alertEmails": ["ops@example.com"], "alertWebhooks": [HOOK]})


def test_the_action_group_mails_and_posts_to_the_configured_receivers(stack: StackRun) -> None:
    """The action group has one email receiver per address and one webhook per URL, both with
    the common alert schema, and the webhook URL is a secret in the state."""
    group = stack.one(GROUP)

    assert [r["emailAddress"] for r in group.inputs["emailReceivers"]] == ["ops@example.com"]
    [hook] = group.inputs["webhookReceivers"]
    assert hook["serviceUri"] == HOOK
    assert hook["useCommonAlertSchema"] is True
    assert len(group.inputs["groupShortName"]) <= 12


def test_each_rule_is_registered_with_its_query_scope_and_action_group(stack: StackRun) -> None:
    """Seven log search alert rules, scoped to Application Insights, each sending to the action
    group, with the query, window and threshold blob_safetynet/infra/alerts.py defines."""
    rules = {res.name.removeprefix("alerts-"): res for res in stack.of_type(RULE)}
    insights = stack.one(INSIGHTS)

    assert set(rules) == set(RULES)
    for key, resource in rules.items():
        [condition] = resource.inputs["criteria"]["allOf"]
        assert condition["query"] == RULES[key].query
        assert condition["operator"] == RULES[key].operator
        assert resource.inputs["windowSize"] == iso_duration(RULES[key].window)
        assert resource.inputs["kind"] == "LogAlert"
        [scope] = resource.inputs["scopes"]
        assert scope.endswith(f"/providers/Microsoft.Insights/components/{insights.name}")
        assert resource.inputs["actions"]["actionGroups"]


def test_absence_rules_wait_two_periods_of_the_schedule(stack: StackRun) -> None:
    """The heartbeat and the verification-silence rules fire only after two consecutive windows
    of one schedule period each held no report: twice the schedule."""
    rules = {res.name.removeprefix("alerts-"): res for res in stack.of_type(RULE)}
    for key in ("heartbeat-stale", "verification-silent"):
        [condition] = rules[key].inputs["criteria"]["allOf"]
        assert condition["failingPeriods"] == {
            "numberOfEvaluationPeriods": 2.0,
            "minFailingPeriodsToAlert": 2.0,
        }
    assert rules["heartbeat-stale"].inputs["windowSize"] == "PT5M"
    assert rules["verification-silent"].inputs["windowSize"] == "P1D"


ALLOWED_FREQUENCIES = (
    *("PT1M", "PT5M", "PT10M", "PT15M", "PT30M", "PT45M"),
    *(f"PT{hours}H" for hours in range(1, 7)),
    "P1D",
)
"""evaluationFrequency values scheduled query rules take (terraform-provider-azurerm's
validation of azurerm_monitor_scheduled_query_rules_alert_v2, mirroring the service)."""
ALLOWED_WINDOWS = (*ALLOWED_FREQUENCIES, "P2D")


def accepted_schedules() -> list[str]:
    """Every schedule form `schedule_period` knows, for every step it could be given, kept
    when the config accepts it."""
    candidates = ["0 15 * * * *", "0 30 3 * * *"]
    candidates += [f"0 */{n} * * * *" for n in range(1, 100)]
    candidates += [f"0 7 */{n} * * *" for n in range(1, 100)]
    accepted = []
    for schedule in candidates:
        try:
            parse(typed_principals({**RAW_DEFAULTS, "sweeperSchedule": schedule}))
        except ConfigError:
            continue
        accepted.append(schedule)
    return accepted


def test_every_accepted_schedule_becomes_windows_and_frequencies_the_service_takes() -> None:
    """For each schedule the config accepts, as the sweeper's or the verifier's, every rule's
    window and evaluation frequency is one of the allowed values, and the window is never
    shorter than the schedule's period (rounded up, never down)."""
    schedules = accepted_schedules()
    assert len(schedules) > 20
    for schedule in schedules:
        period = parse(
            typed_principals({**RAW_DEFAULTS, "sweeperSchedule": schedule})
        ).sweeper_period
        for rules in (
            alert_rules(period, timedelta(days=1)),
            alert_rules(timedelta(minutes=5), period),
        ):
            for rule in rules:
                assert iso_duration(rule.window) in ALLOWED_WINDOWS, (schedule, rule.key)
                assert iso_duration(rule.frequency) in ALLOWED_FREQUENCIES, (schedule, rule.key)
                assert rule.frequency <= rule.window
        assert all(rule.window >= period for rule in alert_rules(period, period))


def test_a_schedule_between_allowed_windows_is_rounded_up_and_said_so() -> None:
    """Every 20 minutes and every 12 hours become PT30M and P1D windows, and the program says
    which schedule was rounded and to what."""
    stack = run_stack({"sweeperSchedule": "0 */20 * * * *", "verifySchedule": "0 0 */12 * * *"})
    rules = {res.name.removeprefix("alerts-"): res for res in stack.of_type(RULE)}

    assert rules["heartbeat-stale"].inputs["windowSize"] == "PT30M"
    assert rules["heartbeat-stale"].inputs["evaluationFrequency"] == "PT30M"
    assert rules["verification-silent"].inputs["windowSize"] == "P1D"
    assert rules["check-failed"].inputs["evaluationFrequency"] == "PT1H"
    notes = rounding_notes(timedelta(minutes=20), timedelta(hours=12))
    assert "sweeperSchedule fires every PT20M" in notes[0]
    assert "PT30M (rounded up" in notes[0]
    assert "verifySchedule fires every PT12H" in notes[1]
    assert "P1D (rounded up" in notes[1]
    assert rounding_notes(timedelta(minutes=5), timedelta(days=1)) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"alertEmails": ["not-an-address"]}, "alertEmails: 'not-an-address' is not an email"),
        ({"alertWebhooks": ["http://hooks.example.com/x?token=t0k"]}, "entry 1 is not an https"),
        ({"verifySchedule": "0 0 9-17 * * 1-5"}, "verifySchedule: '0 0 9-17 * * 1-5' does not"),
        ({"sweeperSchedule": "0 */7 * * * *"}, "sweeperSchedule: '0 */7 * * * *' does not fire"),
    ],
    ids=["email", "webhook-not-https", "verify-schedule-irregular", "sweep-schedule-irregular"],
)
def test_bad_alert_configuration_is_refused_naming_the_key(
    overrides: dict[str, Any], message: str
) -> None:
    """A malformed receiver or a schedule without a fixed period stops the program with the key
    and what is allowed; a refused webhook URL is never echoed (it may carry a token)."""
    with pytest.raises(ConfigError) as caught:
        parse(typed_principals({**RAW_DEFAULTS, **overrides}))

    assert message in str(caught.value)
    assert "t0k" not in str(caught.value)


@pytest.fixture
def recorded() -> Iterator[RecordedTelemetry]:
    recorder = RecordedTelemetry()
    yield recorder
    recorder.close()


def fires(rule: AlertRule, tables: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether the rule's condition holds over one window of these rows (Count of rows)."""
    count = len(run_query(rule.query, tables))
    return count < 1 if rule.absence else count > 0


def traces(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [{"message": record.getMessage()} for record in caplog.records]


def test_verification_queries_fire_on_what_a_failing_run_emits_and_not_on_a_quiet_one(
    service_client: BlobServiceClient, container: ContainerClient, recorded: RecordedTelemetry
) -> None:
    """Run the verification with an overdue canary: the FAIL and canary rules' queries find the
    run's own events and gauge, the silence rule sees the run; with no telemetry at all only
    the silence rule fires."""
    settings = ProbeSettings(pending_days=1)
    verify_continuously(
        Target(service_client, container.container_name), probes=[PENDING_LIFECYCLE]
    )
    later = datetime.now(UTC) + timedelta(days=4)
    verify_continuously(
        Target(service_client, container.container_name, settings=settings, now=lambda: later),
        probes=[PENDING_LIFECYCLE],
        telemetry=recorded.telemetry,
    )
    emitted = {
        "customEvents": recorded.custom_events(),
        "customMetrics": recorded.custom_metrics(),
        "traces": [],
    }
    quiet: dict[str, list[dict[str, Any]]] = {name: [] for name in emitted}

    [failed] = run_query(RULES["check-failed"].query, emitted)
    assert failed["check"] == PENDING_LIFECYCLE.id
    assert fires(RULES["canary-overdue"], emitted)
    assert not fires(RULES["verification-silent"], emitted)
    assert [key for key, rule in RULES.items() if fires(rule, quiet)] == [
        "heartbeat-stale",
        "verification-silent",
    ]


def test_a_query_outside_the_checked_subset_is_refused() -> None:
    """The evaluator refuses KQL it does not implement, so no query passes unchecked."""
    with pytest.raises(UnsupportedQueryError):
        run_query("customEvents\n| summarize count() by name", {"customEvents": []})


def test_operations_md_gives_each_rules_query_and_runbook() -> None:
    """docs/operations.md has a section per rule with its exact query and the three runbook
    parts, so the page cannot drift from what is deployed."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    for key, rule in RULES.items():
        section = page.split(f"\n### {key}\n", 1)[1].split("\n### ", 1)[0]
        assert f"```kusto\n{rule.query}\n```" in section, key
        for part in ("What it means", "How to confirm", "What to do"):
            assert f"**{part}:**" in section, (key, part)


def test_a_run_that_could_not_act_counts_as_silence(recorded: RecordedTelemetry) -> None:
    """A run whose verifier could not act reports, but proves nothing: the silence rule does
    not count its run event, so two such periods alert like no run at all."""
    record = {
        "run_id": "20261101T000000Z-000001",
        "checks": [],
        "incomplete": ["SNV-CREATE-ONLY: 403 AuthorizationPermissionMismatch"],
        "settings_errors": [],
        "leftovers": [],
        "canary": {"overdue": 0, "oldest_days": 0.0},
    }
    recorded.telemetry.report(record)
    complete = {**record, "run_id": "20261102T000000Z-000002", "incomplete": []}

    assert fires(RULES["verification-silent"], {"customEvents": recorded.custom_events()})
    recorded.telemetry.report(complete)
    assert not fires(RULES["verification-silent"], {"customEvents": recorded.custom_events()})
