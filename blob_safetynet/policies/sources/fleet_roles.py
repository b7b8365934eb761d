"""Role assignments and definitions of a fleet from Resource Graph's `authorizationresources`.

Resource Graph's `authorizationresources` table holds `microsoft.authorization/roleassignments`
and `microsoft.authorization/roledefinitions` ("Azure Resource Graph table and resource type
reference", https://learn.microsoft.com/azure/governance/resource-graph/reference/supported-tables-resources;
the properties `scope`, `principalId`, `principalType`, `roleDefinitionId` as in ARM:
https://techcommunity.microsoft.com/t5/azure-governance-and-management/announcing-authorizationresources-in-azure-resource-graph/ba-p/3813912).

`roleAssignments/list` at an account's scope returns what applies there: assignments at the
account and below it (containers), at its resource group, its subscription, and the management
groups and root above it (https://learn.microsoft.com/rest/api/authorization/role-assignments/list-for-scope).
Here one paged query per fleet scope brings the assignments below the subscriptions (a
resource group, a storage account or anything under one), and the assignments at and above
each subscription come from one `atScope()` list per subscription
(`ArmReader.inherited_assignments`): ARM, not this code, decides which management groups hold
a subscription. An account's assignments are the union, each once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from blob_safetynet.policies.rules.model import arm_fold

ROLE_ASSIGNMENTS_QUERY = (
    "authorizationresources"
    " | where type =~ 'microsoft.authorization/roleassignments'"
    " | extend scope = tolower(tostring(properties['scope']))"
    " | where scope startswith '/subscriptions/' and scope contains '/resourcegroups/'"
    " | where scope !contains '/providers/'"
    " or scope contains '/providers/microsoft.storage/storageaccounts/'"
    " | project id, name, type, properties"
    " | order by id asc"
)
"""Assignments at a resource group or at a storage account and below it: nothing above the
subscription (that is `atScope()`'s part), nothing on other resource types."""
ROLE_DEFINITIONS_QUERY = (
    "authorizationresources"
    " | where type =~ 'microsoft.authorization/roledefinitions'"
    " | where name in~ ({names})"
    " | project id, name, type, properties"
    " | order by id asc"
)
"""The definitions the fleet's assignments name, by GUID (`name`): one role has an id per
subscription, its GUID is the same in all of them."""
_ACCOUNT_DEPTH = 8
"""Segments of a storage account id: subscriptions/S/resourceGroups/G/providers/
Microsoft.Storage/storageAccounts/N."""
_GROUP_DEPTH = 4
KEPT = (
    "roleDefinitionId",
    "principalId",
    "principalType",
    "scope",
    "condition",
    "conditionVersion",
)
"""The assignment properties the adapter reads (blob_safetynet/policies/adapters/arm.py); an
index of a whole fleet keeps only these, the repeated ones interned."""


def _compact(row: Mapping[str, Any]) -> dict[str, Any]:
    props = row.get("properties")
    kept = {
        key: sys.intern(value) if isinstance(value, str) and key != "scope" else value
        for key, value in (props.items() if isinstance(props, Mapping) else ())
        if key in KEPT
    }
    return {"id": row.get("id"), "properties": kept}


def _scope(assignment: Mapping[str, Any]) -> str:
    props = assignment.get("properties")
    scope = props.get("scope") if isinstance(props, Mapping) else None
    return arm_fold(scope.strip().rstrip("/")) if isinstance(scope, str) else ""


def definition_guid(assignment: Mapping[str, Any]) -> str:
    """The lower-case GUID of the role definition an assignment names, '' when none."""
    props = assignment.get("properties")
    value = props.get("roleDefinitionId") if isinstance(props, Mapping) else None
    return arm_fold(value.rstrip("/").rsplit("/", 1)[-1]) if isinstance(value, str) else ""


def definitions_query(guids: Iterable[str]) -> str:
    """The role definitions query for these GUIDs (only hexadecimal and dashes are kept)."""
    clean = sorted({"".join(c for c in g if c in "0123456789abcdef-") for g in guids} - {""})
    return ROLE_DEFINITIONS_QUERY.format(names=", ".join(f"'{g}'" for g in clean))


class RoleIndex:
    """The assignments of one fleet scope below its subscriptions, by the account or resource
    group they are at or under."""

    def __init__(self) -> None:
        self._by_account: dict[str, list[dict[str, Any]]] = {}
        self._by_group: dict[str, list[dict[str, Any]]] = {}
        self.guids: set[str] = set()

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            parts = _scope(row).strip("/").split("/")
            if len(parts) < _GROUP_DEPTH or parts[0] != "subscriptions":
                continue
            if len(parts) == _GROUP_DEPTH:
                key, index = "/" + "/".join(parts), self._by_group
            elif len(parts) >= _ACCOUNT_DEPTH and parts[4:7] == [
                "providers",
                "microsoft.storage",
                "storageaccounts",
            ]:
                key, index = "/" + "/".join(parts[:_ACCOUNT_DEPTH]), self._by_account
            else:
                continue
            index.setdefault(key, []).append(_compact(row))
            self.guids.add(definition_guid(row))
        self.guids.discard("")

    def take(self, account_id: str, inherited: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The assignments that apply to the account (once each); its own are forgotten."""
        lowered = arm_fold(account_id.rstrip("/"))
        parts = lowered.strip("/").split("/")
        subscription = "/" + "/".join(parts[:2])
        group = "/" + "/".join(parts[:_GROUP_DEPTH])
        above = [
            a
            for a in inherited
            if _scope(a) == subscription or not _scope(a).startswith("/subscriptions/")
        ]
        found = [*above, *self._by_group.get(group, []), *self._by_account.pop(lowered, [])]
        unique: dict[str, dict[str, Any]] = {}
        for item in found:
            unique.setdefault(arm_fold(str(item.get("id", ""))) or str(id(item)), item)
        return list(unique.values())
