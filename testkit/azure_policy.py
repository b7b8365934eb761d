"""An evaluator for the Azure Policy rule language subset `blob_safetynet.policies.governance` emits.

It judges one ARM resource body by one policy definition, as Azure Policy documents its
semantics, so a test can hold every generated definition to the rule it comes from. Sources:

- Conditions, logical operators, fields, `parameters()`: "Azure Policy definition structure
  policy rule", https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-policy-rule
  ("String comparisons are made using InvariantCultureIgnoreCase"; "While match and notMatch
  are case-sensitive, all other conditions that evaluate a stringValue are case-insensitive";
  for less/greater "if the property type doesn't match the condition type, an error is thrown";
  "If the result of a template function is an error, policy evaluation fails. A failed
  evaluation is an implicit deny").
- A missing property selects null; `[*]` over a missing array an empty collection; a field
  condition on a `[*]` alias holds only if every selected value meets it ("Referencing array
  resource properties", https://learn.microsoft.com/azure/governance/policy/how-to/author-policies-for-arrays).
- Applicability: for effects other than *IfNotExists only `type`, `name` and `kind` conditions
  count, "other conditions as true (or false when negated)"
  (https://learn.microsoft.com/azure/governance/policy/concepts/policy-applicability).

Booleans: Microsoft's built-ins compare boolean properties with the strings "true"/"false"
(`"equals": "true"` on `allowSharedKeyAccess`, Azure/azure-policy
`StorageAccountAllowSharedKeyAccess_Audit.json`), so a boolean and its string compare equal.
Outside the subset (count, value, other template functions, other operators) it raises
`Unsupported`: nothing the generated definitions use is silently approximated.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any

NAMED_FIELDS = ("type", "name", "kind")
_PARAMETER = re.compile(r"\[parameters\('([A-Za-z0-9_]+)'\)\]")


class Unsupported(Exception):
    """The definition uses language outside the subset."""


class EvaluationError(Exception):
    """Azure Policy would fail this evaluation (a type mismatch): an implicit deny."""


class Verdict(enum.Enum):
    COMPLIANT = "compliant"
    NON_COMPLIANT = "non-compliant"
    NOT_APPLICABLE = "not applicable"
    DISABLED = "disabled"


def judge(
    definition: Mapping[str, Any],
    resource: Mapping[str, Any],
    aliases: Mapping[str, str],
    assigned: Mapping[str, object] | None = None,
) -> Verdict:
    """The compliance of `resource` under `definition` with the `assigned` parameter values
    (defaults otherwise); `aliases` maps each alias the definition may name to its path."""
    properties = definition["properties"]
    parameters = {
        name: (assigned or {}).get(name, spec.get("defaultValue"))
        for name, spec in properties.get("parameters", {}).items()
    }
    context = _Context(resource, aliases, parameters)
    rule = properties["policyRule"]
    effect = context.resolve(rule["then"]["effect"])
    if str(effect).lower() == "disabled":
        return Verdict.DISABLED
    if not context.applicable(rule["if"]):
        return Verdict.NOT_APPLICABLE
    try:
        matched = context.holds(rule["if"])
    except EvaluationError:
        return Verdict.NON_COMPLIANT
    return Verdict.NON_COMPLIANT if matched else Verdict.COMPLIANT


class _Context:
    def __init__(
        self,
        resource: Mapping[str, Any],
        aliases: Mapping[str, str],
        parameters: Mapping[str, object],
    ) -> None:
        self.resource = resource
        self.aliases = aliases
        self.parameters = parameters

    def resolve(self, value: object) -> object:
        """A literal, or a `[parameters('name')]` expression; other expressions are refused."""
        if not isinstance(value, str) or not value.startswith("[") or value.startswith("[["):
            return value
        found = _PARAMETER.fullmatch(value)
        if found is None:
            raise Unsupported(f"expression {value!r}")
        if found.group(1) not in self.parameters:
            raise Unsupported(f"parameter {found.group(1)!r} is not defined")
        return self.parameters[found.group(1)]

    def holds(self, condition: Mapping[str, Any]) -> bool:
        if "allOf" in condition:
            return all(self.holds(item) for item in condition["allOf"])
        if "anyOf" in condition:
            return any(self.holds(item) for item in condition["anyOf"])
        if "not" in condition:
            return not self.holds(condition["not"])
        if "field" not in condition:
            raise Unsupported(f"condition {sorted(condition)}")
        (operator,) = [key for key in condition if key != "field"]
        selected = self.select(str(condition["field"]))
        expected = self.resolve(condition[operator])
        if isinstance(selected, _Collection):
            return all(_compare(operator, value, expected) for value in selected.values)
        return _compare(operator, selected, expected)

    def applicable(self, condition: Mapping[str, Any], negated: bool = False) -> bool:
        if "allOf" in condition:
            return all(self.applicable(item, negated) for item in condition["allOf"])
        if "anyOf" in condition:
            return any(self.applicable(item, negated) for item in condition["anyOf"])
        if "not" in condition:
            return not self.applicable(condition["not"], not negated)
        if str(condition.get("field", "")).lower() in NAMED_FIELDS:
            return self.holds(condition)
        return not negated

    def select(self, name: str) -> object:
        """The value a field names: a top-level field, or an alias's path (null when absent)."""
        if name.lower() in NAMED_FIELDS:
            return _get(self.resource, name)
        path = self.aliases.get(name)
        if path is None:
            raise Unsupported(f"alias {name!r} is not in the alias list")
        return _walk(self.resource, path.split("."))


class _Collection:
    """The values a `[*]` alias selects."""

    def __init__(self, values: Sequence[object]) -> None:
        self.values = list(values)


def _get(node: object, key: str) -> object:
    """A property by name; ARM reads property names without regard to case."""
    if not isinstance(node, Mapping):
        return None
    if key in node:
        return node[key]
    return next((value for name, value in node.items() if name.lower() == key.lower()), None)


def _walk(node: object, keys: Sequence[str]) -> object:
    if not keys:
        return node
    key, rest = keys[0], keys[1:]
    if key.endswith("[*]"):
        items = _get(node, key[:-3])
        if not isinstance(items, list):
            return _Collection([])
        values: list[object] = []
        for item in items:
            found = _walk(item, rest)
            values.extend(found.values if isinstance(found, _Collection) else [found])
        return _Collection(values)
    return _walk(_get(node, key), rest)


def _text(value: object) -> str | None:
    """A string or a boolean as the text policy compares (booleans as "true"/"false")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return None


def _equal(left: object, right: object) -> bool:
    left_text, right_text = _text(left), _text(right)
    if left_text is not None and right_text is not None:
        return left_text.casefold() == right_text.casefold()
    if left_text is not None or right_text is not None:
        return False
    return left == right


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    return float(value) if isinstance(value, int | float) else None


def _ordered(operator: str, value: object, bound: object) -> bool:
    if value is None:
        return False
    left, right = _number(value), _number(bound)
    if left is None or right is None:
        raise EvaluationError(f"{operator} compares {value!r} with {bound!r}")
    return {
        "less": left < right,
        "lessOrEquals": left <= right,
        "greater": left > right,
        "greaterOrEquals": left >= right,
    }[operator]


def _compare(operator: str, value: object, expected: object) -> bool:
    if operator == "equals":
        return _equal(value, expected)
    if operator == "notEquals":
        return not _equal(value, expected)
    if operator in ("in", "notIn"):
        if not isinstance(expected, list):
            raise Unsupported(f"{operator} takes an array, not {expected!r}")
        found = any(_equal(value, item) for item in expected)
        return found if operator == "in" else not found
    if operator == "exists":
        wanted = _text(expected)
        if wanted not in ("true", "false"):
            raise Unsupported(f"exists takes a boolean, not {expected!r}")
        return (value is not None) == (wanted == "true")
    if operator in ("contains", "notContains"):
        text, part = _text(value), _text(expected)
        found = text is not None and part is not None and part.casefold() in text.casefold()
        return found if operator == "contains" else not found
    if operator in ("less", "lessOrEquals", "greater", "greaterOrEquals"):
        return _ordered(operator, value, expected)
    raise Unsupported(f"operator {operator!r}")
