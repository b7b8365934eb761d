"""The alerts: an action group and one Azure Monitor log search alert rule per way the nets can
silently stop holding.

Each rule is a KQL query over the Application Insights component's tables (`customEvents`,
`customMetrics`, `traces`), scoped to the component ("Create or edit a log search alert rule",
https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-create-log-alert-rule; resource:
https://learn.microsoft.com/azure/templates/microsoft.insights/scheduledqueryrules). Every name
a query filters on comes from `blob_safetynet/settings/signals.py`, the module the emitters use too, and a test
runs each query's filter against the telemetry the code really emits. docs/operations.md has
each rule's query, threshold and runbook.

Two kinds of rule: one fires when something was reported (a FAIL, sweep errors, a stuck lease,
an overdue canary), counted over one period of the emitter's schedule; the other fires when
nothing was reported (no sweep summary, no verification run) in two consecutive windows of one
period each (`failingPeriods` 2 of 2), so "older than twice the schedule" needs no window
longer than a day.
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
        return min(self.window, MAX_FREQUENCY)


def _dimension(name: str) -> str:
    return f'tostring(customDimensions["{name}"])'


def _trace_event(event: str) -> str:
    return f'traces\n| where message has "{event}"\n| extend e = parse_json(message)\n| where tostring(e.event) == "{event}"'


def alert_rules(sweep_period: timedelta, verify_period: timedelta) -> tuple[AlertRule, ...]:
    """The six rules for a sweeper and a verification timer firing at these periods."""
    sweep = max(sweep_period, MIN_WINDOW)
    verify = max(verify_period, MIN_WINDOW)
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
