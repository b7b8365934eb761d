"""A fake Azure Resource Manager on loopback HTTPS, serving recorded-shape JSON.

It answers the GETs the audit makes (storage accounts, blob services, containers, management
policies, role assignments and definitions) with bodies in the REST shape, pages lists through
`nextLink`, checks the bearer token, and can answer any route with a chosen status or a
malformed body. An optional per-request delay models a cloud round trip.

Over 500 lines: a test double (never shipped), one route table of Resource Manager GETs with
the bodies in their REST shape.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from blob_safetynet.policies.sources.fleet_roles import (
    ROLE_ASSIGNMENTS_QUERY,
    ROLE_DEFINITIONS_QUERY,
)
from blob_safetynet.policies.sources.graph import ACCOUNTS_QUERY, SUBSCRIPTIONS_QUERY
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER, PENDING, STATE_TAG
from testkit.tls import make_tls_files

SUBSCRIPTION = "00000000-0000-0000-0000-00000000a0d1"
TOKEN = "fake-arm-token"  # noqa: S105 (a test double's token, checked by the fake itself)
PROVIDER = "/providers/Microsoft.Storage/storageAccounts"
ROLE_DEFINITIONS = "/providers/Microsoft.Authorization/roleDefinitions"
BLOB_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
STORAGE_ACCOUNT_CONTRIBUTOR = "17d1049b-9a84-46fb-8f53-869881c3d3ab"
UPLOADER = "5a0f1b1e-0000-4000-8000-00000000a1d0"
"""A custom role shaped like blob_safetynet/infra/access.py's uploader role (a custom role's GUID is random)."""
APP_PRINCIPAL = "11111111-2222-3333-4444-555555555555"
_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"

MALFORMED = object()
"""Pass as a failure body to answer 200 with a body that is not JSON."""


@dataclass(frozen=True)
class Failure:
    status: int
    body: object = None
    """A dict (sent as JSON), MALFORMED, or None for ARM's error envelope for `status`."""


@dataclass
class NetworkFault:
    """A request answered with no HTTP answer: `drop` reads it and closes the connection with a
    TCP reset (azure-core: ServiceResponseError); `stall` holds the answer `seconds` (past the
    client's read timeout: ServiceResponseTimeoutError). It hits the next `times` requests that
    `where(method, path)` selects."""

    kind: str
    where: Callable[[str, str], bool]
    times: int = 1
    seconds: float = 0.0


ERROR_CODES = {
    400: "FeatureNotSupportedForAccount",
    401: "InvalidAuthenticationToken",
    403: "AuthorizationFailed",
    404: "NotFound",
    429: "TooManyRequests",
}
BLOB_OPERATIONS = ("blobServices", "containers", "managementPolicies", "localUsers")
DEFENDER_SETTINGS = "providers/microsoft.security/defenderforstoragesettings/current"


def error_body(status: int) -> dict[str, Any]:
    code = ERROR_CODES.get(status, "InternalError")
    return {"error": {"code": code, "message": f"The fake ARM server answers {status} {code}."}}


@dataclass
class FakeAccount:
    """One account's ARM documents; `failures` maps an operation name to a forced answer."""

    name: str
    resource_group: str
    body: dict[str, Any]
    blob_service_properties: dict[str, Any]
    containers: list[dict[str, Any]]
    management_policy: dict[str, Any] | None
    role_assignments: list[dict[str, Any]]
    failures: dict[str, Failure] = field(default_factory=dict)
    private_endpoint_connections: list[dict[str, Any]] = field(default_factory=list)
    local_users: list[dict[str, Any]] = field(default_factory=list)
    defender: dict[str, Any] | None = None
    """The Defender for Storage setting; None answers 404."""
    locks: list[dict[str, Any]] = field(default_factory=list)
    """Management locks at the account itself."""
    diagnostic_settings: list[dict[str, Any]] = field(default_factory=list)
    """The blob service's diagnostic settings."""
    backup_instances: list[dict[str, Any]] = field(default_factory=list)
    """Backup instances whose data source is the account (Extension Routing - List)."""
    deleted: bool = False
    """Deleted after Resource Graph's snapshot: Resource Graph still lists it, every ARM read
    of it answers 404 ResourceNotFound."""

    @property
    def id(self) -> str:
        return str(self.body["id"])

    @property
    def subscription(self) -> str:
        return self.id.split("/")[2]


def role_definition_id(guid: str) -> str:
    return f"/subscriptions/{SUBSCRIPTION}{ROLE_DEFINITIONS}/{guid}"


def built_in_definitions() -> dict[str, dict[str, Any]]:
    """Role definition bodies by lower-case id, as ARM returns them."""
    blob_owner = {
        "roleName": "Storage Blob Data Owner",
        "type": "BuiltInRole",
        "permissions": [
            {
                "actions": ["Microsoft.Storage/storageAccounts/blobServices/containers/*"],
                "notActions": [],
                "dataActions": [
                    "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/*"
                ],
                "notDataActions": [],
            }
        ],
    }
    owner = {
        "roleName": "Owner",
        "type": "BuiltInRole",
        "permissions": [
            {"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []}
        ],
    }
    account_contributor = {
        "roleName": "Storage Account Contributor",
        "type": "BuiltInRole",
        "permissions": [
            {
                "actions": [
                    "Microsoft.Authorization/*/read",
                    "Microsoft.Resources/deployments/*",
                    "Microsoft.Resources/subscriptions/resourceGroups/read",
                    "Microsoft.Storage/storageAccounts/*",
                    "Microsoft.Support/*",
                ],
                "notActions": [],
                "dataActions": [],
                "notDataActions": [],
            }
        ],
    }
    uploader = {
        "roleName": "safetynet uploader",
        "type": "CustomRole",
        "permissions": [
            {
                "actions": [],
                "notActions": [],
                "dataActions": [
                    f"{_BLOBS}/read",
                    f"{_BLOBS}/add/action",
                    f"{_BLOBS}/write",
                    f"{_BLOBS}/tags/write",
                    f"{_BLOBS}/tags/read",
                    f"{_BLOBS}/delete",
                ],
                "notDataActions": [],
            }
        ],
    }
    bodies = {}
    roles = (
        (BLOB_OWNER, blob_owner),
        (OWNER, owner),
        (STORAGE_ACCOUNT_CONTRIBUTOR, account_contributor),
        (UPLOADER, uploader),
    )
    for guid, props in roles:
        rid = role_definition_id(guid)
        bodies[rid.lower()] = {
            "id": rid,
            "name": guid,
            "type": "Microsoft.Authorization/roleDefinitions",
            "properties": props,
        }
    return bodies


def assignment(
    account_id: str,
    principal: str,
    role_guid: str,
    number: int = 1,
    *,
    condition: str | None = None,
    principal_type: str = "ServicePrincipal",
) -> dict[str, Any]:
    name = f"{number:08d}-0000-0000-0000-{abs(hash((account_id, principal))) % 10**12:012d}"
    return {
        "id": f"{account_id}/providers/Microsoft.Authorization/roleAssignments/{name}",
        "name": name,
        "type": "Microsoft.Authorization/roleAssignments",
        "properties": {
            "roleDefinitionId": role_definition_id(role_guid),
            "principalId": principal,
            "principalType": principal_type,
            "scope": account_id,
            "condition": condition,
            "conditionVersion": "2.0" if condition else None,
        },
    }


def compliant_account(
    name: str, resource_group: str = "rg-docs", subscription: str = SUBSCRIPTION
) -> FakeAccount:
    """An account every rule passes: the shape the infra program deploys."""
    account_id = f"/subscriptions/{subscription}/resourceGroups/{resource_group}{PROVIDER}/{name}"
    body = {
        "id": account_id,
        "name": name,
        "type": "Microsoft.Storage/storageAccounts",
        "location": "westeurope",
        "kind": "StorageV2",
        "sku": {"name": "Standard_GZRS", "tier": "Standard"},
        "properties": {
            "isHnsEnabled": False,
            "allowSharedKeyAccess": False,
            "allowBlobPublicAccess": False,
            "supportsHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "provisioningState": "Succeeded",
            "publicNetworkAccess": "Disabled",
            "networkAcls": {"defaultAction": "Deny", "bypass": "AzureServices"},
            "allowCrossTenantReplication": False,
            "encryption": {
                "keySource": "Microsoft.Keyvault",
                "requireInfrastructureEncryption": True,
                "keyvaultproperties": {
                    "keyname": "storage-cmk",
                    "keyvaulturi": "https://kv-docs.vault.azure.net/",
                },
            },
            "keyPolicy": {"keyExpirationPeriodInDays": 90},
            "sasPolicy": {"sasExpirationPeriod": "0.01:00:00", "expirationAction": "Log"},
            "isSftpEnabled": False,
            "isLocalUserEnabled": False,
        },
    }
    blob_service_properties = {
        "id": f"{account_id}/blobServices/default",
        "name": "default",
        "type": "Microsoft.Storage/storageAccounts/blobServices",
        "properties": {
            "deleteRetentionPolicy": {"enabled": True, "days": 14, "allowPermanentDelete": False},
            "containerDeleteRetentionPolicy": {"enabled": True, "days": 14},
            "isVersioningEnabled": True,
            "changeFeed": {"enabled": True, "retentionInDays": 30},
            "restorePolicy": {"enabled": True, "days": 7},
        },
    }
    container = {
        "id": f"{account_id}/blobServices/default/containers/{DEFAULT_CONTAINER}",
        "name": DEFAULT_CONTAINER,
        "type": "Microsoft.Storage/storageAccounts/blobServices/containers",
        "properties": {
            "publicAccess": "None",
            "hasImmutabilityPolicy": False,
            "hasLegalHold": False,
        },
    }
    policy = {
        "id": f"{account_id}/managementPolicies/default",
        "name": "DefaultManagementPolicy",
        "type": "Microsoft.Storage/storageAccounts/managementPolicies",
        "properties": {
            "policy": {
                "rules": [
                    {
                        "enabled": True,
                        "name": "delete-abandoned-uploads",
                        "type": "Lifecycle",
                        "definition": {
                            "filters": {
                                "blobTypes": ["blockBlob"],
                                "prefixMatch": [f"{DEFAULT_CONTAINER}/"],
                                "blobIndexMatch": [
                                    {"name": STATE_TAG, "op": "==", "value": PENDING}
                                ],
                            },
                            "actions": {
                                "baseBlob": {"delete": {"daysAfterCreationGreaterThan": 1}}
                            },
                        },
                    },
                    {
                        "enabled": True,
                        "name": "expire-old-versions",
                        "type": "Lifecycle",
                        "definition": {
                            "filters": {"blobTypes": ["blockBlob"]},
                            "actions": {
                                "version": {"delete": {"daysAfterCreationGreaterThan": 30}}
                            },
                        },
                    },
                ]
            }
        },
    }
    return FakeAccount(
        name=name,
        resource_group=resource_group,
        body=body,
        blob_service_properties=blob_service_properties,
        containers=[container],
        management_policy=policy,
        role_assignments=[assignment(account_id, APP_PRINCIPAL, UPLOADER)],
        private_endpoint_connections=[private_endpoint_connection(account_id)],
        defender=defender_setting(account_id, enabled=True),
        locks=[management_lock(account_id)],
        diagnostic_settings=[blob_diagnostic_setting(account_id)],
        backup_instances=[backup_instance(account_id)],
    )


def private_endpoint_connection(account_id: str, status: str = "Approved") -> dict[str, Any]:
    """The shape of GET .../privateEndpointConnections (Microsoft.Storage REST reference:
    https://learn.microsoft.com/rest/api/storagerp/private-endpoint-connections/list)."""
    return {
        "id": f"{account_id}/privateEndpointConnections/pe-docs",
        "name": "pe-docs",
        "type": "Microsoft.Storage/storageAccounts/privateEndpointConnections",
        "properties": {
            "privateEndpoint": {"id": "/subscriptions/x/providers/Microsoft.Network/pe-docs"},
            "privateLinkServiceConnectionState": {"status": status, "description": "auto"},
            "provisioningState": "Succeeded",
        },
    }


def local_user(account_id: str, name: str = "sftpuser") -> dict[str, Any]:
    """https://learn.microsoft.com/rest/api/storagerp/local-users/list"""
    return {
        "id": f"{account_id}/localUsers/{name}",
        "name": name,
        "type": "Microsoft.Storage/storageAccounts/localUsers",
        "properties": {"hasSshPassword": True, "homeDirectory": "documents/"},
    }


def defender_setting(account_id: str, *, enabled: bool) -> dict[str, Any]:
    """https://learn.microsoft.com/rest/api/defenderforcloud/defender-for-storage/get"""
    return {
        "id": f"{account_id}/providers/Microsoft.Security/defenderForStorageSettings/current",
        "name": "current",
        "type": "Microsoft.Security/defenderForStorageSettings",
        "properties": {"isEnabled": enabled, "overrideSubscriptionLevelSettings": False},
    }


def management_lock(scope: str, name: str = "keep", level: str = "CanNotDelete") -> dict[str, Any]:
    """https://learn.microsoft.com/rest/api/resources/management-locks/get-by-scope"""
    return {
        "id": f"{scope}/providers/Microsoft.Authorization/locks/{name}",
        "name": name,
        "type": "Microsoft.Authorization/locks",
        "properties": {"level": level, "notes": "", "owners": []},
    }


def blob_diagnostic_setting(
    account_id: str,
    categories: tuple[str, ...] = ("StorageRead", "StorageWrite", "StorageDelete"),
    *,
    name: str = "blob-logs",
    workspace: bool = True,
) -> dict[str, Any]:
    """https://learn.microsoft.com/rest/api/monitor/diagnostic-settings/get"""
    props: dict[str, Any] = {
        "logs": [{"category": c, "enabled": True} for c in categories],
        "metrics": [{"category": "Transaction", "enabled": True}],
    }
    if workspace:
        props["workspaceId"] = (
            f"/subscriptions/{account_id.split('/')[2]}/resourceGroups/rg-logs/providers/"
            "Microsoft.OperationalInsights/workspaces/logs"
        )
    return {
        "id": f"{account_id}/blobServices/default/providers/microsoft.insights/"
        f"diagnosticSettings/{name}",
        "name": name,
        "type": "Microsoft.Insights/diagnosticSettings",
        "properties": props,
    }


def backup_instance(account_id: str, name: str = "blobs") -> dict[str, Any]:
    """https://learn.microsoft.com/rest/api/dataprotection/backup-instances-extension-routing/list"""
    subscription = account_id.split("/")[2]
    return {
        "id": f"/subscriptions/{subscription}/resourceGroups/rg-backup/providers/"
        f"Microsoft.DataProtection/backupVaults/vault/backupInstances/{name}",
        "name": name,
        "type": "Microsoft.DataProtection/backupVaults/backupInstances",
        "properties": {
            "friendlyName": name,
            "dataSourceInfo": {
                "resourceID": account_id,
                "datasourceType": "Microsoft.Storage/storageAccounts/blobServices",
                "objectType": "Datasource",
            },
            "currentProtectionState": "ProtectionConfigured",
            "objectType": "BackupInstance",
        },
    }


def file_storage_account(
    name: str, resource_group: str = "rg-docs", subscription: str = SUBSCRIPTION
) -> FakeAccount:
    """A premium file shares account (kind FileStorage): it has no blob service, so ARM answers
    its blob reads with 400 (the storage account overview lists FileStorage as "file shares
    only": https://learn.microsoft.com/azure/storage/common/storage-account-overview)."""
    account = compliant_account(name, resource_group, subscription)
    account.body["kind"] = "FileStorage"
    account.body["sku"] = {"name": "Premium_LRS", "tier": "Premium"}
    for operation in BLOB_OPERATIONS:
        account.failures[operation] = Failure(400)
    account.containers = []
    account.role_assignments = []
    return account


def set_path(document: dict[str, Any], path: str, value: object) -> None:
    """Sets a dotted path (list indices as numbers) in `document`, creating dicts on the way."""
    keys = path.split(".")
    node: Any = document
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


class FakeArm:
    """The server's state; mutate `accounts` between requests as a test needs."""

    def __init__(
        self,
        *,
        page_size: int = 100,
        latency_seconds: float = 0.0,
        storage_api_versions: frozenset[str] | None = None,
    ) -> None:
        self.accounts: dict[str, FakeAccount] = {}
        self.storage_api_versions = storage_api_versions
        """Microsoft.Storage api-versions this "cloud" serves (None: any), like a sovereign
        cloud that has not rolled out the newest one yet."""
        self.storage_api_versions_seen: set[str] = set()
        self.defender_plan: str | None = "Free"
        """The subscription's Defender for Storage pricing tier; None answers 404."""
        self.plans: dict[str, str | None] = {}
        """Lower-case subscription id -> its own pricing tier, over `defender_plan`."""
        self.plan_reports_coverage = True
        """Answer the plan with `resourcesCoverageStatus`, computed from the accounts' own
        settings and the tier as the audit reads them (Pricings - Get, 2024-01-01)."""
        self.plan_failure: Failure | None = None
        self.granted_scopes: tuple[str, ...] | None = None
        """The scopes the caller holds a control-plane read role at (None: everywhere). A GET
        outside them answers 403 AuthorizationFailed, as ARM answers a Reader on a resource
        group that reads the subscription's resources, and is listed in `refused`."""
        self.refused: list[str] = []
        self.definitions = built_in_definitions()
        self.page_size = page_size
        self.latency_seconds = latency_seconds
        self.token = TOKEN
        self.requests = 0
        self.unreadable_subscriptions: set[str] = set()
        """Lower-case subscription ids this caller may not read: 403 for every request
        under them, and for a Resource Graph query that names one."""
        self.management_groups: dict[str, set[str]] = {}
        """Management group id -> the lower-case subscription ids under it. Resource Graph
        answers a query of a group with the subscriptions under it the caller can read, and
        leaves the others out (a query naming an unreadable subscription is refused)."""
        self.descendants_failure: Failure | None = None
        """A forced answer to Management Groups - Get Descendants."""
        self.network_faults: list[NetworkFault] = []
        self.refuse_connections: Callable[[], bool] | None = None
        """While set, each new TLS connection for which it returns True is closed before the
        handshake (azure-core: ServiceRequestError), and every answer closes its connection
        so that each request opens a new one."""
        self.refused_connections = 0
        self.arrivals: list[tuple[float, str, str]] | None = None
        """Set to a list to record (monotonic time, method, path) of every request."""
        self.graph_quota_only = False
        """Answer Resource Graph's scheduled 429s without Retry-After, with only
        `x-ms-user-quota-remaining: 0` and `x-ms-user-quota-resets-after`."""
        self.graph_repeats_token = False
        """Answer every page with the $skipToken of the first one."""
        self.graph_empty_pages = False
        """Answer every page after the first empty, with a fresh $skipToken."""
        self.graph_rows_without_id = 0
        """Strip `id` from this many account rows (the first ones in name order)."""
        self.graph_page_size = 1000
        self.graph_truncates = False
        """Answer the first page with resultTruncated "true" and no $skipToken (what Resource
        Graph does for a query it cannot page)."""
        self.graph_requests = 0
        self.graph_failures: dict[str, Failure] = {}
        """Forced answers to Resource Graph queries by table kind: "storageaccounts",
        "roleassignments", "roledefinitions"."""
        self.graph_omits_connections = False
        """Serve account rows without `properties.privateEndpointConnections`."""
        self.group_locks: dict[str, list[dict[str, Any]]] = {}
        """Lower-case '{subscription}/{group}' -> the locks at that resource group."""
        self.subscription_locks: dict[str, list[dict[str, Any]]] = {}
        """Lower-case subscription id -> the locks at the subscription itself."""
        self.lock_failures: dict[str, Failure] = {}
        """Forced answers to the lock lists of "subscription" and "resourceGroup" scopes (an
        account's own list: its `failures["locks"]`), and to the Backup vault lists
        ("backupVaults")."""
        self.inherited_failure: Failure | None = None
        """A forced answer to a subscription's `roleAssignments?$filter=atScope()` list."""
        self.group_permissions: dict[str, object] = {}
        """Lower-case resource group name -> what Permissions - List For Resource Group answers
        there: the caller's permission entries (a list, paged like any list) or a Failure. A
        group not listed answers 404 ResourceGroupNotFound."""
        self.served: dict[str, int] = {}
        """Requests answered, by operation ("roleAssignments", "graph:roleassignments", ...)."""
        self.account_reads: Counter[str] = Counter()
        """Requests answered under each account (its name), whatever the operation."""
        self.subscription_reads: Counter[str] = Counter()
        """ARM GETs under each lower-case subscription that took a token of its read bucket."""
        self.graph_throttle_schedule: set[int] = set()
        """Resource Graph requests (1-based, in arrival order) answered 429 with Retry-After."""
        self.arm_throttle_schedule: set[int] = set()
        """ARM GETs (1-based, in arrival order) answered 429 with Retry-After."""
        self.retry_after_s = 1
        self.throttled_subscriptions: dict[str, int] = {}
        """Lower-case subscription id -> how many of its next ARM GETs answer 429 with
        Retry-After `retry_after_s` (that subscription's read bucket spent, the others not)."""
        self.subscription_list_answers: list[Failure] = []
        """Forced answers to GET /subscriptions, one a request in order, then the real list;
        a 429 carries Retry-After `retry_after_s`."""
        self.arm_gets = 0
        self.read_buckets: dict[str, TokenBucket] | None = None
        """Set by `model_arm_throttling`: one read bucket per subscription."""
        self.graph_quota: TokenBucket | None = None
        self.throttled = 0
        self._lock = threading.Lock()
        self._tmp = tempfile.TemporaryDirectory(prefix="safetynet-arm-")
        self.tls = make_tls_files(Path(self._tmp.name))
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add(self, account: FakeAccount) -> FakeAccount:
        self.accounts[account.name] = account
        return account

    def subscriptions(self) -> list[str]:
        """Every subscription some account is in, sorted."""
        return sorted({a.subscription.lower() for a in self.accounts.values()})

    def model_arm_throttling(self) -> None:
        """ARM's documented default read budget (a bucket of 250 per subscription, refilled at
        25 a second) and Resource Graph's example quota (15 queries per 5 seconds): see
        blob_safetynet/policies/sources/throttle.py for the sources."""
        self.read_buckets = {}
        self.graph_quota = TokenBucket(15, 15 / 5)

    # Throttling ------------------------------------------------------------------------------

    def admit(self, method: str, path: str) -> tuple[int | None, dict[str, str]]:
        """(429 or None, headers) for one request, before it is answered."""
        graph = method == "POST"
        named = None if graph else re.match(r"/subscriptions/([^/]+)", path.lower())
        with self._lock:
            if graph:
                self.graph_requests += 1
                scheduled = self.graph_requests in self.graph_throttle_schedule
                bucket = self.graph_quota
            else:
                self.arm_gets += 1
                scheduled = self.arm_gets in self.arm_throttle_schedule
                bucket = None
                if self.read_buckets is not None and named is not None:
                    bucket = self.read_buckets.setdefault(named.group(1), TokenBucket(250, 25))
        headers: dict[str, str] = {}
        if not graph and path.rstrip("/").lower() == "/subscriptions":
            with self._lock:
                forced = (
                    self.subscription_list_answers.pop(0)
                    if self.subscription_list_answers
                    else None
                )
            if forced is not None and forced.status == 429:
                return self._throttled(self.retry_after_s, headers)
            if forced is not None:
                return forced.status, headers
        if not graph and named is not None:
            with self._lock:
                left = self.throttled_subscriptions.get(named.group(1), 0)
                if left:
                    self.throttled_subscriptions[named.group(1)] = left - 1
            if left:
                return self._throttled(self.retry_after_s, headers)
        if scheduled and graph and self.graph_quota_only:
            with self._lock:
                self.throttled += 1
            headers["x-ms-user-quota-remaining"] = "0"
            headers["x-ms-user-quota-resets-after"] = time.strftime(
                "%H:%M:%S", time.gmtime(self.retry_after_s)
            )
            return 429, headers
        if scheduled:
            return self._throttled(self.retry_after_s, headers)
        if bucket is None:
            return None, headers
        taken, remaining, wait = bucket.take()
        if taken and named is not None:
            with self._lock:
                self.subscription_reads[named.group(1)] += 1
        if graph:
            headers["x-ms-user-quota-remaining"] = str(remaining)
            headers["x-ms-user-quota-resets-after"] = time.strftime(
                "%H:%M:%S", time.gmtime(bucket.seconds_to_full())
            )
        else:
            headers["x-ms-ratelimit-remaining-subscription-reads"] = str(remaining)
        return (None, headers) if taken else self._throttled(max(1, round(wait)), headers)

    def _throttled(self, seconds: int, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        with self._lock:
            self.throttled += 1
        headers["Retry-After"] = str(seconds)
        return 429, headers

    # Resource Graph --------------------------------------------------------------------------

    def graph(self, request: Mapping[str, Any]) -> tuple[int, object]:
        """POST /providers/Microsoft.ResourceGraph/resources: the storage accounts of the named
        subscriptions or management groups, `$top` a page, continued by `$skipToken`."""
        with self._lock:
            self.requests += 1
        kind = self._graph_kind(str(request.get("query", "")))
        if kind is None:
            return 400, error_body(400)
        self._count(f"graph:{kind}")
        if kind in self.graph_failures:
            failure = self.graph_failures[kind]
            return failure.status, failure.body or error_body(failure.status)
        subscriptions = {s.lower() for s in request.get("subscriptions") or []}
        if subscriptions & self.unreadable_subscriptions:
            return 403, error_body(403)
        for group in request.get("managementGroups") or []:
            if group not in self.management_groups:
                return 403, error_body(403)
            subscriptions |= self.management_groups[group] - self.unreadable_subscriptions
        if not request.get("subscriptions") and not request.get("managementGroups"):
            subscriptions = set(self.subscriptions()) - self.unreadable_subscriptions
        options = request.get("options") or {}
        top = min(int(options.get("$top") or 100), self.graph_page_size)
        token = options.get("$skipToken")
        start = int(base64.b64decode(token).decode()) if token else 0
        records = self._graph_records(kind, str(request.get("query", "")), subscriptions)
        page = records[start : start + top]
        members = records
        if token and (self.graph_repeats_token or self.graph_empty_pages):
            page = [] if self.graph_empty_pages else page
            following = start + top if self.graph_empty_pages else start
            return 200, {
                "totalRecords": len(members),
                "count": len(page),
                "resultTruncated": "false",
                "data": page,
                "facets": [],
                "$skipToken": base64.b64encode(str(following).encode()).decode(),
            }
        body: dict[str, Any] = {
            "totalRecords": len(members),
            "count": len(page),
            "resultTruncated": "false",
            "data": page,
            "facets": [],
        }
        if self.graph_truncates and start + top < len(members):
            body["resultTruncated"] = "true"
            return 200, body
        if start + top < len(members):
            body["$skipToken"] = base64.b64encode(str(start + top).encode()).decode()
        return 200, body

    @staticmethod
    def _graph_kind(query: str) -> str | None:
        """Which of the fleet's queries this is; None for any other text (answered 400), so
        that a query changed in blob_safetynet/policies/sources/fleet.py fails its tests here."""
        if query == ACCOUNTS_QUERY:
            return "storageaccounts"
        if query == SUBSCRIPTIONS_QUERY:
            return "subscriptions"
        if query == ROLE_ASSIGNMENTS_QUERY:
            return "roleassignments"
        head = ROLE_DEFINITIONS_QUERY.split("{names}")[0]
        if query.startswith(head) and re.fullmatch(r"('[0-9a-f-]+'(, )?)*", _names(query)):
            return "roledefinitions"
        return None

    def _graph_records(
        self, kind: str, query: str, subscriptions: set[str]
    ) -> list[dict[str, Any]]:
        """The rows of `kind` in `subscriptions`, filtered and ordered as the query says."""
        members = [a for a in self.accounts.values() if a.subscription.lower() in subscriptions]
        if kind == "subscriptions":
            return [{"subscriptionId": s} for s in sorted(subscriptions)]
        if kind == "storageaccounts":
            members.sort(key=lambda a: a.name)
            rows = [self._graph_row(a) for a in members]
            for number in range(min(self.graph_rows_without_id, len(rows))):
                rows[number] = {k: v for k, v in rows[number].items() if k != "id"}
            return rows
        if kind == "roleassignments":
            found: dict[str, dict[str, Any]] = {}
            for account in members:
                for item in account.role_assignments:
                    scope = str(item["properties"]["scope"]).lower()
                    below = scope.startswith("/subscriptions/") and "/resourcegroups/" in scope
                    on_storage = "/providers/microsoft.storage/storageaccounts/" in scope
                    if below and ("/providers/" not in scope or on_storage):
                        found.setdefault(str(item["id"]).lower(), item)
            return [found[key] for key in sorted(found)]
        wanted = {name.strip("'") for name in _names(query).split(", ")}
        return [
            body
            for key, body in sorted(self.definitions.items())
            if key.rsplit("/", 1)[-1] in wanted
        ]

    def _graph_row(self, account: FakeAccount) -> dict[str, Any]:
        """The account as Resource Graph holds it: its ARM body, with the read-only
        `properties.privateEndpointConnections` ARM returns in it."""
        if self.graph_omits_connections:
            return account.body
        props = dict(account.body.get("properties") or {})
        props["privateEndpointConnections"] = account.private_endpoint_connections
        return {**account.body, "properties": props}

    def _count(self, operation: str) -> None:
        with self._lock:
            self.served[operation] = self.served.get(operation, 0) + 1

    def _inherited(self, subscription: str) -> tuple[int, object]:
        """Role Assignments - List For Subscription with `$filter=atScope()`: the assignments at
        the subscription and above it, gathered from its accounts' assignments."""
        self._count("roleAssignments:atScope")
        if self.inherited_failure is not None:
            failure = self.inherited_failure
            return failure.status, failure.body or error_body(failure.status)
        found: dict[str, dict[str, Any]] = {}
        for account in self.accounts.values():
            if account.subscription.lower() != subscription:
                continue
            for item in account.role_assignments:
                scope = str(item["properties"]["scope"]).rstrip("/").lower()
                if scope == f"/subscriptions/{subscription}" or not scope.startswith(
                    "/subscriptions/"
                ):
                    found.setdefault(str(item["id"]).lower(), item)
        return 200, {"value": [found[key] for key in sorted(found)]}

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    @property
    def ca_file(self) -> str:
        return str(self.tls.ca)

    def take_network_fault(self, method: str, path: str) -> NetworkFault | None:
        with self._lock:
            for fault in self.network_faults:
                if fault.times > 0 and fault.where(method, path):
                    fault.times -= 1
                    return fault
        return None

    def refuses(self) -> bool:
        """Whether to close the next new connection before its TLS handshake."""
        refuse = self.refuse_connections
        if refuse is None or not refuse():
            return False
        with self._lock:
            self.refused_connections += 1
        return True

    def __enter__(self) -> FakeArm:
        handler = type("Handler", (_Handler,), {"fake": self})
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.tls.cert, self.tls.key)
        server = _TlsServer(("127.0.0.1", 0), handler, context, self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._tmp.cleanup()

    # Routing ---------------------------------------------------------------------------------

    def answer(self, path: str, query: Mapping[str, list[str]]) -> tuple[int, object]:
        with self._lock:
            self.requests += 1
        lowered = path.lower()
        if not self._granted(lowered):
            with self._lock:
                self.refused.append(path)
            return 403, error_body(403)
        if ROLE_DEFINITIONS.lower() in lowered:
            # Readable at any scope it is assignable at, by its GUID (Role Definitions - Get).
            self._count("roleDefinitions")
            guid = lowered.rsplit("/", 1)[-1]
            home = f"/subscriptions/{SUBSCRIPTION}".lower()
            definition = self.definitions.get(f"{home}{ROLE_DEFINITIONS.lower()}/{guid}")
            return (200, definition) if definition else (404, error_body(404))
        if lowered == "/subscriptions":
            self._count("subscriptions/list")
            return self._page(path, query, [{"subscriptionId": s} for s in self.subscriptions()])
        descendants = re.fullmatch(
            r"/providers/microsoft\.management/managementgroups/([^/]+)/descendants", lowered
        )
        if descendants is not None:
            return self._descendants(path, query, descendants.group(1))
        named = re.match(r"/subscriptions/([^/]+)", lowered)
        if named is None:
            return 404, error_body(404)
        sub = named.group(0)
        if named.group(1) in self.unreadable_subscriptions:
            return 403, error_body(403)
        permissions = re.fullmatch(
            rf"{re.escape(sub)}/resourcegroups/([^/]+)/providers/microsoft\.authorization/permissions",
            lowered,
        )
        if permissions is not None:
            return self._permissions(path, query, permissions.group(1))
        foreign = (
            "/providers/microsoft.authorization/",
            "/providers/microsoft.security/",
            "/providers/microsoft.insights/",
            "/providers/microsoft.dataprotection/",
        )
        if PROVIDER.lower() in lowered and not any(part in lowered for part in foreign):
            refused = self._refuse_api_version(query.get("api-version", [""])[0])
            if refused is not None:
                return refused
        if lowered == f"{sub}/providers/microsoft.authorization/roleassignments":
            if query.get("$filter") != ["atScope()"]:
                return 400, error_body(400)
            return self._inherited(named.group(1))
        if lowered == f"{sub}/providers/microsoft.authorization/locks":
            return self._locks(named.group(1), None)
        in_group = re.fullmatch(
            rf"{re.escape(sub)}/resourcegroups/([^/]+)/providers/microsoft\.authorization/locks",
            lowered,
        )
        if in_group is not None:
            return self._locks(named.group(1), in_group.group(1))
        if lowered == f"{sub}/providers/microsoft.dataprotection/backupvaults":
            return self._vaults(path, query, named.group(1), None)
        vault = re.fullmatch(
            rf"({re.escape(sub)}/resourcegroups/[^/]+/providers/microsoft\.dataprotection/"
            r"backupvaults/[^/]+)/backupinstances",
            lowered,
        )
        if vault is not None:
            return self._vaults(path, query, named.group(1), vault.group(1))
        if lowered == f"{sub}/providers/microsoft.security/pricings/storageaccounts":
            self._count("pricings")
            return self._plan(named.group(1))
        if lowered == f"{sub}{PROVIDER}".lower():
            members = [
                a for a in self.accounts.values() if a.subscription.lower() == named.group(1)
            ]
            return self._page(path, query, members)
        match = re.fullmatch(
            rf"{re.escape(sub)}/resourcegroups/([^/]+){re.escape(PROVIDER.lower())}(/.*)?",
            lowered,
        )
        if match is None:
            return 404, error_body(404)
        group, rest = match.group(1), match.group(2) or ""
        if not rest:
            members = [
                a
                for a in self.accounts.values()
                if a.resource_group.lower() == group and a.subscription.lower() == named.group(1)
            ]
            return self._page(path, query, members)
        name, _, tail = rest.strip("/").partition("/")
        account = self._account(named.group(1), group, name)
        if account is None or account.deleted:
            return 404, {
                "error": {
                    "code": "ResourceNotFound",
                    "message": f"The Resource 'Microsoft.Storage/storageAccounts/{name}' under "
                    f"resource group '{group}' was not found.",
                }
            }
        operation = {
            "": "get",
            "blobservices/default": "blobServices",
            "blobservices/default/containers": "containers",
            "managementpolicies/default": "managementPolicies",
            "providers/microsoft.authorization/roleassignments": "roleAssignments",
            "privateendpointconnections": "privateEndpointConnections",
            "localusers": "localUsers",
            DEFENDER_SETTINGS: "defender",
            "providers/microsoft.authorization/locks": "locks",
            "blobservices/default/providers/microsoft.insights/diagnosticsettings": (
                "diagnosticSettings"
            ),
            "providers/microsoft.dataprotection/backupinstances": "backupInstances",
        }.get(tail)
        if operation is None:
            return 404, error_body(404)
        self._count(operation)
        with self._lock:
            self.account_reads[account.name] += 1
        failure = account.failures.get(operation)
        if failure is not None:
            return failure.status, (
                failure.body if failure.body is not None else error_body(failure.status)
            )
        if operation == "get":
            return 200, account.body
        if operation == "blobServices":
            return 200, account.blob_service_properties
        if operation == "containers":
            return self._page(path, query, account.containers)
        if operation == "privateEndpointConnections":
            return self._page(path, query, account.private_endpoint_connections)
        if operation == "localUsers":
            return self._page(path, query, account.local_users)
        if operation == "defender":
            return (200, account.defender) if account.defender else (404, error_body(404))
        if operation in ("locks", "diagnosticSettings", "backupInstances"):
            listed = {
                "locks": account.locks,
                "diagnosticSettings": account.diagnostic_settings,
                "backupInstances": account.backup_instances,
            }[operation]
            return self._page(path, query, listed)
        if operation == "managementPolicies":
            if account.management_policy is None:
                return 404, {
                    "error": {
                        "code": "ManagementPolicyNotFound",
                        "message": "No ManagementPolicy found for account " + account.name,
                    }
                }
            return 200, account.management_policy
        return self._page(path, query, account.role_assignments)

    def _locks(self, subscription: str, group: str | None) -> tuple[int, object]:
        """Management Locks - List At Subscription Level / At Resource Group Level: the locks
        at the scope and at every scope below it (a group's, an account's)."""
        kind = "subscription" if group is None else "resourceGroup"
        self._count(f"locks:{kind}")
        failure = self.lock_failures.get(kind)
        if failure is not None:
            return failure.status, failure.body or error_body(failure.status)
        found = [] if group is not None else list(self.subscription_locks.get(subscription, []))
        for key, locks in sorted(self.group_locks.items()):
            sub, _, name = key.partition("/")
            if sub == subscription and (group is None or name == group):
                found += locks
        for account in self.accounts.values():
            same = account.subscription.lower() == subscription
            if same and (group is None or account.resource_group.lower() == group):
                found += account.locks
        return 200, {"value": found}

    def _vaults(
        self, path: str, query: Mapping[str, list[str]], subscription: str, vault: str | None
    ) -> tuple[int, object]:
        """Backup Vaults - Get In Subscription (vault None), or Backup Instances - List of one
        vault: the vaults are those the accounts' backup instances name in their ids."""
        self._count("backupVaults" if vault is None else "backupVaults/instances")
        failure = self.lock_failures.get("backupVaults")
        if failure is not None:
            return failure.status, failure.body or error_body(failure.status)
        by_vault: dict[str, list[dict[str, Any]]] = {}
        for account in self.accounts.values():
            for item in account.backup_instances:
                home = str(item["id"]).rsplit("/backupInstances/", 1)[0]
                if home.lower().split("/")[2] == subscription:
                    by_vault.setdefault(home, []).append(item)
        if vault is None:
            vaults = [
                {
                    "id": home,
                    "name": home.rsplit("/", 1)[-1],
                    "type": "Microsoft.DataProtection/backupVaults",
                }
                for home in sorted(by_vault)
            ]
            return self._page(path, query, vaults)
        found = [i for home, items in by_vault.items() if home.lower() == vault for i in items]
        return self._page(path, query, found)

    def _granted(self, lowered: str) -> bool:
        scopes = self.granted_scopes
        return scopes is None or any(
            lowered == scope.lower() or lowered.startswith(scope.lower().rstrip("/") + "/")
            for scope in scopes
        )

    def _plan(self, subscription: str) -> tuple[int, object]:
        """Pricings_Get for StorageAccounts (https://learn.microsoft.com/rest/api/defenderforcloud/pricings/get),
        with `resourcesCoverageStatus` from the accounts' own state."""
        if self.plan_failure is not None:
            failure = self.plan_failure
            return failure.status, failure.body or error_body(failure.status)
        tier = self.plans.get(subscription, self.defender_plan)
        if tier is None:
            return 404, error_body(404)
        props: dict[str, Any] = {"pricingTier": tier}
        if self.plan_reports_coverage:
            props["resourcesCoverageStatus"] = self._coverage(subscription, tier)
        return 200, {
            "id": f"/subscriptions/{subscription}/providers/Microsoft.Security/pricings/StorageAccounts",
            "name": "StorageAccounts",
            "type": "Microsoft.Security/pricings",
            "properties": props,
        }

    def _coverage(self, subscription: str, tier: str) -> str:
        """FullyCovered, NotCovered or PartiallyCovered: each account on by its own setting,
        or by the tier when it has none."""
        states = {
            bool(a.defender["properties"]["isEnabled"]) if a.defender else tier == "Standard"
            for a in self.accounts.values()
            if a.subscription.lower() == subscription and not a.deleted
        }
        if states == {True}:
            return "FullyCovered"
        return "NotCovered" if states <= {False} else "PartiallyCovered"

    def _descendants(
        self, path: str, query: Mapping[str, list[str]], group: str
    ) -> tuple[int, object]:
        """Management Groups - Get Descendants
        (https://learn.microsoft.com/rest/api/managementgroups/management-groups/get-descendants):
        every subscription under the group, readable or not."""
        self._count("managementGroups/descendants")
        if self.descendants_failure is not None:
            failure = self.descendants_failure
            return failure.status, failure.body or error_body(failure.status)
        names = {name.lower(): name for name in self.management_groups}
        if group not in names:
            return 404, error_body(404)
        items = [
            {
                "id": f"/subscriptions/{s}",
                "type": "/subscriptions",
                "name": s,
                "properties": {
                    "displayName": s,
                    "parent": {
                        "id": f"/providers/Microsoft.Management/managementGroups/{names[group]}"
                    },
                },
            }
            for s in sorted(self.management_groups[names[group]])
        ]
        return self._page(path, query, items)

    def _refuse_api_version(self, version: str) -> tuple[int, object] | None:
        """ARM's answer to a Microsoft.Storage api-version the cloud does not serve: 400
        NoRegisteredProviderFound (as Azure Government answered newer SDKs: Azure/azure-cli
        issue 7075, Azure/azure-powershell issue 14395)."""
        with self._lock:
            self.storage_api_versions_seen.add(version)
        if self.storage_api_versions is None or version in self.storage_api_versions:
            return None
        supported = ", ".join(sorted(self.storage_api_versions, reverse=True))
        return 400, {
            "error": {
                "code": "NoRegisteredProviderFound",
                "message": f"No registered resource provider found for location 'fakecloud' "
                f"and API version '{version}' for type 'storageAccounts'. The supported "
                f"api-versions are '{supported}'.",
            }
        }

    def _account(self, subscription: str, group: str, name: str) -> FakeAccount | None:
        account = self.accounts.get(name)
        if account is None or account.resource_group.lower() != group:
            return None
        return account if account.subscription.lower() == subscription else None

    def _permissions(
        self, path: str, query: Mapping[str, list[str]], group: str
    ) -> tuple[int, object]:
        self._count("permissions")
        if query.get("api-version") != ["2022-04-01"]:
            return 400, error_body(400)
        answer = self.group_permissions.get(group)
        if answer is None:
            return 404, {
                "error": {
                    "code": "ResourceGroupNotFound",
                    "message": f"Resource group '{group}' could not be found.",
                }
            }
        if isinstance(answer, Failure):
            return answer.status, error_body(answer.status) if answer.body is None else answer.body
        assert isinstance(answer, list)
        return self._page(path, query, answer)

    def _page(
        self, path: str, query: Mapping[str, list[str]], items: list[Any]
    ) -> tuple[int, object]:
        start = int(query.get("page", ["0"])[0])
        documents = [i.body if isinstance(i, FakeAccount) else i for i in items]
        body: dict[str, Any] = {"value": documents[start : start + self.page_size]}
        if start + self.page_size < len(documents):
            params = {k: v[0] for k, v in query.items() if k != "page"}
            params["page"] = str(start + self.page_size)
            body["nextLink"] = f"{self.endpoint}{path}?{urlencode(params)}"
        return 200, body


def _names(query: str) -> str:
    """The list inside `name in~ (...)` of the role definitions query."""
    found = re.search(r"name in~ \((.*?)\)", query)
    return found.group(1) if found else "<none>"


class TokenBucket:
    """`capacity` tokens, refilled at `rate` a second; thread-safe."""

    def __init__(self, capacity: int, rate: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self._tokens = float(capacity)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def take(self) -> tuple[bool, int, float]:
        """(taken, tokens left, seconds until one is back)."""
        with self._lock:
            self._refill()
            if self._tokens >= 1:
                self._tokens -= 1
                return True, int(self._tokens), 0.0
            return False, 0, (1 - self._tokens) / self.rate

    def seconds_to_full(self) -> float:
        with self._lock:
            self._refill()
            return (self.capacity - self._tokens) / self.rate


class _TlsServer(ThreadingHTTPServer):
    """Loopback HTTPS; a connection the fake refuses is closed before its TLS handshake."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        context: ssl.SSLContext,
        fake: FakeArm,
    ) -> None:
        super().__init__(address, handler)
        self._context = context
        self._fake = fake

    def get_request(self) -> tuple[Any, Any]:
        raw, address = self.socket.accept()
        if self._fake.refuses():
            _refuse(raw)
            raise OSError("connection refused by the fake")  # socketserver skips it
        try:
            return self._context.wrap_socket(raw, server_side=True), address
        except (OSError, ssl.SSLError):
            raw.close()
            raise


def _refuse(connection: socket.socket) -> None:
    """Read the client's TLS hello, then close without a word: the client's handshake meets the
    end of the stream (SSLEOFError), which azure-core raises as ServiceRequestError. Closing
    before the hello arrives, or with it unread, would reset the connection instead, which
    azure-core raises as a ServiceResponseError."""
    connection.settimeout(2)
    with contextlib.suppress(OSError):
        connection.recv(1 << 16)
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    connection.close()


def _reset(connection: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dropped connection looks to the client."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeArm
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self._serve("GET", url.path, lambda: self.fake.answer(url.path, parse_qs(url.query)))

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if url.path.lower() != "/providers/microsoft.resourcegraph/resources":
            self._send(404, error_body(404))
            return
        self._serve("POST", url.path, lambda: self.fake.graph(json.loads(raw or b"{}")))

    def _serve(self, method: str, path: str, answer: Callable[[], tuple[int, object]]) -> None:
        if self.fake.arrivals is not None:
            self.fake.arrivals.append((time.monotonic(), method, path))
        fault = self.fake.take_network_fault(method, path)
        if fault is not None and fault.kind == "drop":
            self.close_connection = True
            _reset(self.connection)
            return
        if fault is not None and fault.kind == "stall":
            time.sleep(fault.seconds)
        if self.fake.latency_seconds:
            time.sleep(self.fake.latency_seconds)
        if self.headers.get("Authorization") != f"Bearer {self.fake.token}":
            self._send(401, error_body(401))
            return
        refused, headers = self.fake.admit(method, path)
        if refused is not None:
            self._send(refused, error_body(refused), headers)
            return
        status, body = answer()
        self._send(status, body, headers)

    def _send(self, status: int, body: object, headers: Mapping[str, str] | None = None) -> None:
        data = b'{"value": [ {"id": ' if body is MALFORMED else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-ms-request-id", "fake")
        if self.fake.refuse_connections is not None:
            self.send_header("Connection", "close")
            self.close_connection = True
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):  # a client that gave up on a stalled answer
            self.wfile.write(data)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return


def fleet_subscription(number: int) -> str:
    """The id of the fleet's subscription `number` (0 is SUBSCRIPTION)."""
    return SUBSCRIPTION if number == 0 else f"00000000-0000-0000-0000-{number:012x}"


def fleet(
    count: int, resource_group: str = "rg-fleet", subscriptions: int = 1
) -> Iterator[FakeAccount]:
    """`count` compliant accounts dealt over `subscriptions` subscriptions, for the benchmark
    and paging tests."""
    for number in range(count):
        yield compliant_account(
            f"fleet{number:05d}", resource_group, fleet_subscription(number % subscriptions)
        )


def mixed_fleet(count: int, subscriptions: int) -> Iterator[FakeAccount]:
    """`fleet` with every third account public, every fifth without a management policy, every
    seventh a FileStorage account, every fourth locally redundant, every sixth without
    point-in-time restore and every eighth with a legal hold on the protocol's container:
    verdicts that differ from account to account."""
    for number, account in enumerate(fleet(count, subscriptions=subscriptions)):
        if number % 7 == 6:
            account = file_storage_account(
                account.name, account.resource_group, account.subscription
            )
        if number % 3 == 0:
            set_path(account.body, "properties.allowBlobPublicAccess", True)
        if number % 5 == 0:
            account.management_policy = None
        if number % 4 == 1:
            account.body["sku"] = {"name": "Standard_LRS", "tier": "Standard"}
        if number % 6 == 2:
            set_path(account.blob_service_properties, "properties.restorePolicy.enabled", False)
        if number % 8 == 3 and account.containers:
            account.containers[0]["properties"]["hasLegalHold"] = True
        yield account


__all__ = [
    "MALFORMED",
    "SUBSCRIPTION",
    "TOKEN",
    "Failure",
    "FakeAccount",
    "FakeArm",
    "backup_instance",
    "blob_diagnostic_setting",
    "compliant_account",
    "defender_setting",
    "file_storage_account",
    "fleet",
    "fleet_subscription",
    "local_user",
    "management_lock",
    "mixed_fleet",
    "private_endpoint_connection",
    "set_path",
]
