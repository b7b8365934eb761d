"""The sweep alert rules' queries run against what the sweep Function really logs."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.function import sweep as sweep_function
from blob_safetynet.infra.alerts import AlertRule, alert_rules
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings import signals
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.lease import LEASE_BLOB, SweepLeaseStuckError
from blob_safetynet.sweeper.sweep import SweepReport
from testkit.kql import run_query
from tests.sweeper.test_function_app import app_settings

RULES = {rule.key: rule for rule in alert_rules(timedelta(minutes=5), timedelta(days=1))}


def fires(rule: AlertRule, rows: list[dict[str, Any]]) -> bool:
    """Whether the rule's condition holds over one window holding these trace rows."""
    count = len(run_query(rule.query, {"traces": rows}))
    return count < 1 if rule.absence else count > 0


def traces(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [{"message": record.getMessage()} for record in caplog.records]


def test_sweep_queries_fire_on_what_the_function_logs(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A clean sweep's summary keeps the heartbeat rule quiet and fires no error rule; a stuck
    lease is logged at ERROR as the JSON event, with its container, that fires the lease rule;
    no trace at all fires the heartbeat rule."""
    caplog.set_level(logging.INFO, logger="safetynet")
    function_app.sweep_once(app_settings(azurite, container, db_url))
    swept = traces(caplog)

    assert not fires(RULES["heartbeat-stale"], swept)
    assert not fires(RULES["sweep-errors"], swept)
    assert not fires(RULES["lease-stuck"], swept)
    assert fires(RULES["heartbeat-stale"], [])

    # The first sweep created the lease blob (the settings hold the lease); now hold it forever.
    lease = container.get_blob_client(LEASE_BLOB).acquire_lease(lease_duration=-1)
    try:
        with pytest.raises(SweepLeaseStuckError):
            function_app.sweep_once(app_settings(azurite, container, db_url))
    finally:
        lease.release()
    assert fires(RULES["lease-stuck"], traces(caplog))
    [stuck] = [r for r in caplog.records if signals.SWEEP_LEASE_STUCK_EVENT in r.getMessage()]
    assert stuck.levelno == logging.ERROR
    assert json.loads(stuck.getMessage())["container"] == container.container_name


def test_the_sweep_error_query_counts_the_summary_field_the_function_writes(
    function_app: ModuleType,
) -> None:
    """The error rule reads the summary's own errors field: a summary with errors fires it,
    one without does not."""
    failing = json.dumps(sweep_function.summary_fields(SweepReport(errors=["row 1: 500"]), "c"))
    clean = json.dumps(sweep_function.summary_fields(SweepReport(), "c"))

    assert fires(RULES["sweep-errors"], [{"message": failing}])
    assert not fires(RULES["sweep-errors"], [{"message": clean}])
    assert signals.SWEEP_ERRORS_FIELD in RULES["sweep-errors"].query


def test_the_ready_missing_query_fires_when_a_ready_rows_blob_is_deleted_behind_the_protocol(
    function_app: ModuleType,
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tick over intact documents keeps the rule quiet; after two blobs are deleted behind
    the protocol, the next tick samples them missing, logs the summary at ERROR with their
    names, and the rule fires."""
    protocol = UploadProtocol(store, container)
    documents = [protocol.put(f"doc-{n}.txt", b"kept", ".txt") for n in range(5)]
    caplog.set_level(logging.INFO, logger="safetynet")
    function_app.sweep_once(app_settings(azurite, container, db_url))
    assert not fires(RULES["ready-missing"], traces(caplog))
    caplog.clear()

    for document in documents[:2]:
        container.delete_blob(document.blob_name)
    function_app.sweep_once(app_settings(azurite, container, db_url))

    assert fires(RULES["ready-missing"], traces(caplog))
    [summary] = [r for r in caplog.records if signals.SWEEP_FINISHED_EVENT in r.getMessage()]
    fields = json.loads(summary.getMessage())
    assert (fields["ready_sampled"], fields["ready_missing"]) == (5, 2)
    assert sorted(fields["ready_missing_blobs"]) == sorted(d.blob_name for d in documents[:2])
    assert summary.levelno == logging.ERROR
