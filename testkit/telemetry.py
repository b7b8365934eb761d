"""Continuous verification's telemetry kept in memory: what the Azure Monitor exporters would send.

Real OpenTelemetry SDK providers with the SDK's own in-memory exporter and reader, handed to
`blob_safetynet.policies.continuous.run.Telemetry` exactly as the Function hands it the Azure Monitor ones; the
`customEvents` rows come from the Azure Monitor exporter's own record conversion.
"""

from __future__ import annotations

from typing import Any

# The exporter's conversion of one log record into the telemetry item it would send: private,
# but the only way to see, offline, what Application Insights receives (pinned by uv.lock).
from azure.monitor.opentelemetry.exporter._generated.exporter.models import TelemetryEventData
from azure.monitor.opentelemetry.exporter.export.logs._exporter import _convert_log_to_envelope
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from blob_safetynet.policies.continuous.run import Telemetry


class RecordedTelemetry:
    """A Telemetry whose custom events and metrics can be read back."""

    def __init__(self) -> None:
        self.logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.metrics = InMemoryMetricReader()
        self.telemetry = Telemetry(provider, MeterProvider(metric_readers=[self.metrics]))

    def events(self, name: str) -> list[dict[str, Any]]:
        """The `customDimensions` of every custom event called `name`, in order."""
        return [row["customDimensions"] for row in self.custom_events() if row["name"] == name]

    def gauge(self, name: str) -> float:
        """The last value recorded for the gauge `name`; AssertionError when there is none."""
        values = [row["value"] for row in self.custom_metrics() if row["name"] == name]
        if not values:
            raise AssertionError(f"no {name} metric was recorded")
        return float(values[-1])

    def custom_events(self) -> list[dict[str, Any]]:
        """The `customEvents` rows, as the Azure Monitor log exporter's own conversion makes
        them (its envelope's event name and properties), without sending anything."""
        rows = []
        for item in self.logs.get_finished_logs():
            data = _convert_log_to_envelope(item).data
            event = data.base_data if data is not None else None
            if isinstance(event, TelemetryEventData):
                rows.append({"name": event.name, "customDimensions": dict(event.properties or {})})
        return rows

    def custom_metrics(self) -> list[dict[str, Any]]:
        """The `customMetrics` rows: one per recorded data point, `name` and `value`."""
        data = self.metrics.get_metrics_data()
        return [
            {"name": metric.name, "value": point.value}
            for resource in (data.resource_metrics if data is not None else [])
            for scope in resource.scope_metrics
            for metric in scope.metrics
            for point in metric.data.data_points
            if isinstance(point, NumberDataPoint)
        ]

    def close(self) -> None:
        self.telemetry.shutdown()
