"""The CrossGuard policies, built from the rules. Importing this module starts nothing.

`policies/__main__.py` is the only place that constructs `PolicyPack(...)` (which starts a gRPC
server and blocks). Tests call the validate functions of `POLICIES` directly.

Rules that judge one resource on its own become resource policies (account settings on each
StorageAccount, public access on each BlobContainer). Rules that span resources, or whose
absence is itself the finding (no BlobServiceProperties means soft delete off, no
ManagementPolicy means no backstop, no RoleAssignment means nobody can seal), become stack
policies over the normalized model of every account in the stack.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from blob_safetynet.policies.adapters import pulumi_props
from blob_safetynet.policies.adapters.pulumi_props import StackResource
from blob_safetynet.policies.rules import RULES, Finding, FixTarget, Outcome, Rule, suppressions
from blob_safetynet.policies.rules.base import failed
from blob_safetynet.policies.rules.model import Account, Facet, Thresholds

PACK_NAME: Final = "blob-safetynet"
STACK: Final = "<stack>"
"""The account name of a finding about the stack as a whole."""

DEFAULT_THRESHOLDS: Final = Thresholds()

CONFIG_SCHEMA: Final = PolicyConfigSchema(
    properties={
        "minBlobSoftDeleteDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": 365,
            "default": DEFAULT_THRESHOLDS.min_blob_soft_delete_days,
            "description": "Fewest days blob soft delete must keep a deleted blob.",
        },
        "minContainerSoftDeleteDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": 365,
            "default": DEFAULT_THRESHOLDS.min_container_soft_delete_days,
            "description": "Fewest days container soft delete must keep a deleted container.",
        },
        "maxPendingDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": 365,
            "default": DEFAULT_THRESHOLDS.max_pending_days,
            "description": "Most days the lifecycle rule may leave a pending blob.",
        },
        "containerName": {
            "type": "string",
            "minLength": 3,
            "maxLength": 63,
            "default": DEFAULT_THRESHOLDS.container,
            "description": "The protocol's container (the lifecycle rule must cover it).",
        },
        "maxSasExpirationSeconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": 365 * 24 * 3600,
            "default": DEFAULT_THRESHOLDS.max_sas_expiration_seconds,
            "description": "Longest SAS validity the SAS expiration policy may allow "
            "(SN-SAS-EXPIRATION-POLICY; CIS: one hour).",
        },
        "maxKeyExpirationDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": 365,
            "default": DEFAULT_THRESHOLDS.max_key_expiration_days,
            "description": "Longest account key validity the key expiration policy may allow "
            "(SN-KEY-EXPIRATION-POLICY; CIS: 90 days).",
        },
        "deploymentPrincipalIds": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Object ids of deployment identities, exempt from the "
            "application-role rules (SN-NO-BROAD-APP-ROLES, SN-NEVER-GRANTED).",
        },
        "suppressionsFile": {
            "type": "string",
            "default": "",
            "description": "The suppressions file `safetynet audit --suppressions` reads (an "
            "absolute path is safest): a FAIL a live suppression covers is no violation.",
        },
        "suppressionHorizonDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": suppressions.MAX_HORIZON_DAYS,
            "default": suppressions.HORIZON_DAYS,
            "description": "Latest expiry a suppression may have, in days after today; a "
            "later one makes the file a violation (`audit --suppression-horizon-days`).",
        },
    }
)
"""The thresholds every policy accepts, set under each policy's own name in a policy config file
(`python -m blob_safetynet.policies.pack.config`); the CLI drops them under `"all"`."""


class RuleUnknown(UnknownValueError):
    """A rule cannot be judged during preview: CrossGuard reports it as an advisory note."""

    def __init__(self, message: str) -> None:
        super().__init__(UNKNOWN_STRING_VALUE, [])
        self.message = message


def thresholds(config: Mapping[str, Any]) -> Thresholds:
    """The thresholds from a policy's config (defaults for keys left out)."""
    return Thresholds(
        min_blob_soft_delete_days=int(
            config.get("minBlobSoftDeleteDays", DEFAULT_THRESHOLDS.min_blob_soft_delete_days)
        ),
        min_container_soft_delete_days=int(
            config.get(
                "minContainerSoftDeleteDays", DEFAULT_THRESHOLDS.min_container_soft_delete_days
            )
        ),
        max_pending_days=int(config.get("maxPendingDays", DEFAULT_THRESHOLDS.max_pending_days)),
        container=str(config.get("containerName", DEFAULT_THRESHOLDS.container)),
        deployment_principal_ids=tuple(
            str(item) for item in config.get("deploymentPrincipalIds", ())
        ),
        max_sas_expiration_seconds=int(
            config.get("maxSasExpirationSeconds", DEFAULT_THRESHOLDS.max_sas_expiration_seconds)
        ),
        max_key_expiration_days=int(
            config.get("maxKeyExpirationDays", DEFAULT_THRESHOLDS.max_key_expiration_days)
        ),
    )


def plain(value: Any) -> Any:
    """CrossGuard's property proxies as plain dicts and lists; unknowns kept as sentinels."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[key] = plain(value[key])
            except UnknownValueError as error:
                out[key] = error.unknown_type_sentinel
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index]))
            except UnknownValueError as error:
                items.append(error.unknown_type_sentinel)
        return items
    return value


def _live_failures(
    findings: Sequence[Finding], config: Mapping[str, Any], report: ReportViolation
) -> list[Finding]:
    """The FAIL findings no live suppression of `suppressionsFile` covers. A file that cannot
    be read or breaks the schema is itself a violation: the pack fails closed."""
    failures = [f for f in findings if f.outcome is Outcome.FAIL]
    path = str(config.get("suppressionsFile") or "")
    if not path or not failures:
        return failures
    today = dt.datetime.now(dt.UTC).date()
    days = config.get("suppressionHorizonDays", suppressions.HORIZON_DAYS)
    horizon = suppressions.Horizon(today, days if isinstance(days, int) else 0)
    try:
        accepted = suppressions.load(Path(path), (rule.id for rule in RULES), horizon)
    except suppressions.SuppressionError as error:
        report(f"suppressionsFile {path!r}: {error}", None)
        return failures
    applied = suppressions.apply(failures, accepted, today)
    return [f for f in failures if applied.of(f) is None]


def _report(
    findings: Sequence[Finding],
    report: ReportViolation,
    urns: Mapping[str, str],
    config: Mapping[str, Any],
) -> None:
    """FAIL findings no suppression covers become violations; if none failed, an UNKNOWN
    becomes a preview note."""
    failures = _live_failures(findings, config, report)
    for finding in failures:
        report(f"{finding.account}: {finding.message}", urns.get(finding.account))
    unknowns = [f for f in findings if f.outcome is Outcome.UNKNOWN]
    if unknowns and not failures:
        raise RuleUnknown("; ".join(f"{f.account}: {f.message}" for f in unknowns))


RESOURCE_FACETS: Final[dict[frozenset[Facet], tuple[str, Any]]] = {
    frozenset({Facet.SETTINGS}): (
        pulumi_props.STORAGE_ACCOUNT,
        pulumi_props.account_from_resource,
    ),
    frozenset({Facet.CONTAINERS}): (
        pulumi_props.BLOB_CONTAINER,
        pulumi_props.container_as_account,
    ),
}
"""Facet sets one resource carries on its own, with its type and the adapter that reads it."""


def is_resource_rule(rule: Rule) -> bool:
    return not rule.protocol and rule.facets in RESOURCE_FACETS


def _resource_policy(rule: Rule) -> ResourceValidationPolicy:
    resource_type, adapt = RESOURCE_FACETS[rule.facets]

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type != resource_type:
            return
        resource = StackResource(type=args.resource_type, name=args.name, props=plain(args.props))
        account: Account = adapt(resource)
        config = args.get_config()
        _report([rule.evaluate(account, thresholds(config), FixTarget.PULUMI)], report, {}, config)

    return ResourceValidationPolicy(validate=validate, **_metadata(rule))


def stack_resource(resource: PolicyResource) -> StackResource:
    """A CrossGuard stack resource as the adapter's input (outputs, id and parent)."""
    props = plain(resource.props)
    resource_id = props.get("id")
    known_id = resource_id not in pulumi_props.UNKNOWN_SENTINELS
    return StackResource(
        type=resource.resource_type,
        name=resource.name,
        props=props,
        parent=resource.parent.urn if resource.parent is not None else None,
        id=resource_id if isinstance(resource_id, str) and known_id else None,
    )


def judge_stack(
    rule: Rule, resources: Sequence[StackResource], limits: Thresholds
) -> list[Finding]:
    """The rule over every account of the stack it applies to.

    A protocol rule that applies to no account of a stack that has storage accounts is a
    finding of its own: the configured container is in none of them (a `containerName` that
    does not match the program, or a stack without the protocol's container), and staying
    silent would read as a pass. The identities of the stack's own policy assignments (the
    remediation identities of `SafetyNetGovernance`) are judged as deployment identities.
    """
    governance = pulumi_props.policy_assignment_principals(resources)
    if governance:
        exempt = (*limits.deployment_principal_ids, *governance)
        limits = dataclasses.replace(limits, deployment_principal_ids=exempt)
    accounts = pulumi_props.accounts_from_stack(resources)
    judged = [
        rule.evaluate(a, limits, FixTarget.PULUMI) for a in accounts if rule.applies_to(a, limits)
    ]
    if rule.protocol and accounts and not judged:
        names = ", ".join(a.name for a in accounts)
        verdict = failed(
            f"no storage account of the stack ({names}) has a container named "
            f"{limits.container!r}, so the protocol's nets cannot be checked (is the pack's "
            "containerName the program's container?)"
        )
        message = rule.message(verdict, FixTarget.PULUMI)
        judged.append(
            Finding(rule, STACK, None, verdict.outcome, message, verdict.detail, FixTarget.PULUMI)
        )
    return judged


def _stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [stack_resource(resource) for resource in args.resources]
        urns = {
            pulumi_props.account_name(resource): original.urn
            for resource, original in zip(resources, args.resources, strict=True)
            if resource.type == pulumi_props.STORAGE_ACCOUNT
        }
        config = args.get_config()
        _report(judge_stack(rule, resources, thresholds(config)), report, urns, config)

    return StackValidationPolicy(validate=validate, **_metadata(rule))


def _metadata(rule: Rule) -> dict[str, Any]:
    return {
        "name": rule.id,
        "description": f"{rule.title}. {rule.rationale}",
        "enforcement_level": EnforcementLevel(rule.enforcement),
        "config_schema": CONFIG_SCHEMA,
        "display_name": rule.title,
        "severity": Severity(rule.severity.value),
        "remediation_steps": rule.remediation.pulumi,
        "tags": ["azure", "storage", "blob-safetynet"],
    }


def build_policies(rules: Sequence[Rule] = RULES) -> list[Policy]:
    """One CrossGuard policy per rule, in catalogue order."""
    return [_resource_policy(r) if is_resource_rule(r) else _stack_policy(r) for r in rules]


POLICIES: Final[list[Policy]] = build_policies()
