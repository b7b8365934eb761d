"""What Permissions - List For Resource Group (api-version 2022-04-01) answers for callers
holding one built-in role on the group: one entry a role assignment, each with the role's
`actions` and `notActions` as Microsoft lists them ("Azure built-in roles",
https://learn.microsoft.com/azure/role-based-access-control/built-in-roles; the response shape:
https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group)."""

from __future__ import annotations

from typing import Any, Final


def entry(actions: list[str], not_actions: list[str] | None = None) -> dict[str, Any]:
    return {
        "actions": actions,
        "notActions": not_actions or [],
        "dataActions": [],
        "notDataActions": [],
    }


OWNER: Final = entry(["*"])
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
USER_ACCESS_ADMINISTRATOR: Final = entry(
    ["*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"]
)
READER: Final = entry(["*/read"])
STORAGE_ACCOUNT_CONTRIBUTOR: Final = entry(
    [
        "Microsoft.Authorization/*/read",
        "Microsoft.Insights/alertRules/*",
        "Microsoft.Insights/diagnosticSettings/*",
        "Microsoft.Network/virtualNetworks/subnets/joinViaServiceEndpoint/action",
        "Microsoft.ResourceHealth/availabilityStatuses/read",
        "Microsoft.Resources/deployments/*",
        "Microsoft.Resources/subscriptions/resourceGroups/read",
        "Microsoft.Storage/storageAccounts/*",
        "Microsoft.Support/*",
    ]
)
