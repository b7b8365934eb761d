"""The sweeper as an Azure Function (Python v2 programming model): one sweep per timer tick.

The build step (`blob_safetynet/infra/function_zip.py`) puts this file at the root of the deployment zip, where the
Functions host indexes the module-level `app`. Everything else happens per invocation: nothing
here touches the network at import time, so a wrong setting fails the invocation (and names the
setting) instead of failing the host's indexing with no useful message.

App settings are documented in docs/function.md. Logs go through `logging`; the host forwards
them to Application Insights as traces.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import azure.functions as func
from azure.core.credentials import TokenCredential
from azure.storage.blob import BlobServiceClient

from blob_safetynet.sweeper import appsettings, signals
from blob_safetynet.sweeper.binding import ContainerBindingError
from blob_safetynet.sweeper.clients import blob_service_client, database_credential
from blob_safetynet.sweeper.heartbeat import write_heartbeat
from blob_safetynet.sweeper.lease import SweepLeaseHeldError, SweepLeaseStuckError
from blob_safetynet.sweeper.redaction import RedactingFilter, Redactor, printable, secrets_in
from blob_safetynet.sweeper.settings import (
    FunctionSettings,
    SettingsError,
    check_blob_endpoint,
    check_container_name,
)
from blob_safetynet.sweeper.store import DocumentStore, DocumentTable, StoreError
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport

if TYPE_CHECKING:  # imported per invocation: the sweep timer never loads the verifier's code
    from blob_safetynet.policies.continuous import Audit, Telemetry
    from blob_safetynet.policies.probes import Target

SCHEDULE_SETTING: Final = appsettings.SCHEDULE.name
DB_URL_SETTING: Final = appsettings.DB_URL.name
CONNECTION_STRING_SETTING: Final = appsettings.CONNECTION_STRING.name
ACCOUNT_URL_SETTING: Final = appsettings.ACCOUNT_URL.name
SECRET_SETTINGS: Final = tuple(
    setting.name for setting in appsettings.FUNCTION_SETTINGS if setting.secret
)
"""Settings whose values hold secrets (passwords, SAS, keys): scrubbed from every log record."""
FUNCTION_NAME: Final = "sweep_timer"
SUMMARY_EVENT: Final = signals.SWEEP_FINISHED_EVENT
"""The `event` field of the per-run summary: what a KQL query over `traces` filters on."""
MAX_LOGGED_ERRORS: Final = 20
"""A run with thousands of failed rows must not produce a trace larger than the ingestion limit."""

log = logging.getLogger("safetynet.function")
T = TypeVar("T")

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
    _let_info_through()
    if timer.past_due:
        log.warning("sweep timer is past due; sweeping now")
    sweep_once(os.environ)


def _let_info_through() -> None:
    """The worker forwards INFO and above, but only if our logger lets the record through."""
    logger = logging.getLogger("safetynet")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def sweep_once(env: Mapping[str, str]) -> SweepReport | None:
    """Sweep once with the app settings in `env`; None when another sweeper holds the lease.

    Whatever it logs or raises is scrubbed of the secret settings' values: the host sends both
    to Application Insights, where anyone with read access to the traces would see them.
    """
    return _scrubbing(env, lambda: _sweep_once(env))


def _scrubbing(env: Mapping[str, str], work: Callable[[], T]) -> T:
    """`work()` with every log record and any error it raises scrubbed of the secret settings'
    values in `env`."""
    redactor = Redactor(secrets_in(env.get(name) for name in SECRET_SETTINGS))
    with _scrubbed_logs(redactor):
        try:
            return work()
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
        except SweepLeaseStuckError as stuck:
            # What the lease-stuck alert rule (blob_safetynet/infra/alerts.py) counts.
            stuck_event = {
                "event": signals.SWEEP_LEASE_STUCK_EVENT,
                "container": settings.sweep.container,
                "message": str(stuck),
            }
            log.error(json.dumps(stuck_event))
            raise
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
        signals.SWEEP_ERRORS_FIELD: len(report.errors),
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


VERIFY_FUNCTION_NAME: Final = "verify_timer"
VERIFY_SCHEDULE_SETTING: Final = appsettings.VERIFY_SCHEDULE.name
VERIFY_FINISHED_EVENT: Final = "safetynet.verify.finished"
"""The `event` field of the verification run's trace (the custom events carry the checks)."""
_ACCOUNT_ID: Final = re.compile(
    r"/subscriptions/([0-9a-fA-F-]{36})/resourceGroups/([-\w._()]{1,90})/providers/"
    r"Microsoft\.Storage/storageAccounts/([a-z0-9]{3,24})",
    re.IGNORECASE,
)


@app.timer_trigger(
    schedule=f"%{VERIFY_SCHEDULE_SETTING}%",
    arg_name="timer",
    run_on_startup=False,
    use_monitor=True,
)
def verify_timer(timer: func.TimerRequest) -> None:
    """Continuous verification: the probes and the settings audit, on their own schedule."""
    _let_info_through()
    verify_once(os.environ)


@dataclass(frozen=True)
class VerifySettings:
    """The verification timer's app settings, each checked before anything connects."""

    account_url: str | None
    connection_string: str | None
    container: str
    verifier_client_id: str | None
    pending_days: int
    sweeper_period: timedelta
    account_id: tuple[str, str, str] | None
    allow_custom_endpoint: bool
    arm_endpoint: str | None = None
    """Tests only: an https stand-in of Resource Manager on loopback; on Azure, unset."""
    arm_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> VerifySettings:
        names = appsettings
        account_url = names.ACCOUNT_URL.read(env) or None
        connection_string = names.CONNECTION_STRING.read(env) or None
        client_id = names.VERIFIER_CLIENT_ID.read(env).strip() or None
        if account_url and not client_id:
            raise SettingsError(
                f"missing app setting(s): {names.VERIFIER_CLIENT_ID.name} (the verifier "
                "identity; the app's own identity may not write probe blobs)"
            )
        days = names.PENDING_DAYS.read(env).strip()
        if not (days.isascii() and days.isdigit() and 1 <= int(days[:4] or 0) <= 365):
            raise SettingsError(
                f"{names.PENDING_DAYS.name}: '{names.shown(days)}' is not a whole number of "
                "days from 1 to 365"
            )
        account = names.VERIFY_ACCOUNT_ID.read(env).strip()
        match = _ACCOUNT_ID.fullmatch(account) if account else None
        if account and match is None:
            raise SettingsError(
                f"{names.VERIFY_ACCOUNT_ID.name}: '{names.shown(account)}' is not a storage "
                "account resource id (/subscriptions/<id>/resourceGroups/<group>/providers/"
                "Microsoft.Storage/storageAccounts/<name>)"
            )
        return cls(
            account_url=account_url,
            connection_string=connection_string,
            container=check_container_name(names.CONTAINER.read(env), names.CONTAINER.name),
            verifier_client_id=client_id,
            pending_days=int(days),
            sweeper_period=names.SWEEPER_PERIOD.duration(names.SWEEPER_PERIOD.read(env)),
            account_id=None if match is None else (match[1], match[2], match[3]),
            allow_custom_endpoint=names.ALLOW_CUSTOM_ENDPOINT.boolean(
                names.ALLOW_CUSTOM_ENDPOINT.read(env)
            ),
            arm_endpoint=_loopback_arm(names.ARM_ENDPOINT.read(env).strip()),
            arm_token=names.ARM_TOKEN.read(env).strip() or None,
        )


def _loopback_arm(endpoint: str) -> str | None:
    """The ARM endpoint setting: unset on Azure (Resource Manager itself), or an https server on
    loopback (the tests' stand-in); the verifier's token is never sent anywhere else."""
    if not endpoint:
        return None
    try:
        parts = urlsplit(endpoint)
        secure = parts.scheme == "https"
        host = parts.hostname or ""
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # not a URL, or a host that is not an address
        secure = loopback = False
    if not (secure and loopback):
        raise SettingsError(
            f"{appsettings.ARM_ENDPOINT.name}: '{appsettings.shown(endpoint)}' is not an https "
            "endpoint on loopback; the verification timer reads Azure Resource Manager itself, "
            "leave the setting unset on Azure"
        )
    return endpoint


def verify_once(
    env: Mapping[str, str],
    *,
    telemetry: Telemetry | None = None,
    now: Callable[[], datetime] | None = None,
) -> dict[str, Any]:
    """One verification run with the app settings in `env`; its history record.

    `telemetry` defaults to the Azure Monitor exporters (Application Insights, the app's own
    identity); tests hand in in-memory providers and a clock instead.
    """
    return _scrubbing(env, lambda: _verify_once(env, telemetry, now))


def _verify_once(
    env: Mapping[str, str], telemetry: Telemetry | None, now: Callable[[], datetime] | None
) -> dict[str, Any]:
    from blob_safetynet.policies.continuous import verify_continuously
    from blob_safetynet.policies.probes import ProbeSettings, Target

    settings = VerifySettings.from_environment(env)
    target = Target(
        _verifier_service(settings),
        settings.container,
        settings=ProbeSettings(settings.pending_days, settings.sweeper_period),
        now=now,
    )
    owned = telemetry is None
    reporter = _azure_monitor(env) if owned else telemetry
    try:
        record = verify_continuously(target, audit=_audit(settings, target), telemetry=reporter)
    finally:
        if owned and reporter is not None:
            reporter.shutdown()
    failures = [c["id"] for c in record["checks"] if c["outcome"] == signals.FAILED]
    summary = {
        "event": VERIFY_FINISHED_EVENT,
        "run_id": record["run_id"],
        "failures": failures,
        "incomplete": len(record["incomplete"]) + len(record["settings_errors"]),
        "history_blob": record["history_blob"],
    }
    (log.error if failures else log.info)(json.dumps(summary))
    return record


def _verifier_service(settings: VerifySettings) -> BlobServiceClient:
    """Azurite by connection string (tests), else the account URL with the verifier identity."""
    names = (ACCOUNT_URL_SETTING, CONNECTION_STRING_SETTING)
    if settings.connection_string or not settings.account_url:
        return blob_service_client(
            settings.account_url,
            settings.connection_string,
            allow_custom_endpoint=settings.allow_custom_endpoint,
            names=names,
        )
    check_blob_endpoint(
        settings.account_url,
        with_key=False,
        allow_custom=settings.allow_custom_endpoint,
        setting=ACCOUNT_URL_SETTING,
    )
    from azure.identity import ManagedIdentityCredential

    return BlobServiceClient(
        settings.account_url,
        credential=ManagedIdentityCredential(client_id=settings.verifier_client_id),
    )


def _audit(settings: VerifySettings, target: Target) -> Audit | None:
    """The settings audit of the data account, read with the verifier identity, if configured."""
    if settings.account_id is None:
        return None
    from blob_safetynet.policies.audit import Scope, StaticTokenCredential, run_audit
    from blob_safetynet.policies.continuous import SettingsVerdict
    from blob_safetynet.policies.model import Thresholds

    subscription, group, account = settings.account_id
    token = settings.arm_token
    credential = StaticTokenCredential(token) if token else target.service.credential

    def audit() -> SettingsVerdict:
        report = run_audit(
            Scope(subscription, group, account),
            credential,
            thresholds=Thresholds(
                container=settings.container, max_pending_days=settings.pending_days
            ),
            arm_endpoint=settings.arm_endpoint,
            concurrency=1,
            # The verifier identity is a Reader on the resource group only
            # (blob_safetynet/infra/sweeper_app.py): nothing is read above it.
            subscription_reads=False,
        )
        errors = [f"{e.operation}: {e.kind.value}: {e.message}" for e in report.all_errors]
        return SettingsVerdict(report.findings, errors)

    return audit


def _azure_monitor(env: Mapping[str, str]) -> Telemetry | None:
    """The Azure Monitor exporters with the app's identity (Monitoring Metrics Publisher)."""
    connection = appsettings.INSIGHTS_CONNECTION_STRING.read(env)
    if not connection:
        log.warning(
            "%s is not set: this run's checks go to its history blob only, not to "
            "Application Insights, and no alert sees them",
            appsettings.INSIGHTS_CONNECTION_STRING.name,
        )
        return None
    from azure.identity import ManagedIdentityCredential

    from blob_safetynet.policies.continuous import azure_monitor_telemetry

    client_id = appsettings.AZURE_CLIENT_ID.read(env) or None
    return azure_monitor_telemetry(connection, ManagedIdentityCredential(client_id=client_id))
