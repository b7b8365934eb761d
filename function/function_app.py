"""The sweeper as an Azure Function (Python v2 programming model): one sweep per timer tick.

The build step (`infra/function_zip.py`) puts this file at the root of the deployment zip, where the
Functions host indexes the module-level `app`. Everything else happens per invocation: nothing
here touches the network at import time, so a wrong setting fails the invocation (and names the
setting) instead of failing the host's indexing with no useful message.

App settings are documented in docs/function.md. Logs go through `logging`; the host forwards
them to Application Insights as traces.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import azure.functions as func
from azure.core.credentials import TokenCredential
from azure.storage.blob import BlobServiceClient

from sweeper import appsettings
from sweeper.binding import ContainerBindingError
from sweeper.clients import blob_service_client, database_credential
from sweeper.heartbeat import write_heartbeat
from sweeper.lease import SweepLeaseHeldError
from sweeper.redaction import RedactingFilter, Redactor, printable, secrets_in
from sweeper.settings import FunctionSettings, SettingsError
from sweeper.store import DocumentStore, DocumentTable, StoreError
from sweeper.sweep import Sweeper, SweepReport

SCHEDULE_SETTING: Final = appsettings.SCHEDULE.name
DB_URL_SETTING: Final = appsettings.DB_URL.name
CONNECTION_STRING_SETTING: Final = appsettings.CONNECTION_STRING.name
ACCOUNT_URL_SETTING: Final = appsettings.ACCOUNT_URL.name
SECRET_SETTINGS: Final = tuple(
    setting.name for setting in appsettings.FUNCTION_SETTINGS if setting.secret
)
"""Settings whose values hold secrets (passwords, SAS, keys): scrubbed from every log record."""
FUNCTION_NAME: Final = "sweep_timer"
SUMMARY_EVENT: Final = "safetynet.sweep.finished"
"""The `event` field of the per-run summary: what a KQL query over `traces` filters on."""
MAX_LOGGED_ERRORS: Final = 20
"""A run with thousands of failed rows must not produce a trace larger than the ingestion limit."""

log = logging.getLogger("safetynet.function")

app = func.FunctionApp()


class SweepFailedError(RuntimeError):
    """Some stale rows could not be swept; raised so the platform records a failed invocation."""


@app.timer_trigger(
    # The host resolves %NAME% from the app settings, so the schedule changes without a deploy.
    schedule=f"%{SCHEDULE_SETTING}%",
    arg_name="timer",
    run_on_startup=False,
    use_monitor=True,
)
def sweep_timer(timer: func.TimerRequest) -> None:
    """Timer entry: the app settings are the process environment on Azure Functions."""
    # The worker forwards INFO and above, but only if our logger lets the record through.
    logger = logging.getLogger("safetynet")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if timer.past_due:
        log.warning("sweep timer is past due; sweeping now")
    sweep_once(os.environ)


def sweep_once(env: Mapping[str, str]) -> SweepReport | None:
    """Sweep once with the app settings in `env`; None when another sweeper holds the lease.

    Whatever it logs or raises is scrubbed of the secret settings' values: the host sends both
    to Application Insights, where anyone with read access to the traces would see them.
    """
    redactor = Redactor(secrets_in(env.get(name) for name in SECRET_SETTINGS))
    with _scrubbed_logs(redactor):
        try:
            return _sweep_once(env)
        except Exception as error:
            if all(redactor.scrub(text) == text for text in _messages(error)):
                raise  # nothing to hide: the host records the error as it is
            raise _scrubbed(error, redactor) from None


def _messages(error: BaseException) -> list[str]:
    """The message of `error` and of every exception chained to it (the host prints them all)."""
    texts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(texts) < 20:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return texts


def _scrubbed(error: Exception, redactor: Redactor) -> Exception:
    """The same kind of error with a scrubbed message and no chained cause."""
    message = printable(redactor.scrub(str(error)), backslashes=False)
    try:
        return type(error)(message)
    except Exception:  # an error type that does not take one message
        return SweepFailedError(f"{type(error).__name__}: {message}")


@contextmanager
def _scrubbed_logs(redactor: Redactor) -> Iterator[None]:
    """Every handler of the host (and of a test) scrubs the records of this invocation."""
    scrub = RedactingFilter(redactor)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(scrub)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(scrub)


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
    finally:
        # One connection per tick; none held idle against the database between ticks.
        store.engine.dispose()
    _log_summary(report, settings.sweep.container)
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


def summary_fields(report: SweepReport, container: str) -> dict[str, Any]:
    """The per-run summary, flat so each field becomes its own custom dimension."""
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
        "errors": len(report.errors),
        "warnings": len(report.warnings),
        "dry_run": report.dry_run,
    }


def _log_summary(report: SweepReport, container: str) -> None:
    fields = summary_fields(report, container)
    # The host's built-in forwarding keeps only the message text (custom dimensions from
    # `extra=` are dropped unless OpenTelemetry is configured), so the message itself is JSON:
    # `traces | extend s = parse_json(message) | where s.event == "safetynet.sweep.finished"`.
    # `extra=` carries the same fields for an OpenTelemetry exporter, which maps them to
    # customDimensions.
    extra = {f"sweep_{key}": value for key, value in fields.items() if key != "event"}
    if report.errors:
        fields["error_samples"] = report.errors[:MAX_LOGGED_ERRORS]
        log.error(json.dumps(fields), extra=extra)
    else:
        log.info(json.dumps(fields), extra=extra)
