"""Continuous verification: the probes and the settings audit on a schedule, with a record of each run.

One run = every probe against the target (with the identity in use, the deployed app's verifier
identity, limited by ABAC to `.safetynet/verify/`), the settings rules on the account when an
audit is given, and a census of every lifecycle canary ever planted. The result becomes one JSON
history record (blob_safetynet/policies/continuous/history.py) and one custom event per check plus per-run metrics in
Application Insights (names: blob_safetynet/settings/signals.py, which the alert rules query as well),
with the recovery drill's time to recover (`time_to_recover_s`, None unless it passed). The
Function's timer and the tests call `verify_continuously` alike; only the clock, the telemetry
providers and the audit are handed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider

from blob_safetynet.policies.continuous.history import SCHEMA, write_record
from blob_safetynet.policies.probes import PROBES, Probe, ProbeOutcome, Target, run_probes
from blob_safetynet.policies.probes.drill import RECOVERY_DRILL
from blob_safetynet.policies.probes.liveness import canary_census
from blob_safetynet.policies.probes.runner import VerificationRun
from blob_safetynet.policies.rules import Finding
from blob_safetynet.settings import signals

INSTRUMENTATION_SCOPE: Final = "safetynet.verify"
MAX_DETAIL: Final = 1000
"""A custom dimension's value is cut at 8,192 characters by Application Insights; a detail this
long is already more than an alert needs (the history record keeps it whole)."""


@dataclass(frozen=True)
class SettingsVerdict:
    """The settings rules judged on the account, and the reads that failed."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


Audit = Callable[[], SettingsVerdict]


class Telemetry:
    """Custom events and metrics through OpenTelemetry providers handed in (the Azure Monitor
    exporters in production, in-memory ones in tests): nothing global is configured."""

    def __init__(self, logs: LoggerProvider, metrics: MeterProvider) -> None:
        self._logs = logs
        self._metrics = metrics
        self._logger = logs.get_logger(INSTRUMENTATION_SCOPE)
        meter = metrics.get_meter(INSTRUMENTATION_SCOPE)
        self._gauges = {
            name: meter.create_gauge(name)
            for name in (
                signals.FAILURES_METRIC,
                signals.CANARY_OVERDUE_METRIC,
                signals.CANARY_OLDEST_DAYS_METRIC,
                signals.TIME_TO_RECOVER_METRIC,
            )
        }

    def report(self, record: dict[str, Any]) -> None:
        """One CHECK_EVENT per check, one RUN_EVENT, and the run's gauges; flushed."""
        run_id = str(record["run_id"])
        for check in record["checks"]:
            self._event(
                signals.CHECK_EVENT,
                {
                    signals.RUN_ID: run_id,
                    signals.CHECK_KIND: check["kind"],
                    signals.CHECK_ID: check["id"],
                    signals.OUTCOME: check["outcome"],
                    signals.DETAIL: str(check["detail"])[:MAX_DETAIL],
                },
            )
        failures = sum(check["outcome"] == signals.FAILED for check in record["checks"])
        incomplete = sum(len(record[key]) for key in ("incomplete", "settings_errors", "leftovers"))
        self._event(
            signals.RUN_EVENT,
            {signals.RUN_ID: run_id, "failures": failures, signals.INCOMPLETE: incomplete},
        )
        canary = record["canary"]
        self._gauges[signals.FAILURES_METRIC].set(failures)
        self._gauges[signals.CANARY_OVERDUE_METRIC].set(canary["overdue"])
        self._gauges[signals.CANARY_OLDEST_DAYS_METRIC].set(canary["oldest_days"])
        if record.get("time_to_recover_s") is not None:
            self._gauges[signals.TIME_TO_RECOVER_METRIC].set(record["time_to_recover_s"])
        self._logs.force_flush()
        self._metrics.force_flush()

    def _event(self, name: str, attributes: dict[str, str | int]) -> None:
        self._logger.emit(
            body=name,
            attributes={signals.CUSTOM_EVENT_NAME_ATTRIBUTE: name, **attributes},
        )

    def shutdown(self) -> None:
        self._logs.shutdown()
        self._metrics.shutdown()


def azure_monitor_telemetry(connection_string: str, credential: Any) -> Telemetry:
    """Telemetry to Application Insights with an Entra credential (local auth is off there)."""
    from azure.monitor.opentelemetry.exporter import (
        AzureMonitorLogExporter,
        AzureMonitorMetricExporter,
    )
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    options = {"connection_string": connection_string, "credential": credential}
    logs = LoggerProvider()
    logs.add_log_record_processor(BatchLogRecordProcessor(AzureMonitorLogExporter(**options)))
    reader = PeriodicExportingMetricReader(AzureMonitorMetricExporter(**options))
    return Telemetry(logs, MeterProvider(metric_readers=[reader]))


def verify_continuously(
    target: Target,
    *,
    probes: Sequence[Probe] = PROBES,
    audit: Audit | None = None,
    telemetry: Telemetry | None = None,
) -> dict[str, Any]:
    """Run once, write the history record, report it; the record is returned."""
    started = target.now()
    run = run_probes(target, probes)
    verdict = audit() if audit is not None else SettingsVerdict()
    record = history_record(run, verdict, started=started, target=target)
    record["history_blob"] = write_record(target.container, record)
    if telemetry is not None:
        telemetry.report(record)
    return record


def history_record(
    run: VerificationRun, verdict: SettingsVerdict, *, started: datetime, target: Target
) -> dict[str, Any]:
    census = canary_census(target)
    now = target.now()
    checks = [
        {
            "kind": signals.KIND_PROBE,
            "id": result.probe.id,
            "outcome": str(result.outcome),
            "detail": result.detail,
            "proves": list(result.probe.proves),
            **({} if result.seconds is None else {"seconds": round(result.seconds, 3)}),
        }
        for result in run.results
    ] + [
        {
            "kind": signals.KIND_RULE,
            "id": finding.rule.id,
            "outcome": str(finding.outcome),
            "detail": finding.message,
            "account": finding.account,
        }
        for finding in verdict.findings
    ]
    return {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "target": run.target,
        "started_utc": started.isoformat(),
        "finished_utc": now.isoformat(),
        "checks": checks,
        "incomplete": run.incomplete,
        "leftovers": run.leftovers,
        "settings_errors": verdict.errors,
        "requests": run.requests,
        "time_to_recover_s": time_to_recover(run),
        "canary": {
            "alive": len(census.alive),
            "overdue": len(census.overdue),
            "collected": len(census.collected),
            "early": len(census.early),
            "oldest_days": round(census.oldest_days(now), 3),
        },
    }


def time_to_recover(run: VerificationRun) -> float | None:
    """Seconds the recovery drill took to give its document back, when it did (PASS)."""
    for result in run.results:
        if result.probe.id == RECOVERY_DRILL.id and result.outcome is ProbeOutcome.PASS:
            return None if result.seconds is None else round(result.seconds, 3)
    return None
