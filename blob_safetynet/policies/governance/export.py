"""The policy definitions and the initiative, as the JSON documents ARM takes.

The shapes follow "Azure Policy definition structure basics" and "initiative definition
structure" (https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-basics,
https://learn.microsoft.com/azure/governance/policy/concepts/initiative-definition-structure);
`tests/policies/data/azure-policy-*.schema.json` hold every document to them.
"""

from __future__ import annotations

from typing import Any, Final

from blob_safetynet.policies.governance import aliases
from blob_safetynet.policies.governance.forms import FORMS, NOT_EXPRESSIBLE, Parameter, PolicyForm
from blob_safetynet.policies.governance.language import Condition, all_of, field, parameter
from blob_safetynet.policies.rules.base import NO_BLOB_KINDS, Control
from blob_safetynet.settings.vocabulary import policy_scope_problem

INITIATIVE_NAME: Final = "safetynet-storage"
BASE_EFFECTS: Final = ("Audit", "Deny", "Disabled")
DEFAULT_EFFECT: Final = "Audit"
CATEGORY: Final = "Storage"
MODIFY_EFFECT: Final = (
    "Modify sets the compliant value in a create or update request that carries the property "
    "and, on existing resources, through a remediation task, "
)
"""A request without the property's parent (`deleteRetentionPolicy`) is not modified: "If the
'parent' property ... isn't present in the request, modification is skipped"
(https://learn.microsoft.com/azure/governance/policy/concepts/effect-modify#skipped-modification)."""


def scope_problem(scope: str) -> str | None:
    """Why `scope` cannot hold the definitions; None when it can (`vocabulary.POLICY_SCOPE`)."""
    problem = policy_scope_problem(scope)
    return None if problem is None else f"the definitions' scope {problem}"


def definition_name(form: PolicyForm) -> str:
    return form.rule.id.lower()


def definition_id(scope: str, form: PolicyForm) -> str:
    return f"{scope}/providers/Microsoft.Authorization/policyDefinitions/{definition_name(form)}"


def effects(form: PolicyForm) -> tuple[str, ...]:
    return (*BASE_EFFECTS, "Modify") if form.modify else BASE_EFFECTS


def applies_to(form: PolicyForm) -> Condition:
    """The `if` part that picks the resources the rule judges."""
    kind = field("type", "equals", form.resource_type)
    if form.resource_type == aliases.ACCOUNT_TYPE and form.rule.needs_blob:
        # A blob rule does not apply to an account without a blob service (rules.base).
        return all_of(kind, field("kind", "notIn", list(NO_BLOB_KINDS)))
    return kind


def policy_rule(form: PolicyForm) -> dict[str, Any]:
    then: dict[str, Any] = {"effect": parameter("effect")}
    if form.modify:
        then["details"] = {
            "roleDefinitionIds": [form.remediation_role],
            "conflictEffect": "audit",
            "operations": [
                {"operation": "addOrReplace", "field": op.alias.name, "value": op.value}
                for op in form.modify
            ],
        }
    condition = applies_to(form)
    parts = condition.get("allOf", [condition])
    return {"if": all_of(*parts, form.non_compliant), "then": then}


def _parameter(item: Parameter) -> dict[str, Any]:
    bounds = {"allowedValues": list(item.allowed)} if item.allowed else {}
    return {
        "type": item.type,
        **bounds,
        "defaultValue": item.default,
        "metadata": {"displayName": item.name, "description": item.description},
    }


def definition(form: PolicyForm) -> dict[str, Any]:
    """One rule's policy definition."""
    rule = form.rule
    parameters = {
        "effect": {
            "type": "String",
            "allowedValues": list(effects(form)),
            "defaultValue": DEFAULT_EFFECT,
            "metadata": {
                "displayName": "Effect",
                "description": "Audit reports, Deny refuses the create or update, "
                + (MODIFY_EFFECT if form.modify else "")
                + "Disabled turns the definition off",
            },
        },
        **{item.name: _parameter(item) for item in form.parameters},
    }
    return {
        "name": definition_name(form),
        "properties": {
            "displayName": f"{rule.id}: {rule.title}",
            "policyType": "Custom",
            "mode": "Indexed" if form.resource_type == aliases.ACCOUNT_TYPE else "All",
            # Azure Policy caps a description at 512 characters; the fix goes in the metadata.
            "description": rule.rationale,
            "metadata": {
                "category": CATEGORY,
                "version": "1.0.0",
                "safetynetRule": rule.id,
                "severity": rule.severity.value,
                "remediation": rule.remediation.account,
                "references": list(rule.references),
            },
            "parameters": parameters,
            "policyRule": policy_rule(form),
        },
    }


def effect_parameter(form: PolicyForm) -> str:
    words = form.rule.id.lower().split("-")
    return words[0] + "".join(word.capitalize() for word in words[1:]) + "Effect"


def group_name(control: Control) -> str:
    return f"{control.framework.short.replace(' ', '-')}-{control.id}"


def initiative(scope: str) -> dict[str, Any]:
    """The policy set: every definition, referenced by its rule's id, in its control groups."""
    thresholds = {item.name: item for form in FORMS for item in form.parameters}
    parameters: dict[str, Any] = {
        **{
            effect_parameter(form): {
                "type": "String",
                "allowedValues": list(effects(form)),
                "defaultValue": DEFAULT_EFFECT,
                "metadata": {"displayName": f"Effect of {form.rule.id}"},
            }
            for form in FORMS
        },
        **{name: _parameter(item) for name, item in thresholds.items()},
    }
    controls = {control for form in FORMS for control in form.rule.controls}
    groups = [
        {
            "name": group_name(control),
            "category": control.framework.short,
            "displayName": f"{control.framework.value} {control.id}",
        }
        for control in sorted(controls, key=group_name)
    ]
    references = []
    for form in FORMS:
        values = {"effect": {"value": parameter(effect_parameter(form))}}
        values |= {item.name: {"value": parameter(item.name)} for item in form.parameters}
        reference: dict[str, Any] = {
            "policyDefinitionReferenceId": form.rule.id,
            "policyDefinitionId": definition_id(scope, form),
            "parameters": values,
        }
        if form.rule.controls:
            reference["groupNames"] = [group_name(c) for c in form.rule.controls]
        references.append(reference)
    return {
        "name": INITIATIVE_NAME,
        "properties": {
            "displayName": "blob-safetynet: the storage rule set",
            "policyType": "Custom",
            "description": "The blob-safetynet rules Azure Policy can express, generated from "
            "the same rules the CrossGuard pack and the audit apply.",
            "metadata": {"category": CATEGORY, "version": "1.0.0"},
            "parameters": parameters,
            "policyDefinitionGroups": groups,
            "policyDefinitions": references,
        },
    }


def not_expressible() -> list[dict[str, str]]:
    return [{"rule": item.rule.id, "reason": item.reason} for item in NOT_EXPRESSIBLE]


def used_aliases() -> list[dict[str, str]]:
    names = sorted({alias.name for form in FORMS for alias in form.aliases})
    return [
        {"alias": name, "path": aliases.ALIASES[name].path, "source": aliases.ALIASES[name].source}
        for name in names
    ]


def definitions() -> list[dict[str, Any]]:
    """Every exported rule's definition, in catalogue order."""
    return [definition(form) for form in FORMS]


def documents(scope: str) -> dict[str, Any]:
    """Every file of an export, by its path relative to the export folder."""
    files: dict[str, Any] = {
        f"definitions/{definition_name(form)}.json": definition(form) for form in FORMS
    }
    files["initiative.json"] = initiative(scope)
    files["not-expressible.json"] = not_expressible()
    files["aliases.json"] = used_aliases()
    return files
