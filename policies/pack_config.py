"""The policy pack's config file for a set of thresholds: the same values under every policy.

The Pulumi CLI takes only `enforcementLevel` from a config file's `"all"` key; every other key
there is dropped and each policy runs with its schema defaults (pulumi/pulumi
`pkg/resource/analyzer/config.go`: `applyConfig` copies `all.EnforcementLevel` to each policy,
then merges properties given under the policy's own name; the Python analyzer hands a policy
only `policyConfig[<its name>]`, `pulumi_policy.policy._get_policy_config`). Thresholds must
therefore be repeated per policy, which this module writes:

    python -m policies.pack_config --max-pending-days 3 > policy-config.json
    pulumi up --policy-pack policy-pack --policy-pack-config policy-config.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from policies.model import Thresholds
from policies.rules import RULES

DEFAULTS = Thresholds()


def config_values(thresholds: Thresholds) -> dict[str, Any]:
    """The pack's config keys (its schema, `policies.pack.CONFIG_SCHEMA`) for `thresholds`."""
    return {
        "minBlobSoftDeleteDays": thresholds.min_blob_soft_delete_days,
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m policies.pack_config",
        description="Print a policy pack config file with these thresholds under every policy.",
    )
    parser.add_argument(
        "--min-blob-soft-delete-days", type=int, default=DEFAULTS.min_blob_soft_delete_days
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
    limits = (
        args.min_blob_soft_delete_days,
        args.max_pending_days,
        args.max_sas_expiration_seconds,
        args.max_key_expiration_days,
    )
    if min(limits) < 1:
        parser.error(
            "--min-blob-soft-delete-days, --max-pending-days, --max-sas-expiration-seconds "
            "and --max-key-expiration-days must be >= 1"
        )
    thresholds = Thresholds(
        min_blob_soft_delete_days=args.min_blob_soft_delete_days,
        max_pending_days=args.max_pending_days,
        container=args.container,
        deployment_principal_ids=tuple(args.deployment_principal),
        max_sas_expiration_seconds=args.max_sas_expiration_seconds,
        max_key_expiration_days=args.max_key_expiration_days,
    )
    json.dump(pack_config(thresholds), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
