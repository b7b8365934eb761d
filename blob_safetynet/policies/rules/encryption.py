"""Data at rest: the infrastructure layer and customer-managed keys."""

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
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    Encryption,
    Facet,
    Thresholds,
    arm_fold,
)

KEY_VAULT = "Microsoft.Keyvault"
"""The key source of a customer-managed key (compared by `arm_fold`, as ARM compares it)."""


def _encryption(account: Account) -> Encryption | None:
    found = settings_of(account).encryption
    return None if found is UNKNOWN else found


def _check_infrastructure(account: Account, _: Thresholds) -> Verdict:
    encryption = _encryption(account)
    layer = UNKNOWN if encryption is None else encryption.infrastructure
    if layer is UNKNOWN:
        return unknown("whether infrastructure encryption is required is not known yet")
    if not layer:
        return failed("infrastructure encryption is off (absent means off)")
    return passed("data is encrypted twice (service and infrastructure)")


INFRA_ENCRYPTION = Rule(
    id="SN-INFRA-ENCRYPTION",
    title="Infrastructure encryption is on",
    severity=Severity.LOW,
    rationale=(
        "A second AES-256 layer with a different key guards against a flaw in one algorithm "
        "or key; it can only be set when the account is created."
    ),
    remediation=Remediation(
        account="infrastructure encryption is set only when an account is created: create a new account with `encryption.requireInfrastructureEncryption: true` (`az storage account create ... --require-infrastructure-encryption`) and move the data",
        pulumi=(
            "set `encryption.requireInfrastructureEncryption: true` on the StorageAccount (needs a "
            "new account)"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_infrastructure,
    advisory=True,
    controls=cis("4.2"),
    references=(
        "https://learn.microsoft.com/azure/storage/common/infrastructure-encryption-enable",
    ),
)


def _check_cmk(account: Account, _: Thresholds) -> Verdict:
    encryption = _encryption(account)
    source = UNKNOWN if encryption is None else encryption.key_source
    if source is UNKNOWN:
        return unknown("the encryption key source is not known yet")
    if arm_fold(source) != arm_fold(KEY_VAULT):
        return failed(f"data is encrypted with platform-managed keys ({source})")
    return passed("data is encrypted with a customer-managed key in Key Vault")


CMK_ENCRYPTION = Rule(
    id="SN-CMK-ENCRYPTION",
    title="Data is encrypted with a customer-managed key",
    severity=Severity.LOW,
    rationale=(
        "With a customer-managed key the owner can rotate it, audit its use and revoke it, "
        "which makes every blob unreadable at once."
    ),
    remediation=Remediation(
        account="encrypt with a customer-managed key: account `encryption.keySource: Microsoft.Keyvault` with `encryption.keyvaultproperties` and an identity that may use the key (`az storage account update -n <account> -g <group> --encryption-key-source Microsoft.Keyvault --encryption-key-vault <vault uri> --encryption-key-name <key>`)",
        pulumi=(
            "set `encryption.keySource: Microsoft.Keyvault` with `keyVaultProperties` and a "
            "managed identity on the StorageAccount"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_cmk,
    advisory=True,
    controls=(*cis("4.11"), *mcsb("DP-5")),
    references=("https://learn.microsoft.com/azure/storage/common/customer-managed-keys-overview",),
)
