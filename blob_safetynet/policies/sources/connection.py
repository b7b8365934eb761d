"""How the audit reaches Resource Manager: the endpoint a token may be sent to, the
credential, the transport sized for the workers, and what a failed read is (its kind and a
message safe to print)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import requests
from azure.core.credentials import AccessToken, TokenCredential
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    DecodeError,
    DeserializationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.core.pipeline.transport import RequestsTransport

from blob_safetynet.policies.sources.results import ErrorKind
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError
from blob_safetynet.settings.endpoints import parse_endpoint
from blob_safetynet.settings.redaction import Redactor, display_url, printable

ARM_HOSTS = ("management.azure.com", "management.usgovcloudapi.net", "management.chinacloudapi.cn")


"""Resource Manager of the public, US Government and China clouds (the same documents as the
blob endpoint suffixes in blob_safetynet/settings/parsed.py)."""


def check_arm_endpoint(
    endpoint: str, *, allow_custom: bool = False, setting: str = "--arm-endpoint"
) -> None:
    """The ARM token goes only to Azure's Resource Manager or loopback, unless allowed; the
    host is read by `parse_endpoint`, as the HTTP client reads it."""
    parsed = parse_endpoint(endpoint, setting)
    shown = display_url(endpoint)
    if parsed.scheme != "https":
        raise SettingsError(
            f"{setting} {shown} must be an https:// URL (tokens are never sent over plain HTTP)"
        )
    if parsed.has_query:
        raise SettingsError(f"{setting} {shown} must not carry user info or a query string")
    if not (parsed.loopback or parsed.host in ARM_HOSTS or allow_custom):
        raise SettingsError(
            f"{setting} {shown} is not Azure Resource Manager ({', '.join(ARM_HOSTS)}) "
            "or loopback; to send the token there anyway, pass --allow-custom-endpoint"
        )


class StaticTokenCredential:
    """A bearer token handed in by a pipeline (`SAFETYNET_ARM_TOKEN`), used as is.

    It is never logged, printed or put in a repr.
    """

    def __init__(self, token: str, lifetime_seconds: int = 3600) -> None:
        self._token = token
        self._expires_on = int(time.time()) + lifetime_seconds

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._token, self._expires_on)

    def __repr__(self) -> str:
        return "StaticTokenCredential(<hidden>)"


def default_credential() -> TokenCredential:
    """DefaultAzureCredential; a malformed credential variable is a SettingsError naming it."""
    from azure.identity import DefaultAzureCredential

    return appsettings.from_credential_environment(DefaultAzureCredential, os.environ)


READ_TIMEOUT_S = 60.0
"""How long one answer may keep the audit waiting before the attempt counts as lost (then
retried, then reported). azure-core's transports wait 300 s for a connection and 300 s for a
read by default (ConnectionConfiguration:
https://learn.microsoft.com/python/api/azure-core/azure.core.configuration.connectionconfiguration),
so a page that never answers would hold a run 30 minutes over its attempts."""
CONNECTION_TIMEOUT_S = 20.0
TRANSPORT_ERRORS = (ServiceRequestError, ServiceResponseError)
"""What azure-core raises when no answer came: the request could not be sent
(ServiceRequestError, ServiceRequestTimeoutError), or it was sent and the connection dropped
or stalled past the read timeout (ServiceResponseError, ServiceResponseTimeoutError)."""


class WaitBeyondBound(Exception):
    """A request not sent, or not sent again, because the service asked the audit to wait longer
    than its bound (`throttle.MAX_RETRY_AFTER_S`); the message says how long and the bound.
    Not an AzureError, so azure-core's retry loop lets it through at once."""


def classify(error: Exception) -> tuple[ErrorKind, str]:
    """The kind of a failed read and a message safe to print (no headers, no token)."""
    if isinstance(error, WaitBeyondBound):
        return ErrorKind.HTTP, _first_line(error)
    if isinstance(error, ServiceResponseTimeoutError):
        return (
            ErrorKind.NETWORK,
            f"{type(error).__name__}: no answer in time ({_first_line(error)})",
        )
    if isinstance(error, TRANSPORT_ERRORS):
        return ErrorKind.NETWORK, f"{type(error).__name__}: {_first_line(error)}"
    if isinstance(error, ClientAuthenticationError):
        return ErrorKind.AUTH, _first_line(error)
    if isinstance(error, (DecodeError, DeserializationError, json.JSONDecodeError)):
        return ErrorKind.MALFORMED, _first_line(error)
    if isinstance(error, ResourceNotFoundError) or (
        isinstance(error, HttpResponseError) and error.status_code == 404
    ):
        return ErrorKind.NOT_FOUND, _first_line(error)
    if isinstance(error, HttpResponseError):
        if error.status_code == 403:
            return ErrorKind.PERMISSION, _first_line(error)
        if error.status_code == 401:
            return ErrorKind.AUTH, _first_line(error)
        return ErrorKind.HTTP, _first_line(error)
    if isinstance(error, AzureError):
        return ErrorKind.HTTP, f"{type(error).__name__}: {_first_line(error)}"
    return ErrorKind.MALFORMED, f"{type(error).__name__}: {_first_line(error)}"


def _first_line(error: Exception) -> str:
    """ARM's own words, shortened, escaped, and scrubbed of anything credential-like: an error
    body may echo the request's token, and these words go into every report format."""
    text = str(error).strip() or type(error).__name__
    line = " ".join(line.strip() for line in text.splitlines()[:2] if line.strip())
    return printable(Redactor().scrub(line))


READ_ERRORS = (
    HttpResponseError,
    ClientAuthenticationError,
    *TRANSPORT_ERRORS,
    DecodeError,
    AzureError,
    WaitBeyondBound,
)


"""What a read may raise that is the service's answer or its absence, not a bug here (plus
malformed bodies): every error class azure-core raises for a request derives from AzureError."""


class _CountingAdapter(requests.adapters.HTTPAdapter):
    """Calls `on_send` for every HTTP request it sends, each retry included."""

    def __init__(self, on_send: Callable[[str, str], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_send = on_send

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        self._on_send(str(request.method), str(request.path_url))
        return super().send(request, *args, **kwargs)


def client_options(
    arm_endpoint: str | None,
    concurrency: int,
    connection_verify: str | bool | None,
    *,
    read_timeout_s: float = READ_TIMEOUT_S,
    on_send: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """The transport (a pool sized for `concurrency`, the audit's own timeouts, each request
    passed to `on_send(method, path)`) and endpoint options of an azure-mgmt client; the
    caller has checked `arm_endpoint` (`check_arm_endpoint`)."""
    session = requests.Session()
    size = max(10, concurrency)
    adapter = (
        requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=size)
        if on_send is None
        else _CountingAdapter(on_send, pool_connections=4, pool_maxsize=size)
    )
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    transport_options: dict[str, Any] = {
        "read_timeout": read_timeout_s,
        "connection_timeout": min(CONNECTION_TIMEOUT_S, read_timeout_s),
    }
    if connection_verify is not None:
        transport_options["connection_verify"] = connection_verify
    options: dict[str, Any] = {"transport": RequestsTransport(session=session, **transport_options)}
    if arm_endpoint:
        options["base_url"] = arm_endpoint.rstrip("/")
        options["credential_scopes"] = [arm_endpoint.rstrip("/") + "/.default"]
    return options
