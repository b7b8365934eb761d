"""The names of everything the deployed app reports to Application Insights, defined once.

The emitters (the sweep Function's JSON traces, continuous verification's custom events and
metrics) and the alert rules' queries (blob_safetynet/infra/alerts.py) both import these, so a renamed event
cannot leave an alert watching for a name nobody sends any more. Standard library only: the
bottom layer (tests/test_boundaries.py).

Custom events and metrics go through OpenTelemetry: the Azure Monitor exporter turns a log record
carrying the attribute `microsoft.custom_event.name` into a row of `customEvents` with that name,
and every other attribute into `customDimensions`
(https://learn.microsoft.com/azure/azure-monitor/app/opentelemetry-add-modify?tabs=python#send-custom-events);
a metric becomes rows of `customMetrics` named as the instrument
(https://learn.microsoft.com/azure/azure-monitor/app/opentelemetry-add-modify?tabs=python#add-custom-metrics).
"""

from typing import Final

CUSTOM_EVENT_NAME_ATTRIBUTE: Final = "microsoft.custom_event.name"
"""The log-record attribute the Azure Monitor exporter reads as a custom event's name."""

# The sweep Function's traces: the host forwards the message text, which is JSON with `event`.
SWEEP_FINISHED_EVENT: Final = "safetynet.sweep.finished"
"""Logged after every sweep, at ERROR when rows could not be swept."""
SWEEP_ERRORS_FIELD: Final = "errors"
"""The summary's count of stale rows that could not be swept."""
READY_SAMPLED_FIELD: Final = "ready_sampled"
"""The summary's count of Ready rows the tick sampled (blob_safetynet/recover/sample.py)."""
READY_MISSING_FIELD: Final = "ready_missing"
"""The sweep timer's metric of lost documents: per tick, the sampled Ready rows whose blob is
missing (the row read again). Absent when the sample could not be read."""
SWEEP_LEASE_STUCK_EVENT: Final = "safetynet.sweep.lease_stuck"
"""Logged when the sweeper lease has been held past its limit: no sweep is happening."""

# Continuous verification: one event per check, one per run, and metrics per run.
CHECK_EVENT: Final = "safetynet.verify.check"
"""One custom event per probe and per settings rule of a run."""
RUN_EVENT: Final = "safetynet.verify.run"
"""One custom event per verification run: its absence is what the silence alert sees."""
RUN_ID: Final = "safetynet.run_id"
CHECK_ID: Final = "safetynet.check_id"
"""A probe id (SNV-...) or a settings rule id (SN-...)."""
CHECK_KIND: Final = "safetynet.check_kind"
OUTCOME: Final = "safetynet.outcome"
DETAIL: Final = "safetynet.detail"
INCOMPLETE: Final = "safetynet.incomplete"
"""On the run event: how many things the run could not do (act, read a setting, clean up); a run
with any is no proof, and the silence alert does not count it."""
KIND_PROBE: Final = "probe"
KIND_RULE: Final = "rule"
FAILED: Final = "FAIL"
"""The outcome text probes and rules share for a failure."""
FAILURES_METRIC: Final = "safetynet.verify.failures"
"""Per run: how many checks failed."""
CANARY_OVERDUE_METRIC: Final = "safetynet.verify.canary_overdue"
"""Per run: lifecycle canaries still alive past the rule's days plus the slack."""
CANARY_OLDEST_DAYS_METRIC: Final = "safetynet.verify.canary_oldest_days"
"""Per run: the age in days of the oldest canary still alive."""
TIME_TO_RECOVER_METRIC: Final = "safetynet.verify.time_to_recover_s"
"""Per run whose recovery drill passed: seconds from the recovery's start to its bytes checked."""
