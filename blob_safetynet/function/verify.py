"""The verification timer's work: the probes and the settings audit of the data account,
on their own schedule, with the verifier's identity.

The Function's entry (sweeper/function_app.py) binds the timer to `verify_once`. The policies
package is imported per invocation only, so the sweep timer never loads it.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from azure.storage.blob import BlobServiceClient

from blob_safetynet.function.invocation import scrubbing
from blob_safetynet.protocol.clients import blob_service_client
from blob_safetynet.settings import appsettings, signals
from blob_safetynet.settings.parsed import SettingsError, check_blob_endpoint, check_container_name

if TYPE_CHECKING:  # imported per invocation: the sweep timer never loads the verifier's code
    from blob_safetynet.policies.continuous.run import Audit, Telemetry
    from blob_safetynet.policies.probes import Target

ACCOUNT_URL_SETTING: Final = appsettings.ACCOUNT_URL.name
CONNECTION_STRING_SETTING: Final = appsettings.CONNECTION_STRING.name
VERIFY_FINISHED_EVENT: Final = "safetynet.verify.finished"
"""The `event` field of the verification run's trace (the custom events carry the checks)."""
_ACCOUNT_ID: Final = re.compile(
    r"/subscriptions/([0-9a-fA-F-]{36})/resourceGroups/([-\w._()]{1,90})/providers/"
    r"Microsoft\.Storage/storageAccounts/([a-z0-9]{3,24})",
    re.IGNORECASE,
)


log = logging.getLogger("safetynet.function")


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
    return scrubbing(env, lambda: _verify_once(env, telemetry, now))


def _verify_once(
    env: Mapping[str, str], telemetry: Telemetry | None, now: Callable[[], datetime] | None
) -> dict[str, Any]:
    from blob_safetynet.function.drill import recovery_drill
    from blob_safetynet.policies.continuous.run import verify_continuously
    from blob_safetynet.policies.probes import ProbeSettings, Target

    settings = VerifySettings.from_environment(env)
    owned = telemetry is None
    reporter = _azure_monitor(env) if owned else telemetry
    try:
        with recovery_drill() as drill:
            target = Target(
                _verifier_service(settings),
                settings.container,
                settings=ProbeSettings(settings.pending_days, settings.sweeper_period),
                now=now,
                recovery=drill,
            )
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
    from blob_safetynet.policies.continuous.run import SettingsVerdict
    from blob_safetynet.policies.rules.model import Thresholds
    from blob_safetynet.policies.sources.connection import StaticTokenCredential
    from blob_safetynet.policies.sources.live import run_audit
    from blob_safetynet.policies.sources.results import Scope

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

    from blob_safetynet.policies.continuous.run import azure_monitor_telemetry

    client_id = appsettings.AZURE_CLIENT_ID.read(env) or None
    return azure_monitor_telemetry(connection, ManagedIdentityCredential(client_id=client_id))
