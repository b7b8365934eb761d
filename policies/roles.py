"""Azure RBAC facts the rules and adapters need: permission matching and well-known roles.

Pure data and string matching; no SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

TAG_WRITE: Final = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write"
ROLE_ASSIGNMENT_WRITE: Final = "Microsoft.Authorization/roleAssignments/write"
LIST_KEYS: Final = "Microsoft.Storage/storageAccounts/listKeys/action"


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
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": RoleDefinition("Owner", actions=("*",)),
    "b24988ac-6180-42d9-a3f1-e7a9b4f5e7de": RoleDefinition(
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
        actions=("Microsoft.Storage/storageAccounts/*", "Microsoft.Resources/deployments/*"),
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
