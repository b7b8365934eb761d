"""The sweep timer's work: one sweep with the app settings, its summary trace and heartbeat.

The Function's entry (sweeper/function_app.py) binds the timer to `sweep_once`; nothing here
touches the network at import time, so a wrong setting fails the invocation (and names the
setting) instead of failing the host's indexing with no useful message.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.function.invocation import SweepFailedError, scrubbing
from blob_safetynet.protocol.clients import blob_service_client, database_credential
from blob_safetynet.recover.sample import MissingSample, sample_missing
from blob_safetynet.settings import appsettings, signals
from blob_safetynet.settings.parsed import FunctionSettings, SettingsError
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import DocumentTable
from blob_safetynet.sweeper.binding import ContainerBindingError
from blob_safetynet.sweeper.heartbeat import write_heartbeat
from blob_safetynet.sweeper.lease import SweepLeaseHeldError, SweepLeaseStuckError
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport

DB_URL_SETTING: Final = appsettings.DB_URL.name
CONNECTION_STRING_SETTING: Final = appsettings.CONNECTION_STRING.name
ACCOUNT_URL_SETTING: Final = appsettings.ACCOUNT_URL.name
SUMMARY_EVENT: Final = signals.SWEEP_FINISHED_EVENT
"""The `event` field of the per-run summary: what a KQL query over `traces` filters on."""
MAX_LOGGED_ERRORS: Final = 20
"""A run with thousands of failed rows must not produce a trace larger than the ingestion limit."""

log = logging.getLogger("safetynet.function")


def sweep_once(env: Mapping[str, str]) -> SweepReport | None:
    """Sweep once with the app settings in `env`; None when another sweeper holds the lease.

    Whatever it logs or raises is scrubbed of the secret settings' values: the host sends both
    to Application Insights, where anyone with read access to the traces would see them.
    """
    return scrubbing(env, lambda: _sweep_once(env))


def _sweep_once(env: Mapping[str, str]) -> SweepReport | None:
    settings = FunctionSettings.from_environment(env)
    layout = DocumentTable.from_names(settings.table)
    store = _open_store(settings.db_url, layout, _database_credential(settings.db_auth))
    try:
        store.check_schema()
        service = _service(
            settings.account_url, settings.connection_string, settings.allow_custom_endpoint
        )
        container = service.get_container_client(settings.sweep.container)
        try:
            report = Sweeper(store, container, settings.sweep).run()
        except SweepLeaseHeldError as held:
            # Another instance is sweeping: skipping this tick is the lease working, not a fault.
            log.info("sweep skipped: %s", held)
            return None
        except ContainerBindingError as refused:
            # A wrong or unproven pair: every tick refuses until a person binds or fixes it.
            log.error("sweep refused: %s", refused)
            raise SweepFailedError(f"sweep refused: {refused}") from None
        except SweepLeaseStuckError as stuck:
            # What the lease-stuck alert rule (blob_safetynet/infra/alerts.py) counts.
            stuck_event = {
                "event": signals.SWEEP_LEASE_STUCK_EVENT,
                "container": settings.sweep.container,
                "message": str(stuck),
            }
            log.error(json.dumps(stuck_event))
            raise
        sample = _sample_missing(store, container)
    finally:
        # One connection per tick; none held idle against the database between ticks.
        store.engine.dispose()
    _log_summary(report, settings.sweep.container, sample)
    if not settings.sweep.dry_run:
        write_heartbeat(container, report.as_dict(), source="function", table=layout.qualified_name)
    if report.errors:
        raise SweepFailedError(
            f"{len(report.errors)} stale row(s) in container {settings.sweep.container!r} "
            "were not swept; the next run retries them"
        )
    return report


@functools.cache
def _database_credential(db_auth: str) -> TokenCredential | None:
    """One credential per worker process (SAFETYNET_DB_AUTH=entra), so its token cache stays warm:
    a new connection on the next tick reuses the token until the credential refreshes it."""
    return database_credential(db_auth)


def _open_store(
    db_url: str, layout: DocumentTable, token_credential: TokenCredential | None
) -> DocumentStore:
    """The document store; its errors name the setting, never its value or a driver's words
    about a value (they quote query values)."""
    try:
        store = DocumentStore.from_url(db_url, layout, token_credential=token_credential)
    except StoreError as error:
        raise SettingsError(f"{DB_URL_SETTING}: {error}") from None
    except ValueError:
        raise SettingsError(f"{DB_URL_SETTING} is not a usable database URL") from None
    return store


@functools.cache
def _service(
    account_url: str | None, connection_string: str | None, allow_custom_endpoint: bool
) -> BlobServiceClient:
    """One client per worker process and target, created on first use.

    Caching keeps DefaultAzureCredential's token cache and the HTTP connection pool warm across
    ticks on a warm instance; the first tick of a cold instance pays for both once. The endpoint
    rule is the CLI's: a connection string (a shared key) only for a loopback emulator, an
    account URL only for Azure's blob endpoints, anything else only with
    SAFETYNET_ALLOW_CUSTOM_ENDPOINT=true.
    """
    return blob_service_client(
        account_url,
        connection_string,
        allow_custom_endpoint=allow_custom_endpoint,
        names=(ACCOUNT_URL_SETTING, CONNECTION_STRING_SETTING),
    )


def _sample_missing(store: DocumentStore, container: ContainerClient) -> MissingSample | None:
    """The tick's sample of Ready rows whose blob is missing; None (logged) when the sample
    could not be read: it never fails the sweep it follows."""
    try:
        return sample_missing(store, container)
    except (AzureError, StoreError) as error:
        log.warning("the sample of Ready rows was not read: %s", type(error).__name__)
        return None


def summary_fields(
    report: SweepReport, container: str, sample: MissingSample | None = None
) -> dict[str, Any]:
    """The per-run summary, flat so each field becomes its own custom dimension. The sample's
    fields are absent when it was not read (no count is not a zero)."""
    sampled = (
        {}
        if sample is None
        else {
            signals.READY_SAMPLED_FIELD: sample.sampled,
            signals.READY_MISSING_FIELD: sample.missing,
        }
    )
    return {
        "event": SUMMARY_EVENT,
        "container": container,
        "examined": report.examined,
        "deleted_blobs": report.deleted_blobs,
        "missing_blobs": report.missing_blobs,
        "rolled_forward": report.rolled_forward,
        "deleted_rows": report.deleted_rows,
        "retired_deleted": report.retired_deleted,
        "abandoned_replacements": report.abandoned_replacements,
        signals.SWEEP_ERRORS_FIELD: len(report.errors),
        "warnings": len(report.warnings),
        "dry_run": report.dry_run,
        **sampled,
    }


def _log_summary(report: SweepReport, container: str, sample: MissingSample | None) -> None:
    fields = summary_fields(report, container, sample)
    # The host's built-in forwarding keeps only the message text (custom dimensions from
    # `extra=` are dropped unless OpenTelemetry is configured), so the message itself is JSON:
    # `traces | extend s = parse_json(message) | where s.event == "safetynet.sweep.finished"`.
    # `extra=` carries the same fields for an OpenTelemetry exporter, which maps them to
    # customDimensions.
    extra = {f"sweep_{key}": value for key, value in fields.items() if key != "event"}
    if sample is not None and sample.missing:
        # Which blobs, so the runbook (docs/operations.md#ready-missing) starts from names.
        fields["ready_missing_blobs"] = list(sample.names)
    if report.errors or (sample is not None and sample.missing):
        fields["error_samples"] = report.errors[:MAX_LOGGED_ERRORS]
        log.error(json.dumps(fields), extra=extra)
    else:
        log.info(json.dumps(fields), extra=extra)
