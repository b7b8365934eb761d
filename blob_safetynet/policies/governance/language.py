"""The part of the Azure Policy rule language the generated definitions use, as JSON builders.

Conditions, logical operators and `parameters()` references as documented in "Azure Policy
definition structure policy rule"
(https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-policy-rule).
Nothing here reaches Azure: a condition is the dict that goes into `policyRule.if`.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from blob_safetynet.policies.governance.aliases import Alias

Condition: TypeAlias = dict[str, Any]


def field(target: Alias | str, operator: str, value: object) -> Condition:
    """`{"field": <alias or field>, <operator>: value}`."""
    name = target.name if isinstance(target, Alias) else target
    return {"field": name, operator: value}


def all_of(*conditions: Condition) -> Condition:
    return {"allOf": list(conditions)}


def any_of(*conditions: Condition) -> Condition:
    return {"anyOf": list(conditions)}


def not_(condition: Condition) -> Condition:
    return {"not": condition}


def parameter(name: str) -> str:
    """The expression that reads an assignment's parameter."""
    return f"[parameters('{name}')]"


def boolean(value: bool) -> str:
    """A boolean as a condition compares it: Microsoft's policy rule schema types `equals` as
    number or string (https://schema.management.azure.com/schemas/2020-10-01/policyDefinition.json),
    and Microsoft's built-ins compare a boolean property with "true"/"false" (built-in 404c3081,
    `"equals": "false"` on supportsHttpsTrafficOnly, Azure/azure-policy
    `Storage_AuditForHTTPSEnabled_Audit.json`); string conditions ignore case
    (https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-policy-rule)."""
    return "true" if value else "false"


def not_switched(alias: Alias, wanted: bool, *, absent_means: bool) -> Condition:
    """A boolean property is not `wanted`, reading an absent one as `absent_means`.

    A missing property reads as null ("Microsoft.Test/resourceType/missingArray | null",
    https://learn.microsoft.com/azure/governance/policy/how-to/author-policies-for-arrays), and
    null equals neither true nor false, so "not equals wanted" already counts absence as not
    wanted; when absence means wanted, only a present value can be wrong. A value that is no
    boolean never equals `wanted`, so it is non-compliant either way (never a silent pass).
    """
    wrong = not_(field(alias, "equals", boolean(wanted)))
    if absent_means != wanted:
        return wrong
    return all_of(field(alias, "exists", True), wrong)
