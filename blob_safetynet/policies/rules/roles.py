"""Azure RBAC facts the rules and adapters need: permission matching and well-known roles.

Pure data and string matching; no SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.settings.vocabulary import arm_action_matches

BLOBS: Final = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
TAG_WRITE: Final = f"{BLOBS}/tags/write"
PERMANENT_DELETE: Final = f"{BLOBS}/permanentDelete/action"
ROLE_ASSIGNMENT_WRITE: Final = "Microsoft.Authorization/roleAssignments/write"
LIST_KEYS: Final = "Microsoft.Storage/storageAccounts/listKeys/action"
REGENERATE_KEY: Final = "Microsoft.Storage/storageAccounts/regeneratekey/action"
"""Regenerate Key answers with the account's keys (`StorageAccountListKeysResult` in the
Microsoft.Storage REST spec; azure-mgmt-storage `storage_accounts.regenerate_key`)."""
ACCOUNT_WRITE: Final = "Microsoft.Storage/storageAccounts/write"

NEVER_GRANTED: Final = (
    LIST_KEYS,
    REGENERATE_KEY,
    PERMANENT_DELETE,
    ACCOUNT_WRITE,
    ROLE_ASSIGNMENT_WRITE,
)
"""Actions no application identity may hold on the data account: each one undoes a net
(keys bypass RBAC, permanent delete purges soft-deleted blobs, account write turns soft delete,
shared key or public access back on, role assignment write grants any of these)."""

DATA_ACTIONS: Final = frozenset({PERMANENT_DELETE})
"""The never-granted actions that are data actions: a role grants them through `dataActions`
only, and only they can be limited by a blob path condition. The others are control-plane
actions, granted through `actions` (a role's `*` there grants no data action): "Actions:
control plane actions ... DataActions: data plane actions",
https://learn.microsoft.com/azure/role-based-access-control/role-definitions#control-and-data-actions."""

OWNER_LIKE: Final = (ROLE_ASSIGNMENT_WRITE, ACCOUNT_WRITE, LIST_KEYS, REGENERATE_KEY)
"""Control-plane actions that make a role broad (Owner, Contributor, Storage Account
Contributor all hold at least one)."""

CONDITIONABLE: Final = frozenset({PERMANENT_DELETE, ROLE_ASSIGNMENT_WRITE})
"""The never-granted actions a role assignment condition can limit at all: blob data actions
("conditions can be added to built-in or custom role assignments that have storage blob data
actions", https://learn.microsoft.com/azure/role-based-access-control/conditions-format#actions)
and role assignment write (constrained delegation,
https://learn.microsoft.com/azure/role-based-access-control/delegate-role-assignments-overview).
listKeys and storageAccounts/write stay granted whatever the condition says."""

RESERVED_PREFIX: Final = ".safetynet/"
"""Blob paths the project keeps for its own housekeeping (the sweeper's lease blob, the
verification probes); documents never live there."""


def grants(allowed: tuple[str, ...], denied: tuple[str, ...], operation: str) -> bool:
    """True when some allowed pattern matches `operation` and no denied pattern does."""
    if not any(arm_action_matches(action, operation) for action in allowed):
        return False
    return not any(arm_action_matches(action, operation) for action in denied)


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
    # The Backup vault's role on an account it protects (Azure Backup for blobs): management
    # actions only, no data actions; it may write and delete locks, because operational backup
    # places its own delete lock on the account.
    "e5e2a7ff-d759-4cd2-bb51-3152d37e2eb1": RoleDefinition(
        "Storage Account Backup Contributor",
        actions=(
            "Microsoft.Authorization/*/read",
            "Microsoft.Authorization/locks/read",
            "Microsoft.Authorization/locks/write",
            "Microsoft.Authorization/locks/delete",
            "Microsoft.Features/features/read",
            "Microsoft.Features/providers/features/read",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Storage/operations/read",
            "Microsoft.Storage/storageAccounts/objectReplicationPolicies/delete",
            "Microsoft.Storage/storageAccounts/objectReplicationPolicies/read",
            "Microsoft.Storage/storageAccounts/objectReplicationPolicies/write",
            "Microsoft.Storage/storageAccounts/objectReplicationPolicies/restorePointMarkers/write",
            "Microsoft.Storage/storageAccounts/blobServices/containers/read",
            "Microsoft.Storage/storageAccounts/blobServices/containers/write",
            "Microsoft.Storage/storageAccounts/blobServices/read",
            "Microsoft.Storage/storageAccounts/blobServices/write",
            "Microsoft.Storage/storageAccounts/read",
            "Microsoft.Storage/storageAccounts/restoreBlobRanges/action",
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
    guid = arm_fold(role_definition_id.rstrip("/").rsplit("/", 1)[-1])
    return BUILT_IN_ROLES.get(guid)


def normalize_scope(scope: str) -> str:
    return "/" + arm_fold(scope.strip().strip("/"))


def is_management_group(scope: str) -> bool:
    """A management group scope (`/providers/Microsoft.Management/managementGroups/<id>`)."""
    return normalize_scope(scope).startswith("/providers/microsoft.management/managementgroups/")


def scope_covers(scope: str, resource_id: str) -> bool:
    """True when an assignment at `scope` applies to `resource_id` (same or an ancestor)."""
    outer, inner = normalize_scope(scope), normalize_scope(resource_id)
    return inner == outer or inner.startswith(outer + "/") or outer == "/"


@dataclass(frozen=True)
class PathCondition:
    """One `@Resource[...blobs:path] <op> '<value>'` (or `@Request[...blobs:prefix]`) test."""

    operator: str
    value: str

    @property
    def prefix(self) -> str:
        """The literal path prefix every matching blob shares."""
        if self.operator == "StringLike":
            return self.value.split("*", 1)[0].split("?", 1)[0]
        return self.value


@dataclass(frozen=True)
class ActionTest:
    """One `!(ActionMatches{'pattern'} [AND [NOT] SubOperationMatches{'s'}])` of a clause.

    `ActionMatches` takes an action *pattern*, matched as in a role's permissions ("equivalent
    to the action matching logic ... inside a Permission", Microsoft's condition format page,
    https://learn.microsoft.com/azure/role-based-access-control/conditions-format#operators).
    A sub-operation qualifier limits the clause to part of the action's requests: with
    `SubOperationMatches{'s'}` only requests of sub-operation s, with `NOT` all but those.
    """

    pattern: str
    sub_operation: str | None = None
    excludes_sub_operation: bool = False

    def matches(self, action: str) -> bool:
        return arm_action_matches(self.pattern, action)


@dataclass(frozen=True)
class Clause:
    """`(!(ActionMatches{'a'}) AND ...) OR (<path test> OR ...)`: the actions listed are allowed
    only where a path test holds; every other action of the role is unaffected."""

    actions: tuple[ActionTest, ...]
    paths: tuple[PathCondition, ...]


@dataclass(frozen=True)
class Condition:
    """A parsed ABAC condition of the shape this project writes (blob_safetynet/infra/access.py): one clause,
    or several ANDed (all must hold)."""

    clauses: tuple[Clause, ...]

    def restricts(self, action: str) -> bool:
        """Some clause limits `action` (or a sub-operation of it) to some paths."""
        return any(test.matches(action) for c in self.clauses for test in c.actions)

    def reserved_only(self, action: str) -> bool:
        """Every request of `action` is limited to the reserved prefix: every clause that limits
        it allows it only there, and together they limit all of its sub-operations."""
        limiting = [c for c in self.clauses if any(t.matches(action) for t in c.actions)]
        if not limiting or not all(
            path.prefix.startswith(RESERVED_PREFIX) for c in limiting for path in c.paths
        ):
            return False
        tests = [t for c in limiting for t in c.actions if t.matches(action)]
        if any(t.sub_operation is None for t in tests):
            return True
        only = {t.sub_operation for t in tests if not t.excludes_sub_operation}
        all_but = {t.sub_operation for t in tests if t.excludes_sub_operation}
        return bool(only & all_but)


_ACTION = re.compile(
    r"!\(ActionMatches\{'([^']+)'\}(?: AND (NOT )?SubOperationMatches\{'([^']+)'\})?\)"
)
_PATH = re.compile(
    r"@(?:Resource\[Microsoft\.Storage/storageAccounts/blobServices/containers/blobs:path\]"
    r"|Request\[Microsoft\.Storage/storageAccounts/blobServices/containers/blobs:prefix\]) "
    r"(StringEquals|StringStartsWith|StringLike) '([^']*)'"
)


def _split(text: str, separator: str) -> list[str]:
    """`text` split at `separator` where it stands outside every parenthesis and quote."""
    parts, depth, quoted, start, index = [], 0, False, 0, 0
    while index < len(text):
        char = text[index]
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and text.startswith(separator, index):
            parts.append(text[start:index])
            index += len(separator)
            start = index
            continue
        index += 1
    parts.append(text[start:])
    return parts


def _unwrap(text: str) -> str | None:
    """`text` without one pair of parentheses around all of it; None when it has none."""
    if not (text.startswith("(") and text.endswith(")")):
        return None
    depth, quoted = 0, False
    for index, char in enumerate(text):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
            if depth == 0 and index != len(text) - 1:
                return None
    return text[1:-1] if depth == 0 else None


def _clause(text: str) -> Clause | None:
    halves = _split(text, " OR ")
    while len(halves) != 2:
        inner = _unwrap(text)
        if inner is None:
            return None
        text, halves = inner, _split(inner, " OR ")
    actions_text, paths_text = (_unwrap(half) for half in halves)
    if actions_text is None or paths_text is None:
        return None
    actions: list[ActionTest] = []
    for part in _split(actions_text, " AND "):
        match = _ACTION.fullmatch(part)
        if match is None:
            return None
        actions.append(ActionTest(match[1], match[3], excludes_sub_operation=bool(match[2])))
    paths: list[PathCondition] = []
    for part in _split(paths_text, " OR "):
        match = _PATH.fullmatch(part)
        if match is None:
            return None
        paths.append(PathCondition(match[1], match[2]))
    return Clause(tuple(actions), tuple(paths))


def parse_condition(text: str) -> Condition | None:
    """The condition if every ANDed clause has the form `(!(ActionMatches{'a'}) AND ...) OR
    (@Resource[blob path] op 'v' OR ...)`, the form Microsoft documents for "allow these actions
    only on these paths" (https://learn.microsoft.com/azure/storage/blobs/storage-auth-abac-examples);
    None for anything else, which a rule must treat as not understood."""
    normalized = " ".join(text.replace("(", " ( ").replace(")", " ) ").split())
    normalized = normalized.replace("( ", "(").replace(" )", ")").replace("! (", "!(")
    while (inner := _unwrap(normalized)) is not None and len(_split(inner, " OR ")) == 1:
        normalized = inner
    clauses = []
    for part in _split(normalized, " AND "):
        clause = _clause(part)
        if clause is None:
            return None
        clauses.append(clause)
    return Condition(tuple(clauses))
