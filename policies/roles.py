"""Azure RBAC facts the rules and adapters need: permission matching and well-known roles.

Pure data and string matching; no SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

BLOBS: Final = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
TAG_WRITE: Final = f"{BLOBS}/tags/write"
PERMANENT_DELETE: Final = f"{BLOBS}/permanentDelete/action"
ROLE_ASSIGNMENT_WRITE: Final = "Microsoft.Authorization/roleAssignments/write"
LIST_KEYS: Final = "Microsoft.Storage/storageAccounts/listKeys/action"
ACCOUNT_WRITE: Final = "Microsoft.Storage/storageAccounts/write"

NEVER_GRANTED: Final = (LIST_KEYS, PERMANENT_DELETE, ACCOUNT_WRITE, ROLE_ASSIGNMENT_WRITE)
"""Actions no application identity may hold on the data account: each one undoes a net
(keys bypass RBAC, permanent delete purges soft-deleted blobs, account write turns soft delete,
shared key or public access back on, role assignment write grants any of these)."""

OWNER_LIKE: Final = (ROLE_ASSIGNMENT_WRITE, ACCOUNT_WRITE, LIST_KEYS)
"""Control-plane actions that make a role broad (Owner, Contributor, Storage Account
Contributor all hold at least one)."""

RESERVED_PREFIX: Final = ".safetynet/"
"""Blob paths the project keeps for its own housekeeping (the sweeper's lease blob, the
verification probes); documents never live there."""


def _pattern(action: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in action.split("*")), re.IGNORECASE)


def grants(allowed: tuple[str, ...], denied: tuple[str, ...], operation: str) -> bool:
    """True when some allowed pattern matches `operation` and no denied pattern does."""
    if not any(_pattern(action).fullmatch(operation) for action in allowed):
        return False
    return not any(_pattern(action).fullmatch(operation) for action in denied)


@dataclass(frozen=True)
class RoleDefinition:
    name: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    data_actions: tuple[str, ...] = ()
    not_data_actions: tuple[str, ...] = ()


BUILT_IN_ROLES: Final[dict[str, RoleDefinition]] = {
    # GUIDs and permissions as Microsoft lists them:
    # https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/general and
    # https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": RoleDefinition("Owner", actions=("*",)),
    "b24988ac-6180-42a0-ab88-20f7382dd24c": RoleDefinition(
        "Contributor",
        actions=("*",),
        not_actions=(
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
        ),
    ),
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": RoleDefinition(
        "User Access Administrator",
        actions=("*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"),
    ),
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": RoleDefinition("Reader", actions=("*/read",)),
    "17d1049b-9a84-46fb-8f53-869881c3d3ab": RoleDefinition(
        "Storage Account Contributor",
        actions=(
            "Microsoft.Authorization/*/read",
            "Microsoft.Insights/alertRules/*",
            "Microsoft.Insights/diagnosticSettings/*",
            "Microsoft.Network/virtualNetworks/subnets/joinViaServiceEndpoint/action",
            "Microsoft.ResourceHealth/availabilityStatuses/read",
            "Microsoft.Resources/deployments/*",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Storage/storageAccounts/*",
            "Microsoft.Support/*",
        ),
    ),
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": RoleDefinition(
        "Storage Blob Data Owner",
        actions=("Microsoft.Storage/storageAccounts/blobServices/containers/*",),
        data_actions=("Microsoft.Storage/storageAccounts/blobServices/containers/blobs/*",),
    ),
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": RoleDefinition(
        "Storage Blob Data Contributor",
        actions=("Microsoft.Storage/storageAccounts/blobServices/containers/*",),
        data_actions=(
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/delete",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/move/action",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action",
        ),
    ),
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": RoleDefinition(
        "Storage Blob Data Reader",
        actions=("Microsoft.Storage/storageAccounts/blobServices/containers/read",),
        data_actions=("Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read",),
    ),
}
"""Built-in roles by definition GUID (the same in every Azure cloud)."""


def built_in_role(role_definition_id: str) -> RoleDefinition | None:
    """The built-in role whose GUID ends `role_definition_id`, if it is one of those above."""
    guid = role_definition_id.rstrip("/").rsplit("/", 1)[-1].lower()
    return BUILT_IN_ROLES.get(guid)


def normalize_scope(scope: str) -> str:
    return "/" + scope.strip().strip("/").lower()


def scope_covers(scope: str, resource_id: str) -> bool:
    """True when an assignment at `scope` applies to `resource_id` (same or an ancestor)."""
    outer, inner = normalize_scope(scope), normalize_scope(resource_id)
    return inner == outer or inner.startswith(outer + "/") or outer == "/"


@dataclass(frozen=True)
class PathCondition:
    """One `@Resource[...blobs:path] <op> '<value>'` clause of an ABAC condition."""

    operator: str
    value: str

    @property
    def prefix(self) -> str:
        """The literal path prefix every matching blob shares."""
        if self.operator == "StringLike":
            return self.value.split("*", 1)[0].split("?", 1)[0]
        return self.value


@dataclass(frozen=True)
class Condition:
    """A parsed ABAC condition of the shape this project writes (infra/access.py):
    the listed data actions are allowed only on blobs whose path matches one of `paths`;
    every other action of the role is unaffected."""

    actions: tuple[str, ...]
    paths: tuple[PathCondition, ...]

    def restricts(self, action: str) -> bool:
        return any(action.lower() == limited.lower() for limited in self.actions)

    @property
    def reserved_only(self) -> bool:
        """Every allowed path lies under the project's reserved prefix."""
        return all(path.prefix.startswith(RESERVED_PREFIX) for path in self.paths)


_ACTION = r"!\(\s*ActionMatches\{'([^']+)'\}\s*\)"
_PATH = (
    r"@Resource\[Microsoft\.Storage/storageAccounts/blobServices/containers/blobs:path\]"
    r"\s+(StringEquals|StringStartsWith|StringLike)\s+'([^']*)'"
)
_CONDITION = re.compile(
    rf"\(\s*\(\s*(?P<actions>{_ACTION}(?:\s+AND\s+{_ACTION})*)\s*\)\s+OR\s+"
    rf"\(\s*(?P<paths>{_PATH}(?:\s+OR\s+{_PATH})*)\s*\)\s*\)"
)


def parse_condition(text: str) -> Condition | None:
    """The condition if it has the form `((!(ActionMatches{'a'}) AND ...) OR (@Resource[blob
    path] op 'v' OR ...))`, the form Microsoft documents for "allow these actions only on these
    paths" (https://learn.microsoft.com/azure/storage/blobs/storage-auth-abac-examples); None
    for anything else, which a rule must treat as not understood."""
    match = _CONDITION.fullmatch(" ".join(text.split()))
    if match is None:
        return None
    actions = tuple(re.findall(r"ActionMatches\{'([^']+)'\}", match["actions"]))
    paths = tuple(
        PathCondition(operator, value)
        for operator, value in re.findall(
            r"blobs:path\]\s+(StringEquals|StringStartsWith|StringLike)\s+'([^']*)'",
            match["paths"],
        )
    )
    return Condition(actions, paths)
