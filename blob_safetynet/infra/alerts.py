"""The alerts: an action group and one Azure Monitor log search alert rule per way the nets can
silently stop holding.

Each rule is a KQL query over the Application Insights component's tables (`customEvents`,
`customMetrics`, `traces`), scoped to the component ("Create or edit a log search alert rule",
https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-create-log-alert-rule; resource:
https://learn.microsoft.com/azure/templates/microsoft.insights/scheduledqueryrules). Every name
a query filters on comes from `blob_safetynet/settings/signals.py`, the module the emitters use too, and a test
runs each query's filter against the telemetry the code really emits. docs/operations.md has
each rule's query, threshold and runbook.

Two kinds of rule: one fires when something was reported (a FAIL, sweep errors, Ready rows
whose blob is missing, a stuck lease, an overdue canary), counted over one period of the emitter's schedule; the other fires when
nothing was reported (no sweep summary, no verification run) in two consecutive windows of one
period each (`failingPeriods` 2 of 2), so "older than twice the schedule" needs no window
longer than a day.

Scheduled query rules take only some durations: `evaluationFrequency` PT1M, PT5M, PT10M, PT15M,
PT30M, PT45M, PT1H to PT6H or P1D, and `windowSize` the same or P2D (ISO 8601 durations,
"Scheduled Query Rules - Create Or Update",
https://learn.microsoft.com/rest/api/monitor/scheduled-query-rules/create-or-update; the lists as
terraform-provider-azurerm validates them for `azurerm_monitor_scheduled_query_rules_alert_v2`,
internal/services/monitor/monitor_scheduled_query_rules_alert_v2_resource.go, PR 18960). A period
between them (every 20 minutes, every 8 or 12 hours) is rounded up to the next allowed value,
never down: a longer window still holds a report, while a window shorter than the schedule's
period would be empty between two runs and a silence rule would fire on a healthy schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import pulumi
from pulumi_azure_native import monitor

from blob_safetynet.settings import signals

MIN_WINDOW: Final = timedelta(minutes=5)
MAX_FREQUENCY: Final = timedelta(hours=1)
EVALUATION_FREQUENCIES: Final = (
    *(timedelta(minutes=m) for m in (1, 5, 10, 15, 30, 45)),
    *(timedelta(hours=h) for h in range(1, 7)),
    timedelta(days=1),
)
"""Every `evaluationFrequency` a scheduled query rule accepts (module docstring)."""
WINDOW_SIZES: Final = (*EVALUATION_FREQUENCIES, timedelta(days=2))
"""Every `windowSize` a scheduled query rule accepts."""
SHORT_NAME: Final = "safetynet"
"""An action group's short name (at most 12 characters) is what SMS and email subjects show."""


@dataclass(frozen=True)
class AlertRule:
    key: str
    title: str
    query: str
    operator: str
    """GreaterThan: fires on any row; LessThan: fires when a window holds none."""
    window: timedelta
    severity: int
    signal: str
    """The event or metric name the query counts (the one source of truth, blob_safetynet/settings/signals.py)."""

    @property
    def absence(self) -> bool:
        return self.operator == "LessThan"

    @property
    def frequency(self) -> timedelta:
        return round_up(min(self.window, MAX_FREQUENCY), EVALUATION_FREQUENCIES)


def round_up(value: timedelta, allowed: tuple[timedelta, ...]) -> timedelta:
    """The smallest allowed duration at least `value`; never a shorter one."""
    for candidate in allowed:
        if candidate >= value:
            return candidate
    raise ValueError(
        f"{iso_duration(value)} is longer than any allowed ({iso_duration(allowed[-1])})"
    )


def alert_window(period: timedelta) -> timedelta:
    """One schedule period as a rule's window: at least MIN_WINDOW, rounded up to an allowed size."""
    return round_up(max(period, MIN_WINDOW), WINDOW_SIZES)


def rounding_notes(sweep_period: timedelta, verify_period: timedelta) -> list[str]:
    """What the rules' windows say about a schedule whose period is not itself allowed."""
    notes = []
    for key, period in (("sweeperSchedule", sweep_period), ("verifySchedule", verify_period)):
        window = alert_window(period)
        if window != max(period, MIN_WINDOW):
            notes.append(
                f"{key} fires every {iso_duration(period)}, which scheduled query rules do not "
                f"take as a window: its alerts use {iso_duration(window)} (rounded up, never "
                f"down), so a silence alert fires after {iso_duration(2 * window)} without a "
                "report rather than after two periods"
            )
    return notes


def _dimension(name: str) -> str:
    return f'tostring(customDimensions["{name}"])'


def _trace_event(event: str) -> str:
    return f'traces\n| where message has "{event}"\n| extend e = parse_json(message)\n| where tostring(e.event) == "{event}"'


def alert_rules(sweep_period: timedelta, verify_period: timedelta) -> tuple[AlertRule, ...]:
    """The seven rules for a sweeper and a verification timer firing at these periods."""
    sweep = alert_window(sweep_period)
    verify = alert_window(verify_period)
    return (
        AlertRule(
            "check-failed",
            "A verification probe or settings rule failed",
            f'customEvents\n| where name == "{signals.CHECK_EVENT}"\n'
            f'| where {_dimension(signals.OUTCOME)} == "{signals.FAILED}"\n'
            f"| extend check = {_dimension(signals.CHECK_ID)}, "
            f"run = {_dimension(signals.RUN_ID)}",
            "GreaterThan",
            verify,
            1,
            signals.CHECK_EVENT,
        ),
        AlertRule(
            "sweep-errors",
            "The sweeper left stale rows unswept",
            f"{_trace_event(signals.SWEEP_FINISHED_EVENT)}\n"
            f"| where toint(e.{signals.SWEEP_ERRORS_FIELD}) > 0",
            "GreaterThan",
            sweep,
            2,
            signals.SWEEP_FINISHED_EVENT,
        ),
        AlertRule(
            "ready-missing",
            "Ready documents have lost their blobs: recover them before retention runs out",
            f"{_trace_event(signals.SWEEP_FINISHED_EVENT)}\n"
            f"| where toint(e.{signals.READY_MISSING_FIELD}) > 0",
            "GreaterThan",
            sweep,
            1,
            signals.SWEEP_FINISHED_EVENT,
        ),
        AlertRule(
            "heartbeat-stale",
            "No sweep has finished for two schedule periods",
            _trace_event(signals.SWEEP_FINISHED_EVENT),
            "LessThan",
            sweep,
            1,
            signals.SWEEP_FINISHED_EVENT,
        ),
        AlertRule(
            "canary-overdue",
            "A lifecycle canary outlived the rule's days: pending blobs are not being deleted",
            f'customMetrics\n| where name == "{signals.CANARY_OVERDUE_METRIC}"\n| where value > 0',
            "GreaterThan",
            verify,
            1,
            signals.CANARY_OVERDUE_METRIC,
        ),
        AlertRule(
            "lease-stuck",
            "The sweeper lease is held past its limit: no sweep is happening",
            _trace_event(signals.SWEEP_LEASE_STUCK_EVENT),
            "GreaterThan",
            sweep,
            1,
            signals.SWEEP_LEASE_STUCK_EVENT,
        ),
        AlertRule(
            "verification-silent",
            "Continuous verification has not completed a run for two schedule periods",
            f'customEvents\n| where name == "{signals.RUN_EVENT}"\n'
            f"| where toint({_dimension(signals.INCOMPLETE)}) == 0",
            "LessThan",
            verify,
            1,
            signals.RUN_EVENT,
        ),
    )


def iso_duration(value: timedelta) -> str:
    """`PT5M`, `PT1H`, `P1D`: whole minutes, in the form ARM's duration fields take."""
    minutes = int(value.total_seconds() // 60)
    if minutes % 1440 == 0:
        return f"P{minutes // 1440}D"
    if minutes % 60 == 0:
        return f"PT{minutes // 60}H"
    return f"PT{minutes}M"


class Alerts(pulumi.ComponentResource):
    """The action group (email and webhook receivers) and the scheduled query rules."""

    action_group: monitor.ActionGroup
    rules: dict[str, monitor.ScheduledQueryRule]

    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        insights_id: pulumi.Input[str],
        emails: Sequence[str],
        webhooks: Sequence[str],
        sweep_period: timedelta,
        verify_period: timedelta,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:alerts:Alerts", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if not emails and not webhooks:
            pulumi.log.warn(
                "alertEmails and alertWebhooks are empty: the alert rules fire, but notify "
                "nobody (they show in the portal only)",
                resource=self,
            )
        for note in rounding_notes(sweep_period, verify_period):
            pulumi.log.warn(note, resource=self)
        self.action_group = monitor.ActionGroup(
            f"{name}-group",
            action_group_name=f"safetynet-{name}",
            resource_group_name=resource_group_name,
            location="Global",
            group_short_name=SHORT_NAME,
            enabled=True,
            email_receivers=[
                monitor.MicrosoftCommonEmailReceiverArgs(
                    name=f"email-{number}", email_address=address, use_common_alert_schema=True
                )
                for number, address in enumerate(emails, start=1)
            ],
            webhook_receivers=[
                monitor.WebhookReceiverArgs(
                    name=f"webhook-{number}",
                    service_uri=pulumi.Output.secret(uri),
                    use_common_alert_schema=True,
                )
                for number, uri in enumerate(webhooks, start=1)
            ],
            opts=child,
        )
        self.rules = {
            rule.key: self._rule(name, rule, resource_group_name, location, insights_id, child)
            for rule in alert_rules(sweep_period, verify_period)
        }
        self.register_outputs({"actionGroupId": self.action_group.id})

    def _rule(
        self,
        name: str,
        rule: AlertRule,
        resource_group_name: pulumi.Input[str],
        location: str,
        insights_id: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> monitor.ScheduledQueryRule:
        periods = 2 if rule.absence else 1
        return monitor.ScheduledQueryRule(
            f"{name}-{rule.key}",
            rule_name=f"safetynet-{rule.key}",
            resource_group_name=resource_group_name,
            location=location,
            kind="LogAlert",
            display_name=f"safetynet: {rule.title}",
            description=f"Runbook: docs/operations.md#{rule.key}",
            enabled=True,
            scopes=[insights_id],
            severity=rule.severity,
            window_size=iso_duration(rule.window),
            evaluation_frequency=iso_duration(rule.frequency),
            # One notification per window, not one per evaluation of the same rows.
            mute_actions_duration=None if rule.absence else iso_duration(rule.window),
            auto_mitigate=rule.absence,
            criteria=monitor.ScheduledQueryRuleCriteriaArgs(
                all_of=[
                    monitor.ConditionArgs(
                        query=rule.query,
                        time_aggregation="Count",
                        operator=rule.operator,
                        threshold=1 if rule.absence else 0,
                        failing_periods=monitor.ConditionFailingPeriodsArgs(
                            number_of_evaluation_periods=periods,
                            min_failing_periods_to_alert=periods,
                        ),
                    )
                ]
            ),
            actions=monitor.ActionsArgs(action_groups=[self.action_group.id]),
            opts=child,
        )
