"""The live audit: read accounts through ARM with the real azure-mgmt clients, judge them.

Reads per account: the account (from the listing, or get_properties), blob service properties,
containers, the management policy (404 = none), and role assignments at the account's scope with
their role definitions (cached per run). A read that fails leaves its facet UNKNOWN and is
reported as what it is (authentication, missing permission, malformed answer), never as a rule
failure. Accounts are audited concurrently on a thread pool.

How ARM is reached (endpoint, credential, transport, what a failed read is) is in
`connection.py`; what an audit produces, for every source and report, in `results.py`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from azure.core.credentials import TokenCredential
from azure.core.exceptions import (
    DeserializationError,
    ResourceNotFoundError,
)
from azure.core.rest import HttpRequest

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.rules.base import BLOB_FACETS, NO_BLOB_KINDS
from blob_safetynet.policies.rules.model import Facet, Thresholds, arm_fold
from blob_safetynet.policies.sources.connection import (
    READ_ERRORS,
    check_arm_endpoint,
    classify,
    client_options,
)
from blob_safetynet.policies.sources.results import (
    AccountResult,
    AuditReport,
    ReadError,
    Scope,
)
from blob_safetynet.policies.sources.throttle import SharedThrottle

if TYPE_CHECKING:
    from azure.mgmt.authorization import AuthorizationManagementClient
    from azure.mgmt.storage import StorageManagementClient


DEFAULT_CONCURRENCY = 8


STORAGE_API_VERSION = arm.STORAGE_API_VERSION


"""The Microsoft.Storage api-version every read uses, whatever azure-mgmt-storage defaults to:
an SDK upgrade must not silently change what the audit sees. Clouds that lag (sovereign
clouds) take `--storage-api-version`; an older version cannot show
`allowSharedKeyAccessForServices`, and the shared key rule says so (UNKNOWN)."""


DEFENDER_API_VERSION = "2025-01-01"


"""The Microsoft.Security api-version of defenderForStorageSettings (its first GA version;
2022-12-01-preview introduced the per-account setting)."""


PRICINGS_API_VERSION = "2024-01-01"


"""The Microsoft.Security api-version of the subscription's Defender plans (pricings)."""


T = TypeVar("T")


Attempt = Callable[[Facet, str, Callable[[], Any]], Any]


"""Runs one read; a failed read is recorded and leaves its facet UNKNOWN (None returned)."""


@dataclass(frozen=True)
class Prefetched:
    """What a fleet audit read for one account from Resource Graph and per-subscription lists
    (blob_safetynet/policies/sources/fleet.py), so that `ArmReader.read` does not read it again."""

    role_assignments: Sequence[Mapping[str, Any]] | None = None
    """Every assignment that applies to the account; None: read per account."""
    role_definitions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Role definition bodies by lower-case GUID; one not here is read (cached per run)."""
    connections_in_body: bool = False
    """Take `properties.privateEndpointConnections` from the account's body when it is there."""


def _as_dict(model: Any) -> dict[str, Any]:
    """An SDK model as its REST JSON shape (camelCase keys, `properties` nested)."""
    if hasattr(model, "as_dict") and not hasattr(model, "serialize"):
        body: dict[str, Any] = model.as_dict()
        return body
    serialized: dict[str, Any] = model.serialize(keep_readonly=True)
    return serialized


class FetchedOnce(Generic[T]):
    """Values by key, each fetched by the first worker that asks while the others wait for it:
    a check, then a fetch outside any lock, would let two workers read the same thing twice."""

    def __init__(self) -> None:
        self._values: dict[str, T] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: str, fetch: Callable[[], T]) -> T:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = fetch()
            return self._values[key]


class ArmReader:
    """The azure-mgmt clients for one subscription, shared by the worker threads."""

    def __init__(
        self,
        credential: TokenCredential,
        subscription_id: str,
        *,
        arm_endpoint: str | None = None,
        allow_custom_endpoint: bool = False,
        concurrency: int = DEFAULT_CONCURRENCY,
        connection_verify: str | bool | None = None,
        storage_api_version: str = STORAGE_API_VERSION,
        subscription_reads: bool = True,
        throttle: SharedThrottle | None = None,
        definitions: FetchedOnce[dict[str, Any] | None] | None = None,
    ) -> None:
        if arm_endpoint is not None:
            check_arm_endpoint(arm_endpoint, allow_custom=allow_custom_endpoint)
        self.storage_api_version = storage_api_version
        self.subscription_reads = subscription_reads
        """False for an identity whose roles stop at a resource group (the verification
        timer's): the subscription's Defender plan is not read and its rule says why."""
        self.throttle = throttle or SharedThrottle()
        options = client_options(arm_endpoint, concurrency, connection_verify)
        # Imported here, not at the top: they take most of a second, and `audit --from-file`,
        # `verify` without an ARM scope and the rule catalogue never read ARM.
        from azure.mgmt.authorization import AuthorizationManagementClient
        from azure.mgmt.storage import StorageManagementClient

        self.storage: StorageManagementClient = StorageManagementClient(
            credential,
            subscription_id,
            api_version=storage_api_version,
            retry_policy=self.throttle.policy(),
            **options,
        )
        self.authorization: AuthorizationManagementClient = AuthorizationManagementClient(
            credential, subscription_id, retry_policy=self.throttle.policy(), **options
        )
        self._definitions: FetchedOnce[dict[str, Any] | None] = (
            FetchedOnce() if definitions is None else definitions
        )
        self._plans: FetchedOnce[dict[str, Any]] = FetchedOnce()
        self._inherited: FetchedOnce[list[dict[str, Any]] | None] = FetchedOnce()

    def list_accounts(self, scope: Scope) -> list[dict[str, Any]]:
        if scope.account:
            assert scope.resource_group
            one = self.storage.storage_accounts.get_properties(scope.resource_group, scope.account)
            return [_as_dict(one)]
        if scope.resource_group:
            pages: Iterable[Any] = self.storage.storage_accounts.list_by_resource_group(
                scope.resource_group
            )
        else:
            pages = self.storage.storage_accounts.list()
        return [_as_dict(item) for item in pages]

    def read(
        self, body: Mapping[str, Any], prefetched: Prefetched | None = None
    ) -> tuple[arm.ArmReads, list[ReadError]]:
        """Everything the rules need about one listed account, less what is `prefetched`."""
        known = prefetched or Prefetched()
        reads = arm.ArmReads(account=body, api_version=self.storage_api_version)
        errors: list[ReadError] = []
        name = str(body.get("name", "?"))
        resource_id = str(body.get("id", ""))
        group = _resource_group(resource_id)

        def attempt(facet: Facet, operation: str, call: Callable[[], T]) -> T | None:
            try:
                return call()
            except (*READ_ERRORS, DeserializationError, ValueError) as error:
                kind, message = classify(error)
                errors.append(ReadError(name, operation, kind, message))
                reads.reasons[facet] = f"{facet.value} not read ({kind.value}: {operation})"
                return None

        self._read_attachments(reads, group, name, resource_id, attempt, known)
        if body.get("kind") in NO_BLOB_KINDS:
            for facet in BLOB_FACETS:
                reads.reasons[facet] = f"{facet.value} not read (a {body['kind']} account)"
        else:
            self._read_blob_service(reads, group, name, attempt)
        assignments = (
            list(known.role_assignments)
            if known.role_assignments is not None
            else attempt(
                Facet.ROLES,
                "roleAssignments/list",
                lambda: [
                    _as_dict(a)
                    for a in self.authorization.role_assignments.list_for_scope(resource_id)
                ],
            )
        )
        if assignments is not None:
            reads.role_assignments = assignments
            ids = {_definition_id(a) for a in assignments} - {""}
            for definition_id in sorted(ids):
                guid = arm_fold(definition_id.rstrip("/").rsplit("/", 1)[-1])
                if guid in known.role_definitions:
                    reads.role_definitions[arm_fold(definition_id)] = known.role_definitions[guid]
                    continue
                definition = attempt(
                    Facet.ROLES,
                    "roleDefinitions/get",
                    functools.partial(self._definition, definition_id, resource_id),
                )
                if definition:
                    reads.role_definitions[arm_fold(definition_id)] = definition
        return reads, errors

    def inherited_assignments(self, subscription: str) -> list[dict[str, Any]] | None:
        """The role assignments at the subscription and above it (management groups, the
        root), which ARM chooses as the ones that apply there (Role Assignments - List For
        Subscription, `$filter=atScope()`: "all role assignments at or above the scope",
        https://learn.microsoft.com/rest/api/authorization/role-assignments/list-for-subscription);
        read once per subscription and run; None when the read failed (the caller reads per
        account instead)."""

        def fetch() -> list[dict[str, Any]] | None:
            try:
                listed = self.authorization.role_assignments.list_for_subscription(
                    filter="atScope()"
                )
                return [_as_dict(a) for a in listed]
            except (*READ_ERRORS, DeserializationError, ValueError):
                return None

        return self._inherited.get(arm_fold(subscription), fetch)

    def _read_blob_service(
        self, reads: arm.ArmReads, group: str, name: str, attempt: Attempt
    ) -> None:
        """The blob service's parts; kinds without one (FileStorage) answer these with 400."""
        service = attempt(
            Facet.BLOB_SERVICE,
            "blobServices/get",
            lambda: _as_dict(self.storage.blob_services.get_service_properties(group, name)),
        )
        if service is not None:
            reads.blob_service_properties = service
        containers = attempt(
            Facet.CONTAINERS,
            "blobContainers/list",
            lambda: [_as_dict(c) for c in self.storage.blob_containers.list(group, name)],
        )
        if containers is not None:
            reads.containers = containers
        policy = attempt(
            Facet.LIFECYCLE, "managementPolicies/get", lambda: self._policy(group, name)
        )
        if policy is not None:
            reads.management_policy = policy or None
        users = attempt(
            Facet.LOCAL_USERS,
            "localUsers/list",
            lambda: [_as_dict(u) for u in self.storage.local_users.list(group, name)],
        )
        if users is not None:
            reads.local_users = users

    def _read_attachments(
        self,
        reads: arm.ArmReads,
        group: str,
        name: str,
        resource_id: str,
        attempt: Attempt,
        known: Prefetched,
    ) -> None:
        """Private endpoint connections (from the account's body when `known` says so and it
        holds them) and the Defender for Storage setting (any kind)."""
        props = reads.account.get("properties")
        in_body = props.get("privateEndpointConnections") if isinstance(props, Mapping) else None
        connections = (
            [c for c in in_body if isinstance(c, Mapping)]
            if known.connections_in_body and isinstance(in_body, list)
            else attempt(
                Facet.PRIVATE_ENDPOINTS,
                "privateEndpointConnections/list",
                lambda: [
                    _as_dict(c) for c in self.storage.private_endpoint_connections.list(group, name)
                ],
            )
        )
        if connections is not None:
            reads.private_endpoint_connections = connections
        defender = attempt(
            Facet.DEFENDER, "defenderForStorageSettings/get", lambda: self._defender(resource_id)
        )
        if defender is not None:
            reads.defender_settings = defender or None
        if defender == {} and not self.subscription_reads:
            reads.reasons[Facet.DEFENDER] = (
                f"{Facet.DEFENDER.value} not read (the account has no Defender setting of its "
                "own, and the subscription's plan is a subscription-scope read outside this "
                "identity's roles; `safetynet audit` as a subscription Reader judges it)"
            )
        elif defender == {}:
            plan = attempt(
                Facet.DEFENDER, "pricings/get", lambda: self._plan(subscription_of(resource_id))
            )
            if plan is not None:
                reads.defender_plan = plan

    def _defender(self, resource_id: str) -> dict[str, Any]:
        """The account's Defender for Storage setting; {} when it has none (404)
        (https://learn.microsoft.com/rest/api/defenderforcloud/defender-for-storage/get)."""
        return self._security_get(
            f"{resource_id}/providers/Microsoft.Security/defenderForStorageSettings/current",
            DEFENDER_API_VERSION,
        )

    def _plan(self, subscription: str) -> dict[str, Any]:
        """The subscription's Defender for Storage plan (Pricings_Get, pricing name
        StorageAccounts: https://learn.microsoft.com/rest/api/defenderforcloud/pricings/get),
        read once per subscription and run."""
        return self._plans.get(
            subscription,
            lambda: self._security_get(
                f"/subscriptions/{subscription}/providers/Microsoft.Security/pricings/"
                "StorageAccounts",
                PRICINGS_API_VERSION,
            ),
        )

    def _security_get(self, path: str, api_version: str) -> dict[str, Any]:
        """A Microsoft.Security GET through the storage client's pipeline (azure-mgmt-security is
        not a dependency); {} for 404."""
        request = HttpRequest("GET", path, params={"api-version": api_version})
        response = self.storage.send_request(request)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def _policy(self, group: str, name: str) -> dict[str, Any]:
        """The management policy; {} when the account has none (ARM answers 404)."""
        try:
            return _as_dict(self.storage.management_policies.get(group, name, "default"))
        except ResourceNotFoundError:
            return {}

    def _definition(self, definition_id: str, scope: str) -> dict[str, Any] | None:
        """A role definition, read at the account's scope (Role Definitions - Get takes any
        scope: https://learn.microsoft.com/rest/api/authorization/role-definitions/get), so a
        Reader on the account's resource group reads it; its subscription-form id would be a
        subscription-scope read."""
        guid = definition_id.rstrip("/").rsplit("/", 1)[-1]
        return self._definitions.get(
            arm_fold(definition_id),
            lambda: _as_dict(self.authorization.role_definitions.get(scope.lstrip("/"), guid)),
        )


def _definition_id(assignment: Mapping[str, Any]) -> str:
    props = assignment.get("properties")
    value = props.get("roleDefinitionId") if isinstance(props, Mapping) else None
    return value if isinstance(value, str) else ""


def subscription_of(resource_id: str) -> str:
    """The subscription id an ARM resource id names, '' when it names none."""
    parts = resource_id.strip("/").split("/")
    return parts[1] if len(parts) > 1 and arm_fold(parts[0]) == "subscriptions" else ""


def _resource_group(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    lowered = [arm_fold(part) for part in parts]
    if "resourcegroups" in lowered:
        index = lowered.index("resourcegroups")
        if index + 1 < len(parts):
            return parts[index + 1]
    return ""


def run_audit(
    scope: Scope,
    credential: TokenCredential,
    *,
    thresholds: Thresholds | None = None,
    arm_endpoint: str | None = None,
    allow_custom_endpoint: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    connection_verify: str | bool | None = None,
    storage_api_version: str = STORAGE_API_VERSION,
    subscription_reads: bool = True,
    throttle: SharedThrottle | None = None,
) -> AuditReport:
    """Audit every account in `scope`; `concurrency` accounts are read at once.

    Raises SettingsError before anything is sent when `arm_endpoint` breaks the endpoint rule
    (`check_arm_endpoint`). `subscription_reads=False` reads nothing above the accounts'
    resource groups (the Defender plan's rule is UNKNOWN with the reason)."""
    limits = thresholds or Thresholds()
    started = time.perf_counter()
    reader = ArmReader(
        credential,
        scope.subscription_id,
        arm_endpoint=arm_endpoint,
        allow_custom_endpoint=allow_custom_endpoint,
        concurrency=concurrency,
        connection_verify=connection_verify,
        storage_api_version=storage_api_version,
        subscription_reads=subscription_reads,
        throttle=throttle,
    )
    report = AuditReport(scope=scope, thresholds=limits, results=[])
    try:
        bodies = reader.list_accounts(scope)
    except (*READ_ERRORS, DeserializationError, ValueError) as error:
        kind, message = classify(error)
        report.errors.append(ReadError(scope.account, "storageAccounts/list", kind, message))
        report.seconds = time.perf_counter() - started
        return report

    def audit_one(body: Mapping[str, Any]) -> AccountResult:
        reads, errors = reader.read(body)
        account = arm.account(reads)
        findings = evaluate(account, limits, every_rule=scope.account is not None)
        return AccountResult(account=account, findings=findings, errors=errors)

    if concurrency <= 1:
        results = [audit_one(body) for body in bodies]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results = list(pool.map(audit_one, bodies))
    report.results = sorted(results, key=lambda r: (r.account.name, r.account.resource_id or ""))
    report.seconds = time.perf_counter() - started
    return report
