"""The Azure Function's timer entry, called the way the host calls it, against Azurite and a DB."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import azure.functions as func
import pytest
from azure.functions.decorators.function_app import Function
from azure.functions.timer import TimerRequest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.function import sweep as sweep_function
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper.lease import LEASE_BLOB, SweepLease, SweepLeaseStuckError
from blob_safetynet.sweeper.sweep import SweepReport
from tests.sweeper.conftest import age_row

StaleRows = Callable[..., list[Document]]


@functools.cache
def indexed_functions(function_app: ModuleType) -> dict[str, Function]:
    """What the host indexes from `app`; azure-functions refuses a second get_functions() call."""
    return {str(f.get_function_name()): f for f in function_app.app.get_functions()}


def timer_function(function_app: ModuleType) -> Callable[[func.TimerRequest], None]:
    """The user function behind the decorator (which returns a builder, not the function)."""
    user_function: Callable[[func.TimerRequest], None] = indexed_functions(function_app)[
        function_app.FUNCTION_NAME
    ].get_user_function()
    return user_function


def app_settings(azurite: Azurite, container: ContainerClient, db_url: str) -> dict[str, str]:
    return {
        "SAFETYNET_DB_URL": db_url,
        "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
        "SAFETYNET_CONTAINER": container.container_name,
        "SAFETYNET_CUTOFF": "15m",
        "SAFETYNET_LEASE": "true",
        "SAFETYNET_SCHEDULE": "0 */5 * * * *",
    }


def state_of(container: ContainerClient, blob_name: str) -> str | None:
    return container.get_blob_client(blob_name).get_blob_tags().get(STATE_TAG)


def test_timer_removes_stale_uploads_and_keeps_published_documents(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    protocol: UploadProtocol,
    stale_rows: StaleRows,
    monkeypatch: pytest.MonkeyPatch,
    function_app: ModuleType,
) -> None:
    """A timer tick deletes stale pending rows and blobs and leaves Ready and fresh ones alone."""
    stale_with_blob = stale_rows(3, prefix="abandoned")
    stale_without_blob = stale_rows(2, with_blobs=False, prefix="never-landed")
    ready = protocol.put("report.pdf", b"published bytes", extension=".pdf")
    fresh = protocol.reserve("in-flight.pdf", ".pdf")
    protocol.upload(fresh, b"still uploading")
    for key, value in app_settings(azurite, container, db_url).items():
        monkeypatch.setenv(key, value)

    # The concrete request the worker decodes from the host's timer payload.
    timer_function(function_app)(TimerRequest(past_due=False))

    assert {d.id for d in store.all()} == {ready.id, fresh.id}
    assert store.get(ready.id) == ready
    assert {b.name for b in container.list_blobs()} >= {ready.blob_name, fresh.blob_name}
    for document in stale_with_blob + stale_without_blob:
        assert not container.get_blob_client(document.blob_name).exists()
    assert state_of(container, ready.blob_name) == COMMITTED
    assert container.download_blob(ready.blob_name).readall() == b"published bytes"
    assert state_of(container, fresh.blob_name) == PENDING


def test_timer_binding_takes_its_schedule_from_the_app_setting(function_app: ModuleType) -> None:
    """The trigger's schedule is the %SAFETYNET_SCHEDULE% app setting, monitored, not at startup."""
    description: dict[str, Any] = json.loads(
        indexed_functions(function_app)[function_app.FUNCTION_NAME].get_function_json()
    )
    [binding] = description["bindings"]

    assert description["scriptFile"] == "function_app.py"
    assert binding["type"] == "timerTrigger"
    assert binding["schedule"] == f"%{function_app.SCHEDULE_SETTING}%"
    assert binding["runOnStartup"] is False
    assert binding["useMonitor"] is True


def test_second_run_changes_nothing(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    stale_rows: StaleRows,
    function_app: ModuleType,
) -> None:
    """A run after a complete sweep finds no stale row and changes nothing (invariant I4)."""
    stale_rows(2)
    settings = app_settings(azurite, container, db_url)
    first = function_app.sweep_once(settings)

    second = function_app.sweep_once(settings)

    assert first is not None
    assert first.deleted_rows == 2
    assert second == SweepReport()


def test_summary_is_one_json_trace_without_the_database_url(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    stale_rows: StaleRows,
    caplog: pytest.LogCaptureFixture,
    function_app: ModuleType,
) -> None:
    """Each run logs one JSON summary of the report's counts and never the database URL."""
    stale_rows(2)
    caplog.set_level(logging.INFO, logger="safetynet")

    function_app.sweep_once(app_settings(azurite, container, db_url))

    summaries = [
        json.loads(r.getMessage())
        for r in caplog.records
        if sweep_function.SUMMARY_EVENT in r.getMessage()
    ]
    assert summaries == [
        {
            "event": sweep_function.SUMMARY_EVENT,
            "container": container.container_name,
            "examined": 2,
            "deleted_blobs": 2,
            "missing_blobs": 0,
            "rolled_forward": 0,
            "deleted_rows": 2,
            "retired_deleted": 0,
            "abandoned_replacements": 0,
            "errors": 0,
            "warnings": 0,
            "dry_run": False,
            "ready_sampled": 0,
            "ready_missing": 0,
        }
    ]
    [record] = [r for r in caplog.records if sweep_function.SUMMARY_EVENT in r.getMessage()]
    assert record.__dict__["sweep_deleted_rows"] == 2
    assert db_url not in caplog.text


def test_lease_held_elsewhere_skips_the_run_without_failing(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    stale_rows: StaleRows,
    function_app: ModuleType,
) -> None:
    """While another sweeper holds the lease, the function returns quietly and sweeps nothing."""
    [stale] = stale_rows(1)

    with SweepLease(container):
        result = function_app.sweep_once(app_settings(azurite, container, db_url))

    assert result is None
    assert store.get(stale.id) is not None


def test_a_stuck_lease_fails_the_invocation(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    stale_rows: StaleRows,
    function_app: ModuleType,
) -> None:
    """An infinite lease on the sweeper's lease blob fails every run instead of skipping it."""
    [stale] = stale_rows(1)
    lease_blob = container.get_blob_client(LEASE_BLOB)
    lease_blob.upload_blob(b"")
    lease = lease_blob.acquire_lease(lease_duration=-1)
    try:
        with pytest.raises(SweepLeaseStuckError):
            function_app.sweep_once(app_settings(azurite, container, db_url))
    finally:
        lease.release()
    assert store.get(stale.id) is not None


def test_rows_left_unswept_fail_the_invocation(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    function_app: ModuleType,
) -> None:
    """A run that could not sweep some rows logs an error and raises so the platform sees a failure."""

    class FailingSweeper:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def run(self) -> SweepReport:
            return SweepReport(examined=1, errors=["document d1: blob b1 not swept"])

    monkeypatch.setattr(sweep_function, "Sweeper", FailingSweeper)

    with pytest.raises(sweep_function.SweepFailedError, match="1 stale row"):
        function_app.sweep_once(app_settings(azurite, container, db_url))

    [summary] = [r for r in caplog.records if sweep_function.SUMMARY_EVENT in r.getMessage()]
    assert summary.levelno == logging.ERROR
    assert json.loads(summary.getMessage())["error_samples"] == ["document d1: blob b1 not swept"]


def test_malformed_cutoff_names_the_setting(
    azurite: Azurite, container: ContainerClient, db_url: str, function_app: ModuleType
) -> None:
    """A cutoff that is not a duration fails before any work, naming SAFETYNET_CUTOFF."""
    settings = app_settings(azurite, container, db_url) | {"SAFETYNET_CUTOFF": "banana"}

    with pytest.raises(SettingsError, match="SAFETYNET_CUTOFF"):
        function_app.sweep_once(settings)


def test_missing_database_url_names_the_setting(
    azurite: Azurite, container: ContainerClient, db_url: str, function_app: ModuleType
) -> None:
    """Without a database URL the function fails naming SAFETYNET_DB_URL."""
    settings = app_settings(azurite, container, db_url)
    del settings[sweep_function.DB_URL_SETTING]

    with pytest.raises(SettingsError, match=sweep_function.DB_URL_SETTING):
        function_app.sweep_once(settings)


def test_malformed_database_url_error_hides_the_url(
    azurite: Azurite, container: ContainerClient, db_url: str, function_app: ModuleType
) -> None:
    """An unparsable database URL is reported by setting name, without echoing its password."""
    secret_url = "postgresql://sweeper:hunter2-secret@db.example:notaport/documents"
    settings = app_settings(azurite, container, db_url) | {
        sweep_function.DB_URL_SETTING: secret_url
    }

    with pytest.raises(SettingsError, match=sweep_function.DB_URL_SETTING) as raised:
        function_app.sweep_once(settings)

    assert "hunter2-secret" not in str(raised.value)


def test_connection_string_is_refused_for_a_remote_account(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    function_app: ModuleType,
) -> None:
    """A connection string to anything but a loopback emulator is refused, naming the setting."""
    remote = (
        "DefaultEndpointsProtocol=https;AccountName=prodaccount;"
        "AccountKey=bm90LWEta2V5;EndpointSuffix=core.windows.net"
    )
    settings = app_settings(azurite, container, db_url) | {
        sweep_function.CONNECTION_STRING_SETTING: remote
    }

    with pytest.raises(SettingsError, match=sweep_function.CONNECTION_STRING_SETTING):
        function_app.sweep_once(settings)


def test_account_url_and_connection_string_together_are_refused(
    azurite: Azurite, container: ContainerClient, db_url: str, function_app: ModuleType
) -> None:
    """Setting both the account URL and the emulator's connection string is ambiguous and refused."""
    settings = app_settings(azurite, container, db_url) | {
        "SAFETYNET_ACCOUNT_URL": "https://prodaccount.blob.core.windows.net"
    }

    with pytest.raises(SettingsError, match="SAFETYNET_ACCOUNT_URL"):
        function_app.sweep_once(settings)


def test_ready_rows_are_never_swept_whatever_their_age(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    protocol: UploadProtocol,
    function_app: ModuleType,
) -> None:
    """A published document stays Ready with its committed blob even when older than the cutoff."""
    ready = protocol.put("old.pdf", b"old bytes", extension=".pdf")
    age_row(store, ready.id, timedelta(days=2))
    settings = app_settings(azurite, container, db_url)

    report = function_app.sweep_once(settings)

    assert report is not None
    assert report.examined == 0
    current = store.get(ready.id)
    assert current is not None
    assert current.status is Status.READY
    assert state_of(container, ready.blob_name) == COMMITTED
