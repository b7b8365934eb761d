"""The live audit: read accounts through ARM with the real azure-mgmt clients, judge them.

Reads per account: the account (from the listing, or get_properties), the Defender for Storage
setting, the management policy (404 = none), blob service properties, containers, local users,
role assignments at the account's scope with their role definitions (cached per run), and the
nets beside it (`extensions.py`: locks, blob diagnostic settings, backup instances). A
read that fails leaves its facet UNKNOWN and is reported as what it is (authentication, missing
permission, malformed answer, no answer), never as a rule failure. An account that ARM no longer
has when it is read (deleted after the listing) is reported as deleted, its rules
NOT_APPLICABLE, never judged on the 404s. Accounts are audited concurrently on a thread pool.

How ARM is reached (endpoint, credential, transport, what a failed read is) is in
`connection.py`; what the reads of one account share in `reads.py`; what an audit produces,
for every source and report, in `results.py`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core.credentials import TokenCredential
from azure.core.exceptions import DeserializationError, ResourceNotFoundError
from azure.core.rest import HttpRequest

from blob_safetynet.policies.adapters import arm, common
from blob_safetynet.policies.rules.base import BLOB_FACETS, NO_BLOB_KINDS
from blob_safetynet.policies.rules.model import Facet, Thresholds, arm_fold
from blob_safetynet.policies.sources.connection import (
    READ_ERRORS,
    READ_TIMEOUT_S,
    check_arm_endpoint,
    classify,
    client_options,
)
from blob_safetynet.policies.sources.extensions import ExtensionReader
from blob_safetynet.policies.sources.reads import (
    AccountRead,
    FetchedOnce,
    Prefetched,
    Presence,
    as_dict,
    definition_id,
    judge,
    local_users_settled,
    resource_group,
    subscription_of,
)
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, ReadError, Scope
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


"""The Microsoft.Security api-version of the subscription's Defender plans (pricings); the
first that reports `resourcesCoverageStatus`."""


T = TypeVar("T")


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
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        if arm_endpoint is not None:
            check_arm_endpoint(arm_endpoint, allow_custom=allow_custom_endpoint)
        self.storage_api_version = storage_api_version
        self.subscription_reads = subscription_reads
        """False for an identity whose roles stop at a resource group (the verification
        timer's): the subscription's Defender plan is not read and its rule says why."""
        self.throttle = throttle or SharedThrottle()
        options = client_options(
            arm_endpoint,
            concurrency,
            connection_verify,
            read_timeout_s=read_timeout_s,
            on_send=self.throttle.count_sent,
        )
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
        self.extensions = ExtensionReader(self.storage, subscription_reads=subscription_reads)
        self._definitions: FetchedOnce[dict[str, Any] | None] = (
            FetchedOnce() if definitions is None else definitions
        )
        self._plans: FetchedOnce[dict[str, Any]] = FetchedOnce()
        self._coverage: FetchedOnce[bool | None] = FetchedOnce()
        self._inherited: FetchedOnce[list[dict[str, Any]] | None] = FetchedOnce()

    def list_accounts(self, scope: Scope, errors: list[ReadError]) -> list[dict[str, Any]]:
        """The accounts of `scope`, as far as the listing went: a page that fails is a read
        error in `errors`, and the accounts of the pages before it are kept."""
        found: list[dict[str, Any]] = []
        try:
            if scope.account:
                assert scope.resource_group
                found.append(
                    as_dict(
                        self.storage.storage_accounts.get_properties(
                            scope.resource_group, scope.account
                        )
                    )
                )
                return found
            pages: Iterable[Any] = (
                self.storage.storage_accounts.list_by_resource_group(scope.resource_group)
                if scope.resource_group
                else self.storage.storage_accounts.list()
            )
            for item in pages:
                found.append(as_dict(item))
        except (*READ_ERRORS, DeserializationError, ValueError) as error:
            kind, message = classify(error)
            errors.append(ReadError(scope.account, "storageAccounts/list", kind, message))
        return found

    def read(self, body: Mapping[str, Any], prefetched: Prefetched | None = None) -> AccountRead:
        """Everything the rules need about one listed account, less what is `prefetched`."""
        known = prefetched or Prefetched()
        reads = arm.ArmReads(account=body, api_version=self.storage_api_version)
        errors: list[ReadError] = []
        name = str(body.get("name", "?"))
        resource_id = str(body.get("id", ""))
        group = resource_group(resource_id)
        presence = Presence()

        def attempt(
            facet: Facet, operation: str, call: Callable[[], T], *, exists: bool = False
        ) -> T | None:
            """`call()`, or None with the failure recorded; `exists`: every live account
            answers this read, so a 404 means the account is gone."""
            try:
                value = call()
            except ResourceNotFoundError as error:
                if exists:
                    presence.gone = True
                return self._failed(reads, errors, name, facet, operation, error)
            except (*READ_ERRORS, DeserializationError, ValueError) as error:
                return self._failed(reads, errors, name, facet, operation, error)
            presence.proven = presence.proven or exists
            return value

        self._read_defender(reads, resource_id, attempt, known, presence)
        blob = body.get("kind") not in NO_BLOB_KINDS
        if blob:
            policy = attempt(
                Facet.LIFECYCLE, "managementPolicies/get", lambda: self._policy(group, name)
            )
            if policy is not None:
                reads.management_policy = policy or None
                presence.maybe_gone = presence.maybe_gone or not policy
        else:
            for facet in (*BLOB_FACETS, Facet.DIAGNOSTICS, Facet.BACKUP):
                reads.reasons[facet] = f"{facet.value} not read (a {body['kind']} account)"
        self._read_connections(reads, group, name, attempt, known)
        if blob:
            self._read_blob_service(reads, group, name, attempt, known)
        self._read_roles(reads, resource_id, attempt, known)
        self.extensions.read(reads, resource_id, attempt, known, blob=blob)
        if presence.gone or (
            presence.maybe_gone and not presence.proven and self._gone(group, name)
        ):
            return AccountRead(reads, [], deleted=True)
        return AccountRead(reads, errors)

    @staticmethod
    def _failed(
        reads: arm.ArmReads,
        errors: list[ReadError],
        name: str,
        facet: Facet,
        operation: str,
        error: Exception,
    ) -> None:
        kind, message = classify(error)
        errors.append(ReadError(name, operation, kind, message))
        reads.reasons[facet] = f"{facet.value} not read ({kind.value}: {operation})"
        return

    def _gone(self, group: str, name: str) -> bool:
        """Whether ARM answers 404 for the account itself (any other answer: it is there, or
        it cannot be told, and the reads stand)."""
        try:
            self.storage.storage_accounts.get_properties(group, name)
        except ResourceNotFoundError:
            return True
        except (*READ_ERRORS, DeserializationError, ValueError):
            return False
        return False

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
                return [as_dict(a) for a in listed]
            except (*READ_ERRORS, DeserializationError, ValueError):
                return None

        return self._inherited.get(arm_fold(subscription), fetch)

    def plan_coverage(self, subscription: str) -> bool | None:
        """`common.plan_coverage` of the subscription's plan, read once per subscription and
        run; None when the plan reports a mix or nothing, or cannot be read."""

        def fetch() -> bool | None:
            try:
                return common.plan_coverage(self._plan(subscription))
            except (*READ_ERRORS, DeserializationError, ValueError):
                return None

        return self._coverage.get(arm_fold(subscription), fetch)

    def _read_roles(
        self, reads: arm.ArmReads, resource_id: str, attempt: Any, known: Prefetched
    ) -> None:
        """The role assignments that apply to the account, and the definitions they name."""
        assignments = (
            list(known.role_assignments)
            if known.role_assignments is not None
            else attempt(
                Facet.ROLES,
                "roleAssignments/list",
                lambda: [
                    as_dict(a)
                    for a in self.authorization.role_assignments.list_for_scope(resource_id)
                ],
                exists=True,
            )
        )
        if assignments is None:
            return
        reads.role_assignments = assignments
        for named in sorted({definition_id(a) for a in assignments} - {""}):
            guid = arm_fold(named.rstrip("/").rsplit("/", 1)[-1])
            if guid in known.role_definitions:
                reads.role_definitions[arm_fold(named)] = known.role_definitions[guid]
                continue
            definition = attempt(
                Facet.ROLES,
                "roleDefinitions/get",
                functools.partial(self._definition, named, resource_id),
            )
            if definition:
                reads.role_definitions[arm_fold(named)] = definition

    def _read_blob_service(
        self, reads: arm.ArmReads, group: str, name: str, attempt: Any, known: Prefetched
    ) -> None:
        """The blob service's parts; kinds without one (FileStorage) answer these with 400.
        Every live account has a blob service and lists, so a 404 here means it is gone."""
        service = attempt(
            Facet.BLOB_SERVICE,
            "blobServices/get",
            lambda: as_dict(self.storage.blob_services.get_service_properties(group, name)),
            exists=True,
        )
        if service is not None:
            reads.blob_service_properties = service
        containers = attempt(
            Facet.CONTAINERS,
            "blobContainers/list",
            lambda: [as_dict(c) for c in self.storage.blob_containers.list(group, name)],
            exists=True,
        )
        if containers is not None:
            reads.containers = containers
        if known.local_users_from_settings and local_users_settled(reads.account):
            reads.local_users = []
            return
        users = attempt(
            Facet.LOCAL_USERS,
            "localUsers/list",
            lambda: [as_dict(u) for u in self.storage.local_users.list(group, name)],
            exists=True,
        )
        if users is not None:
            reads.local_users = users

    def _read_connections(
        self, reads: arm.ArmReads, group: str, name: str, attempt: Any, known: Prefetched
    ) -> None:
        """Private endpoint connections, from the account's body when `known` says so and it
        holds them."""
        props = reads.account.get("properties")
        in_body = props.get("privateEndpointConnections") if isinstance(props, Mapping) else None
        connections = (
            [c for c in in_body if isinstance(c, Mapping)]
            if known.connections_in_body and isinstance(in_body, list)
            else attempt(
                Facet.PRIVATE_ENDPOINTS,
                "privateEndpointConnections/list",
                lambda: [
                    as_dict(c) for c in self.storage.private_endpoint_connections.list(group, name)
                ],
                exists=True,
            )
        )
        if connections is not None:
            reads.private_endpoint_connections = connections

    def _read_defender(
        self,
        reads: arm.ArmReads,
        resource_id: str,
        attempt: Any,
        known: Prefetched,
        presence: Presence,
    ) -> None:
        """The Defender for Storage state (any kind): from the subscription's plan where it
        covers every account or none and `known` allows it, else the account's own setting,
        else the plan."""
        subscription = subscription_of(resource_id)
        if known.defender_from_plan and self.subscription_reads:
            covered = self.plan_coverage(subscription)
            if covered is not None:
                reads.defender_covered = covered
                return
        defender = attempt(
            Facet.DEFENDER, "defenderForStorageSettings/get", lambda: self._defender(resource_id)
        )
        if defender is not None:
            reads.defender_settings = defender or None
            presence.maybe_gone = presence.maybe_gone or not defender
        if defender == {} and not self.subscription_reads:
            reads.reasons[Facet.DEFENDER] = (
                f"{Facet.DEFENDER.value} not read (the account has no Defender setting of its "
                "own, and the subscription's plan is a subscription-scope read outside this "
                "identity's roles; `safetynet audit` as a subscription Reader judges it)"
            )
        elif defender == {}:
            plan = attempt(Facet.DEFENDER, "pricings/get", lambda: self._plan(subscription))
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
            return as_dict(self.storage.management_policies.get(group, name, "default"))
        except ResourceNotFoundError:
            return {}

    def _definition(self, named: str, scope: str) -> dict[str, Any] | None:
        """A role definition, read at the account's scope (Role Definitions - Get takes any
        scope: https://learn.microsoft.com/rest/api/authorization/role-definitions/get), so a
        Reader on the account's resource group reads it; its subscription-form id would be a
        subscription-scope read."""
        guid = named.rstrip("/").rsplit("/", 1)[-1]
        return self._definitions.get(
            arm_fold(named),
            lambda: as_dict(self.authorization.role_definitions.get(scope.lstrip("/"), guid)),
        )


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
    read_timeout_s: float = READ_TIMEOUT_S,
) -> AuditReport:
    """Audit every account in `scope`; `concurrency` accounts are read at once.

    Raises SettingsError before anything is sent when `arm_endpoint` breaks the endpoint rule
    (`check_arm_endpoint`). `subscription_reads=False` reads nothing above the accounts'
    resource groups (the Defender plan's rule is UNKNOWN with the reason)."""
    limits = thresholds or Thresholds()
    started = time.perf_counter()
    gate = throttle or SharedThrottle()
    sent = gate.sent
    reader = ArmReader(
        credential,
        scope.subscription_id,
        arm_endpoint=arm_endpoint,
        allow_custom_endpoint=allow_custom_endpoint,
        concurrency=concurrency,
        connection_verify=connection_verify,
        storage_api_version=storage_api_version,
        subscription_reads=subscription_reads,
        throttle=gate,
        read_timeout_s=read_timeout_s,
    )
    report = AuditReport(scope=scope, thresholds=limits, results=[])
    bodies = reader.list_accounts(scope, report.errors)

    def audit_one(body: Mapping[str, Any]) -> AccountResult:
        return judge(reader.read(body), limits, every_rule=scope.account is not None)

    if concurrency <= 1:
        results = [audit_one(body) for body in bodies]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results = list(pool.map(audit_one, bodies))
    report.results = sorted(results, key=lambda r: (r.account.name, r.account.resource_id or ""))
    report.seconds = time.perf_counter() - started
    report.requests = gate.sent - sent
    return report
