"""What Permissions - List For Resource Group (api-version 2022-04-01) answers for callers
holding one built-in role on the group: one entry a role assignment, each with the role's
`actions` and `notActions` as Microsoft lists them ("Azure built-in roles",
https://learn.microsoft.com/azure/role-based-access-control/built-in-roles; the response shape:
https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group).

The roles the rules already know are built from `BUILT_IN_ROLES`, so the two cannot drift;
Contributor stays written out here because ARM lists more `notActions` for it than the rules
need."""

from __future__ import annotations

from typing import Any, Final

from blob_safetynet.policies.rules.roles import BUILT_IN_ROLES


def entry(actions: list[str], not_actions: list[str] | None = None) -> dict[str, Any]:
    return {
        "actions": actions,
        "notActions": not_actions or [],
        "dataActions": [],
        "notDataActions": [],
    }


def built_in(name: str) -> dict[str, Any]:
    """The entry for the built-in role called `name`, as `BUILT_IN_ROLES` holds it."""
    role = next(role for role in BUILT_IN_ROLES.values() if role.name == name)
    return {
        "actions": list(role.actions),
        "notActions": list(role.not_actions),
        "dataActions": list(role.data_actions),
        "notDataActions": list(role.not_data_actions),
    }


OWNER: Final = built_in("Owner")
CONTRIBUTOR: Final = entry(
    ["*"],
    [
        "Microsoft.Authorization/*/Delete",
        "Microsoft.Authorization/*/Write",
        "Microsoft.Authorization/elevateAccess/Action",
        "Microsoft.Blueprint/blueprintAssignments/write",
        "Microsoft.Blueprint/blueprintAssignments/delete",
        "Microsoft.Compute/galleries/share/action",
        "Microsoft.Purview/consents/write",
        "Microsoft.Purview/consents/delete",
        "Microsoft.Resources/deploymentStacks/manageDenySetting/action",
        "Microsoft.Subscription/cancel/action",
        "Microsoft.Subscription/enable/action",
    ],
)
USER_ACCESS_ADMINISTRATOR: Final = built_in("User Access Administrator")
READER: Final = built_in("Reader")
STORAGE_ACCOUNT_CONTRIBUTOR: Final = built_in("Storage Account Contributor")
