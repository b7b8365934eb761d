"""The policy pack's config file for a set of thresholds: the same values under every policy.

The Pulumi CLI takes only `enforcementLevel` from a config file's `"all"` key; every other key
there is dropped and each policy runs with its schema defaults (pulumi/pulumi
`pkg/resource/analyzer/config.go`: `applyConfig` copies `all.EnforcementLevel` to each policy,
then merges properties given under the policy's own name; the Python analyzer hands a policy
only `policyConfig[<its name>]`, `pulumi_policy.policy._get_policy_config`). Thresholds must
therefore be repeated per policy, which this module writes:

    python -m blob_safetynet.policies.pack.config --max-pending-days 3 > policy-config.json
    pulumi up --policy-pack policies --policy-pack-config policy-config.json

What it writes is first checked against the pack's own config schema (`blob_safetynet.policies.pack.crossguard.
CONFIG_SCHEMA`, a JSON Schema the Pulumi CLI validates a config file with:
https://pulumi.com/docs/using-pulumi/crossguard/configuration): a value the schema rejects is
refused here (exit 2) rather than written into a file `pulumi up` would refuse later.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pulumi_policy import PolicyConfigSchema

from blob_safetynet.policies.pack.crossguard import CONFIG_SCHEMA
from blob_safetynet.policies.rules import RULES
from blob_safetynet.policies.rules.model import Thresholds

DEFAULTS = Thresholds()


def config_values(thresholds: Thresholds) -> dict[str, Any]:
    """The pack's config keys (its schema, `blob_safetynet.policies.pack.crossguard.CONFIG_SCHEMA`) for `thresholds`."""
    return {
        "minBlobSoftDeleteDays": thresholds.min_blob_soft_delete_days,
        "minContainerSoftDeleteDays": thresholds.min_container_soft_delete_days,
        "maxPendingDays": thresholds.max_pending_days,
        "containerName": thresholds.container,
        "deploymentPrincipalIds": list(thresholds.deployment_principal_ids),
        "maxSasExpirationSeconds": thresholds.max_sas_expiration_seconds,
        "maxKeyExpirationDays": thresholds.max_key_expiration_days,
    }


def pack_config(thresholds: Thresholds, levels: dict[str, str] | None = None) -> dict[str, Any]:
    """A `--policy-pack-config` document: the thresholds under every policy's own name, plus
    an `enforcementLevel` where `levels` names one (the one key `"all"` may carry)."""
    document: dict[str, Any] = {}
    for rule in RULES:
        entry = config_values(thresholds)
        if levels and rule.id in levels:
            entry["enforcementLevel"] = levels[rule.id]
        document[rule.id] = entry
    return document


CHECKED_KEYWORDS: Final = frozenset(
    {"type", "minimum", "maximum", "minLength", "maxLength", "items", "default", "description"}
)
"""The JSON Schema keywords `schema_problems` enforces; a schema using another is refused."""
_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


def schema_problems(values: Mapping[str, Any], schema: PolicyConfigSchema) -> list[str]:
    """What in `values` the policy config schema rejects (empty when it accepts them all)."""
    problems = [f"{key} is required" for key in schema.required or () if key not in values]
    for key, value in values.items():
        rules = schema.properties.get(key)
        if rules is None:
            problems.append(f"{key} is not in the pack's config schema")
        else:
            problems.extend(_value_problems(key, value, rules))
    return problems


def _value_problems(name: str, value: object, rules: Mapping[str, Any]) -> list[str]:
    unchecked = set(rules) - CHECKED_KEYWORDS
    if unchecked:
        raise ValueError(f"{name}: schema keywords {sorted(unchecked)} are not checked")
    expected = rules.get("type")
    if expected is not None and not _has_type(value, expected):
        return [f"{name}: {value!r} is not of type {expected}"]
    problems = [f"{name}: {value!r} {problem}" for problem in _bound_problems(value, rules)]
    if "items" in rules and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problems.extend(_value_problems(f"{name}[{index}]", item, rules["items"]))
    return problems


def _has_type(value: object, expected: str) -> bool:
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _TYPES.get(expected, ()))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bound_problems(value: object, rules: Mapping[str, Any]) -> list[str]:
    """JSON Schema's bounds: minimum/maximum apply to numbers only, the lengths to strings
    only (counted in characters)."""
    if _number(value):
        assert isinstance(value, int | float)
        low, high = rules.get("minimum"), rules.get("maximum")
        return [
            *([f"is below {low}"] if low is not None and value < low else []),
            *([f"is above {high}"] if high is not None and value > high else []),
        ]
    if isinstance(value, str):
        shortest, longest = rules.get("minLength"), rules.get("maxLength")
        return [
            *(
                [f"is shorter than {shortest} characters"]
                if shortest is not None and len(value) < shortest
                else []
            ),
            *(
                [f"is longer than {longest} characters"]
                if longest is not None and len(value) > longest
                else []
            ),
        ]
    return []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m blob_safetynet.policies.pack.config",
        description="Print a policy pack config file with these thresholds under every policy.",
    )
    parser.add_argument(
        "--min-blob-soft-delete-days", type=int, default=DEFAULTS.min_blob_soft_delete_days
    )
    parser.add_argument(
        "--min-container-soft-delete-days",
        type=int,
        default=DEFAULTS.min_container_soft_delete_days,
    )
    parser.add_argument("--max-pending-days", type=int, default=DEFAULTS.max_pending_days)
    parser.add_argument("--container", default=DEFAULTS.container)
    parser.add_argument("--deployment-principal", action="append", default=[], metavar="OBJECT_ID")
    parser.add_argument(
        "--max-sas-expiration-seconds", type=int, default=DEFAULTS.max_sas_expiration_seconds
    )
    parser.add_argument(
        "--max-key-expiration-days", type=int, default=DEFAULTS.max_key_expiration_days
    )
    args = parser.parse_args(argv)
    thresholds = Thresholds(
        min_blob_soft_delete_days=args.min_blob_soft_delete_days,
        min_container_soft_delete_days=args.min_container_soft_delete_days,
        max_pending_days=args.max_pending_days,
        container=args.container,
        deployment_principal_ids=tuple(args.deployment_principal),
        max_sas_expiration_seconds=args.max_sas_expiration_seconds,
        max_key_expiration_days=args.max_key_expiration_days,
    )
    problems = schema_problems(config_values(thresholds), CONFIG_SCHEMA)
    if problems:
        parser.error("the pack's config schema refuses " + "; ".join(problems))
    json.dump(pack_config(thresholds), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
