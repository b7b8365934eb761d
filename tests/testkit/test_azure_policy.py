"""The Azure Policy evaluator keeps the documented semantics (testkit/azure_policy.py's sources)."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.azure_policy import Unsupported, Verdict, judge

TYPE = "Microsoft.Test/things"
ALIASES = {
    f"{TYPE}/mode": "properties.mode",
    f"{TYPE}/flag": "properties.flag",
    f"{TYPE}/days": "properties.settings.days",
    f"{TYPE}/items[*].name": "properties.items[*].name",
}


def definition(condition: dict[str, Any], effect: str = "Audit") -> dict[str, Any]:
    return {
        "name": "test",
        "properties": {
            "parameters": {
                "effect": {"type": "String", "defaultValue": effect},
                "minimum": {"type": "Integer", "defaultValue": 7},
            },
            "policyRule": {
                "if": {"allOf": [{"field": "type", "equals": TYPE}, condition]},
                "then": {"effect": "[parameters('effect')]"},
            },
        },
    }


def verdict(condition: dict[str, Any], properties: dict[str, Any], **assigned: object) -> Verdict:
    resource = {"type": TYPE, "name": "one", "properties": properties}
    return judge(definition(condition), resource, ALIASES, assigned)


def test_string_equality_ignores_case() -> None:
    """equals compares strings with InvariantCultureIgnoreCase: 'deny' equals 'Deny'."""
    assert verdict({"field": f"{TYPE}/mode", "equals": "Deny"}, {"mode": "deny"}) is (
        Verdict.NON_COMPLIANT
    )
    assert verdict({"field": f"{TYPE}/mode", "equals": "Deny"}, {"mode": "Allow"}) is (
        Verdict.COMPLIANT
    )


def test_a_missing_property_is_null_for_every_operator() -> None:
    """An absent property equals nothing, notEquals anything, and does not exist."""
    condition = {"field": f"{TYPE}/flag", "equals": False}
    assert verdict(condition, {}) is Verdict.COMPLIANT
    assert verdict({"not": condition}, {}) is Verdict.NON_COMPLIANT
    assert verdict({"field": f"{TYPE}/flag", "exists": "false"}, {}) is Verdict.NON_COMPLIANT
    assert verdict({"field": f"{TYPE}/flag", "exists": True}, {}) is Verdict.COMPLIANT


def test_a_boolean_compares_equal_to_its_string() -> None:
    """true equals "true" and "True", as Microsoft's built-ins compare boolean aliases."""
    assert verdict({"field": f"{TYPE}/flag", "equals": "true"}, {"flag": True}) is (
        Verdict.NON_COMPLIANT
    )
    assert verdict({"field": f"{TYPE}/flag", "equals": False}, {"flag": "False"}) is (
        Verdict.NON_COMPLIANT
    )
    assert verdict({"field": f"{TYPE}/flag", "equals": True}, {"flag": 1}) is Verdict.COMPLIANT


def test_in_and_not_in_ignore_case() -> None:
    """in matches a member without regard to case; notIn is its negation."""
    members = ["TLS1_2", "TLS1_3"]
    assert verdict({"field": f"{TYPE}/mode", "in": members}, {"mode": "tls1_2"}) is (
        Verdict.NON_COMPLIANT
    )
    assert verdict({"field": f"{TYPE}/mode", "notIn": members}, {"mode": "TLS1_0"}) is (
        Verdict.NON_COMPLIANT
    )
    assert verdict({"field": f"{TYPE}/mode", "notIn": members}, {}) is Verdict.NON_COMPLIANT


def test_contains_is_a_case_insensitive_substring() -> None:
    """contains finds 'azureservices' inside 'Logging, AzureServices'."""
    condition = {"field": f"{TYPE}/mode", "notContains": "azureservices"}
    assert verdict(condition, {"mode": "Logging, AzureServices"}) is Verdict.COMPLIANT
    assert verdict(condition, {"mode": "Logging"}) is Verdict.NON_COMPLIANT


def test_ordering_reads_parameters_and_fails_closed_on_a_type_mismatch() -> None:
    """less compares with the parameter's value; a string against a number is an evaluation
    error, which Azure Policy treats as an implicit deny (non-compliant)."""
    condition = {"field": f"{TYPE}/days", "less": "[parameters('minimum')]"}
    assert verdict(condition, {"settings": {"days": 3}}) is Verdict.NON_COMPLIANT
    assert verdict(condition, {"settings": {"days": 7}}) is Verdict.COMPLIANT
    assert verdict(condition, {"settings": {"days": 7}}, minimum=8) is Verdict.NON_COMPLIANT
    assert verdict(condition, {"settings": {"days": "seven"}}) is Verdict.NON_COMPLIANT
    assert verdict(condition, {"settings": {"days": True}}) is Verdict.NON_COMPLIANT
    assert verdict(condition, {}) is Verdict.COMPLIANT


def test_an_array_alias_holds_only_when_every_member_meets_the_condition() -> None:
    """A [*] field condition is a logical and over the members; a missing array selects none."""
    condition = {"field": f"{TYPE}/items[*].name", "equals": "a"}
    assert verdict(condition, {"items": [{"name": "a"}, {"name": "A"}]}) is Verdict.NON_COMPLIANT
    assert verdict(condition, {"items": [{"name": "a"}, {"name": "b"}]}) is Verdict.COMPLIANT


def test_property_names_are_read_without_regard_to_case() -> None:
    """ARM reads property names case-insensitively, so 'Mode' is the mode alias's property."""
    assert verdict({"field": f"{TYPE}/mode", "equals": "x"}, {"Mode": "x"}) is (
        Verdict.NON_COMPLIANT
    )


def test_applicability_is_decided_by_type_conditions_only() -> None:
    """Another type is not applicable; a matching type with other conditions false is compliant."""
    condition = {"field": f"{TYPE}/mode", "equals": "x"}
    other = {"type": "Microsoft.Test/other", "properties": {"mode": "x"}}
    assert judge(definition(condition), other, ALIASES) is Verdict.NOT_APPLICABLE
    negated = definition({"not": condition})
    negated["properties"]["policyRule"]["if"] = {
        "not": {"anyOf": [{"field": "type", "notEquals": TYPE}, condition]}
    }
    assert judge(negated, other, ALIASES) is Verdict.NOT_APPLICABLE
    assert verdict(condition, {"mode": "y"}) is Verdict.COMPLIANT


def test_a_disabled_effect_judges_nothing() -> None:
    """With effect Disabled the definition gives no verdict, whatever the resource."""
    resource = {"type": TYPE, "properties": {"mode": "x"}}
    condition = {"field": f"{TYPE}/mode", "equals": "x"}
    assert judge(definition(condition, "Disabled"), resource, ALIASES) is Verdict.DISABLED


@pytest.mark.parametrize(
    "condition",
    [
        {"field": f"{TYPE}/mode", "like": "x*"},
        {"field": f"{TYPE}/undocumented", "equals": "x"},
        {"field": f"{TYPE}/mode", "equals": "[concat('a', 'b')]"},
        {"field": f"{TYPE}/mode", "equals": "[parameters('nope')]"},
        {"count": {"field": f"{TYPE}/items[*]"}, "greater": 0},
    ],
    ids=["operator", "alias", "function", "parameter", "count"],
)
def test_language_outside_the_subset_is_refused(condition: dict[str, Any]) -> None:
    """An operator, alias, function or parameter the subset lacks raises, never approximates."""
    with pytest.raises(Unsupported):
        verdict(condition, {"mode": "x"})
