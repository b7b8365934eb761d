"""Publishes the sweeper's code package with One deploy, as the identity that runs `pulumi up`.

Deployment path: Flex Consumption deploys with "One deploy" ("Deployment technologies in Azure
Functions", https://learn.microsoft.com/azure/azure-functions/functions-deployment-technologies:
one deploy is the Flex Consumption technology; zip deploy is not supported on Flex, "Zip
deployment for Azure Functions", https://learn.microsoft.com/azure/azure-functions/
deployment-zip-push). The zip is POSTed to the site's SCM endpoint `/api/publish`; the platform
stores it in the deployment container configured in `functionAppConfig` (written with the
app's identity) and syncs the triggers itself, so a timer-only app starts without a restart.
Basic auth is off, so the request carries an Entra bearer token. The publish may answer
synchronously (200, done) or accept it (202); progress is read from `/api/deployments/latest`,
as Microsoft's own tooling reads it (Azure/azure-dev issue 3658). A first publish can meet the
deployer's role on a new app before it has propagated: 401/403 are retried with bounded
backoff, then reported with what to check.

Role assignments take a while to take effect ("Troubleshoot Azure RBAC": changes can take up to
10 minutes, https://learn.microsoft.com/azure/role-based-access-control/troubleshooting), and a
first `up` uses three fresh ones at once: the deployer's on the app (SCM 401/403), and the app
identity's Storage Blob Data Owner on the runtime account, which the platform uses to write the
package to the deployment container (a deployment that fails with the storage's
AuthorizationFailure or AuthorizationPermissionMismatch). The SCM host of a site just created may
also answer 429, 502, 503 or 504 for a while. Each of these is retried with the same bounded
backoff, the way Microsoft's guidance for transient faults asks for retries that are bounded and
spaced ("Transient fault handling", https://learn.microsoft.com/azure/architecture/best-practices/transient-faults),
and reported with what to check once the bound is reached.

One identity: azure-native authenticates from `ARM_*` variables (or `az login`), while
`DefaultAzureCredential` reads only `AZURE_*` ones; with a service principal in `ARM_*` it would
publish as somebody else. `choose_credential` maps the same `ARM_*` variables azure-native reads
to an azure-identity credential, and `_publish` refuses to go on when the token's object id is not
the one `get_client_config` reported for the provider.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from blob_safetynet.infra.config import ConfigError
from blob_safetynet.settings import untrusted

ARM_SCOPE: Final = "https://management.azure.com/.default"
"""Kudu on the SCM host accepts ARM-audience tokens (public cloud; sovereign clouds differ)."""
DEPLOYMENT_TIMEOUT_SECONDS: Final = 900
MAX_JSON_BYTES: Final = 1 << 20
"""A token's claims or a deployment status: a few kB; anything larger is not what was asked."""
DEPLOYMENT_SUCCESS: Final = 4
RUNNING_STATUSES: Final = frozenset({0, 1, 2})
"""Kudu deployment status codes reported by `/api/deployments/<id>`: pending, building,
deploying."""


@dataclass(frozen=True)
class PackageFile:
    path: Path
    sha256: str
    size: int


def read_package(path: Path) -> PackageFile:
    """Hashes the built zip; a missing file names the make target that builds it."""
    if not path.is_file():
        raise ConfigError(
            "sweeperPackagePath",
            f"{path} does not exist; build it with `make function-zip` before `pulumi up`",
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return PackageFile(path=path, sha256=digest, size=path.stat().st_size)


class DeployerIdentityError(RuntimeError):
    """The identity that would publish is not the one azure-native deploys with."""


@dataclass(frozen=True)
class CredentialChoice:
    """Which azure-identity credential matches azure-native's login, and its non-secret args."""

    kind: str
    """`cli`, `client_secret`, `client_certificate`, `managed_identity` or `oidc_token_file`."""
    tenant_id: str | None = None
    client_id: str | None = None
    secret_variable: str | None = None
    """The `ARM_*` variable holding the secret or path, read only when building the credential."""
    extra: Mapping[str, str] = field(default_factory=dict)


def _flag(env: Mapping[str, str], key: str) -> bool:
    return env.get(key, "").strip().lower() == "true"


def choose_credential(env: Mapping[str, str]) -> CredentialChoice:
    """The credential azure-native would use, from the same `ARM_*` variables.

    azure-native reads ARM_CLIENT_ID / ARM_CLIENT_SECRET / ARM_TENANT_ID (service principal),
    ARM_CLIENT_CERTIFICATE_PATH (certificate), ARM_USE_MSI (managed identity), ARM_USE_OIDC
    with ARM_OIDC_TOKEN_FILE_PATH (workload identity), and otherwise the Azure CLI login.
    """
    tenant = env.get("ARM_TENANT_ID") or None
    client = env.get("ARM_CLIENT_ID") or None
    if _flag(env, "ARM_USE_MSI"):
        return CredentialChoice("managed_identity", client_id=client)
    if _flag(env, "ARM_USE_OIDC"):
        if not env.get("ARM_OIDC_TOKEN_FILE_PATH"):
            raise DeployerIdentityError(
                "ARM_USE_OIDC is set: the package publish supports OIDC through "
                "ARM_OIDC_TOKEN_FILE_PATH only; set it (with ARM_CLIENT_ID and ARM_TENANT_ID)"
            )
        return _service_principal("oidc_token_file", tenant, client, "ARM_OIDC_TOKEN_FILE_PATH")
    if env.get("ARM_CLIENT_CERTIFICATE_PATH"):
        return _service_principal(
            "client_certificate", tenant, client, "ARM_CLIENT_CERTIFICATE_PATH"
        )
    if env.get("ARM_CLIENT_SECRET"):
        return _service_principal("client_secret", tenant, client, "ARM_CLIENT_SECRET")
    if client:
        raise DeployerIdentityError(
            "ARM_CLIENT_ID is set without ARM_CLIENT_SECRET, ARM_CLIENT_CERTIFICATE_PATH, "
            "ARM_USE_MSI or ARM_USE_OIDC: azure-native would not know how to sign in either"
        )
    return CredentialChoice("cli")


def _service_principal(
    kind: str, tenant: str | None, client: str | None, variable: str
) -> CredentialChoice:
    missing = [
        name for name, value in (("ARM_TENANT_ID", tenant), ("ARM_CLIENT_ID", client)) if not value
    ]
    if missing:
        raise DeployerIdentityError(f"{variable} is set but {' and '.join(missing)} is not")
    return CredentialChoice(kind, tenant_id=tenant, client_id=client, secret_variable=variable)


def build_credential(choice: CredentialChoice, env: Mapping[str, str]) -> Any:
    """The azure-identity credential for `choice` (secrets read from `env` only here)."""
    from azure import identity

    secret = env.get(choice.secret_variable, "") if choice.secret_variable else ""
    # `_service_principal` guarantees both for the service-principal kinds.
    tenant, client = choice.tenant_id or "", choice.client_id or ""
    if choice.kind == "managed_identity":
        return identity.ManagedIdentityCredential(client_id=choice.client_id)
    if choice.kind == "client_secret":
        return identity.ClientSecretCredential(tenant, client, secret)
    if choice.kind == "client_certificate":
        return identity.CertificateCredential(
            tenant,
            client,
            secret,
            password=env.get("ARM_CLIENT_CERTIFICATE_PASSWORD") or None,
        )
    if choice.kind == "oidc_token_file":
        return identity.WorkloadIdentityCredential(
            tenant_id=tenant, client_id=client, token_file_path=secret
        )
    return identity.AzureCliCredential()


def token_object_id(token: str) -> str:
    """The `oid` claim of an Entra access token (the payload is read, not verified)."""
    try:
        payload = token.split(".")[1]
        claims = untrusted.load_json(
            base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)),
            "the access token's claims",
            max_bytes=MAX_JSON_BYTES,
        )
    except (IndexError, ValueError, binascii.Error):
        raise DeployerIdentityError("the access token is not a JWT with claims") from None
    oid = claims.get("oid") if isinstance(claims, dict) else None
    if not isinstance(oid, str) or not oid:
        raise DeployerIdentityError("the access token has no oid claim")
    return oid


def check_same_identity(token: str, deployer_object_id: str) -> None:
    """Refuses to publish as an identity other than the one azure-native deploys with."""
    publisher = token_object_id(token)
    if publisher.lower() != deployer_object_id.lower():
        raise DeployerIdentityError(
            f"the package would be published by object id {publisher}, but azure-native "
            f"deploys as {deployer_object_id}; sign both in the same way (ARM_* variables or "
            "`az login`, see docs/deployment.md, Deploy)"
        )


PUBLISH_PATH: Final = "/api/publish?RemoteBuild=false"
STATUS_PATH: Final = "/api/deployments/latest"
"""Where Microsoft's tooling reads a Flex Consumption deployment's progress (Azure/azure-dev
issue 3658, the Flex Consumption deploy contract): the latest deployment, not an id."""
PROPAGATION_STATUSES: Final = frozenset({401, 403})
"""What the SCM host answers while the deployer's role on a new app has not propagated yet."""
UNAVAILABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
"""What the SCM host of a site still starting may answer: throttled, or not serving yet."""
STORAGE_REFUSALS: Final = (
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "AuthorizationFailed",
)
"""Blob Storage's error codes for a request its RBAC refuses ("Blob Storage error codes",
https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes, and ARM's): in a
failed deployment's status text, the app identity's role on the runtime account not yet in
effect."""
NOT_YET: Final = frozenset({HTTPStatus.NOT_FOUND.value})
"""`/api/deployments/latest` before the first deployment of an app is recorded."""
PROPAGATION_DELAYS: Final = (5.0, 10.0, 20.0, 40.0, 60.0)
"""Seconds between attempts after a 401/403: five retries, about two and a quarter minutes."""


def publish_url(scm_host: str) -> str:
    if not scm_host:
        raise RuntimeError("ARM reported no SCM (Repository) host name for the function app")
    return f"https://{scm_host}{PUBLISH_PATH}"


def deployment_finished(status: Mapping[str, Any]) -> bool:
    """True on success, False while pending, building or deploying; raises on any other end.

    Kudu's codes (Azure/azure-dev issue 3658): -1 cancelled, 0 pending, 1 building, 2 deploying,
    3 failed, 4 success, 5 conflict, 6 partial success. A partial success is not a success.
    """
    code = status.get("status")
    if code == DEPLOYMENT_SUCCESS:
        return True
    if code in RUNNING_STATUSES:
        return False
    reason = status.get("status_text") or "no reason given"
    raise DeploymentFailed(f"the deployment ended with status {code!r}: {reason}")


class DeploymentFailed(RuntimeError):
    """Kudu reported the deployment as ended otherwise than in success."""

    @property
    def storage_refused(self) -> bool:
        """The deployment storage refused the app's identity (its role not yet in effect)."""
        return any(code in str(self) for code in STORAGE_REFUSALS)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass(frozen=True)
class Retry:
    """How long to wait between attempts that met a transient refusal, and how to wait."""

    delays: tuple[float, ...] = PROPAGATION_DELAYS
    sleep: Callable[[float], None] = time.sleep


def publish(
    scm_host: str,
    data: bytes,
    token: str,
    *,
    context: ssl.SSLContext | None = None,
    poll_seconds: float = 5.0,
    timeout_seconds: float = DEPLOYMENT_TIMEOUT_SECONDS,
    retry: Retry | None = None,
) -> str:
    """One deploy: POST the zip to `/api/publish`, then follow `/api/deployments/latest`.

    A 200 is the synchronous answer (done, or a status to judge); a 202 is accepted and polled.
    401/403 (the deployer's role not yet propagated) and an unavailable SCM host are retried
    with bounded backoff, and so is a deployment the deployment storage refused (the app's role
    on it not yet in effect). Returns the deployment id (or `latest`). Errors name the status
    and path, never the token.
    """
    retry = retry or Retry()
    for delay in (*retry.delays, None):
        try:
            return _publish_once(
                scm_host, data, token, context, poll_seconds, timeout_seconds, retry
            )
        except DeploymentFailed as failure:
            if not failure.storage_refused:
                raise
            if delay is None:
                raise DeploymentFailed(
                    f"{failure} ({len(retry.delays) + 1} attempts over "
                    f"{sum(retry.delays):.0f} s): the deployment storage refused the app's "
                    "identity; its Storage Blob Data Owner role on the runtime account has not "
                    "taken effect yet, or was removed; run `pulumi up` again in a few minutes"
                ) from None
            retry.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _publish_once(
    scm_host: str,
    data: bytes,
    token: str,
    context: ssl.SSLContext | None,
    poll_seconds: float,
    timeout_seconds: float,
    retry: Retry,
) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(  # noqa: S310 (publish_url builds an https URL)
        publish_url(scm_host),
        data=data,
        method="POST",
        headers={**headers, "Content-Type": "application/zip"},
    )
    answer = _call_retrying(request, context, retry)
    published = _json_or_none(answer.body)
    named = _named_deployment(published)
    if answer.status == HTTPStatus.OK:
        status = _status_or_none(published)
        if status is None or deployment_finished(status):
            return str((status or {}).get("id") or named or "latest")
    status_url = f"https://{scm_host}{STATUS_PATH}"
    deadline = time.monotonic() + timeout_seconds
    while True:
        polled = _call_retrying(
            urllib.request.Request(status_url, headers=headers), context, retry, NOT_YET
        )
        status = _status_or_none(_json_or_none(polled.body))
        if status is None and polled.status not in NOT_YET:
            raise RuntimeError(f"{STATUS_PATH} answered with a body that is not a JSON status")
        # Until the new deployment is the latest, `latest` may be missing (a first deployment)
        # or still the previous one.
        current = status is not None and (named is None or str(status.get("id")) == named)
        if current and status is not None and deployment_finished(status):
            return str(status.get("id") or named or "latest")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the deployment did not finish within {timeout_seconds:.0f} s")
        retry.sleep(poll_seconds)


def _json_or_none(body: bytes) -> Any:
    """The answer's JSON value (bounded, as every outside document), None when empty or not JSON."""
    if not body.strip():
        return None
    try:
        return untrusted.load_json(body, STATUS_PATH, max_bytes=MAX_JSON_BYTES)
    except ValueError:
        return None


def _named_deployment(parsed: Any) -> str | None:
    """The deployment id a 202 may carry (a JSON string or a status object), if any."""
    if isinstance(parsed, dict):
        parsed = parsed.get("id")
    return parsed if isinstance(parsed, str) and parsed else None


def _status_or_none(parsed: Any) -> dict[str, Any] | None:
    return parsed if isinstance(parsed, dict) and "status" in parsed else None


def _call_retrying(
    request: urllib.request.Request,
    context: ssl.SSLContext | None,
    retry: Retry,
    passed: frozenset[int] = frozenset(),
) -> Answer:
    """`_call`, again after each delay while the answer is 401/403 or the host unavailable;
    then a clear error. Statuses in `passed` are answers, not errors."""
    retried = PROPAGATION_STATUSES | UNAVAILABLE_STATUSES
    for delay in (*retry.delays, None):
        answer = _call(request, context, retried | passed)
        if answer.status not in retried:
            return answer
        if delay is None:
            break
        retry.sleep(delay)
    path = urllib.parse.urlsplit(request.full_url).path
    why = (
        "the deploying identity has no role on the app that allows publishing (Contributor or "
        "Website Contributor), or it has not propagated yet"
        if answer.status in PROPAGATION_STATUSES
        else "the app's SCM host is not serving yet"
    )
    raise RuntimeError(
        f"{request.get_method()} {path} answered {answer.status} "
        f"{HTTPStatus(answer.status).phrase} {len(retry.delays) + 1} times over "
        f"{sum(retry.delays):.0f} s: {why}; run `pulumi up` again in a few minutes"
    )


def _call(
    request: urllib.request.Request, context: ssl.SSLContext | None, passed: frozenset[int]
) -> Answer:
    try:
        with urllib.request.urlopen(request, timeout=300, context=context) as response:  # noqa: S310
            return Answer(int(response.status), bytes(response.read()))
    except urllib.error.HTTPError as error:
        if error.code in passed:
            return Answer(error.code, b"")
        path = urllib.parse.urlsplit(request.full_url).path
        raise RuntimeError(
            f"{request.get_method()} {path} answered {error.code} {error.reason}"
        ) from None


class _PackagePublisher(ResourceProvider):
    """Runs in the engine's dynamic-provider host, never under test mocks."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._publish(props)
        return CreateResult(id_=f"{props['appId']}/package/{props['sha256']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("appId", "scmHost", "sha256")
        changed = [key for key in keys if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._publish(news)
        return UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # The package goes with the app and its runtime account.
        return None

    @staticmethod
    def _publish(props: dict[str, Any]) -> None:
        import os

        data = Path(props["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != props["sha256"]:
            raise RuntimeError(f"{props['path']} changed during the update; run it again")
        credential = build_credential(choose_credential(os.environ), os.environ)
        token = credential.get_token(ARM_SCOPE).token
        check_same_identity(token, props["deployerObjectId"])
        publish(props["scmHost"], data, token)


class FunctionPackage(pulumi.dynamic.Resource, module="safetynet", name="FunctionPackage"):
    """The zip published to the app with One deploy, published again when its hash changes."""

    sha256: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        package: PackageFile,
        app_id: pulumi.Input[str],
        scm_host: pulumi.Input[str],
        deployer_object_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            _PackagePublisher(),
            name,
            {
                "appId": app_id,
                "scmHost": scm_host,
                "deployerObjectId": deployer_object_id,
                "path": str(package.path),
                "sha256": package.sha256,
                "size": package.size,
            },
            opts,
        )
