"""Exfiltration and threat detection: cross-tenant replication, Defender for Storage."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    Severity,
    Verdict,
    cis,
    failed,
    mcsb,
    passed,
    settings_of,
    unknown,
)
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Facet, Thresholds


def _check_cross_tenant(account: Account, _: Thresholds) -> Verdict:
    allowed = settings_of(account).allow_cross_tenant_replication
    if allowed is UNKNOWN:
        return unknown("whether cross-tenant replication is allowed is not known yet")
    if allowed:
        return failed(
            "object replication to other tenants is allowed (absent is allowed on accounts "
            "created before 15 December 2023)"
        )
    return passed("object replication stays within the tenant")


CROSS_TENANT_REPLICATION = Rule(
    id="SN-CROSS-TENANT-REPLICATION",
    title="Cross-tenant object replication is disallowed",
    severity=Severity.MEDIUM,
    rationale=(
        "An object replication policy to an account in another Entra tenant copies every new "
        "blob out of the organisation's control."
    ),
    remediation=Remediation(
        account="forbid object replication to other tenants: account `allowCrossTenantReplication: false` (`az storage account update -n <account> -g <group> --allow-cross-tenant-replication false`)",
        pulumi="set `allowCrossTenantReplication: false` on the StorageAccount",
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_cross_tenant,
    blob_only=True,
    controls=cis("4.16"),
    references=(
        "https://learn.microsoft.com/azure/storage/blobs/object-replication-prevent-cross-tenant-policies",
    ),
)


def _check_defender(account: Account, _: Thresholds) -> Verdict:
    if account.defender_enabled:
        return passed("Microsoft Defender for Storage is on")
    return failed("Microsoft Defender for Storage is off for this account")


DEFENDER_FOR_STORAGE = Rule(
    id="SN-DEFENDER-FOR-STORAGE",
    title="Microsoft Defender for Storage is on",
    severity=Severity.MEDIUM,
    rationale=(
        "Defender for Storage alerts on unusual access (a leaked SAS used from a new place, "
        "mass deletion, malware uploads), which no configuration rule can see."
    ),
    remediation=Remediation(
        account="turn on Microsoft Defender for Storage: the subscription's pricing `StorageAccounts` at tier Standard (`az security pricing create -n StorageAccounts --tier standard`), or the account's `Microsoft.Security/defenderForStorageSettings/current` with `isEnabled: true`",
        pulumi=(
            "enable the Defender for Storage plan on the subscription (a security Pricing named "
            "StorageAccounts with pricingTier Standard), or add a security DefenderForStorage "
            "resource (settingName current, isEnabled true) for the account"
        ),
    ),
    facets=frozenset({Facet.DEFENDER}),
    check=_check_defender,
    advisory=True,
    controls=(*cis("3.1.5.1"), *mcsb("LT-1", "DP-2")),
    references=(
        "https://learn.microsoft.com/azure/defender-for-cloud/defender-for-storage-introduction",
        "https://learn.microsoft.com/rest/api/defenderforcloud/pricings/get",
    ),
)
