"""Continuous verification's telemetry kept in memory: what the Azure Monitor exporters would send.

Real OpenTelemetry SDK providers with the SDK's own in-memory exporter and reader, handed to
`policies.continuous.Telemetry` exactly as the Function hands it the Azure Monitor ones.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from policies.continuous import Telemetry
from sweeper import signals


class RecordedTelemetry:
    """A Telemetry whose custom events and metrics can be read back."""

    def __init__(self) -> None:
        self.logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.metrics = InMemoryMetricReader()
        self.telemetry = Telemetry(provider, MeterProvider(metric_readers=[self.metrics]))

    def events(self, name: str) -> list[dict[str, Any]]:
        """The attributes (customDimensions) of every custom event called `name`, in order."""
        found = []
        for item in self.logs.get_finished_logs():
            attributes = dict(item.log_record.attributes or {})
            if attributes.get(signals.CUSTOM_EVENT_NAME_ATTRIBUTE) == name:
                found.append(attributes)
        return found

    def gauge(self, name: str) -> float:
        """The last value recorded for the gauge `name`; AssertionError when there is none."""
        values = [row["value"] for row in self.custom_metrics() if row["name"] == name]
        if not values:
            raise AssertionError(f"no {name} metric was recorded")
        return float(values[-1])

    def custom_events(self) -> list[dict[str, Any]]:
        """The `customEvents` rows the exporter makes: the name attribute becomes `name`, every
        other attribute a key of `customDimensions`."""
        rows = []
        for item in self.logs.get_finished_logs():
            attributes = dict(item.log_record.attributes or {})
            name = attributes.pop(signals.CUSTOM_EVENT_NAME_ATTRIBUTE, None)
            if name is not None:
                rows.append({"name": name, "customDimensions": attributes})
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
