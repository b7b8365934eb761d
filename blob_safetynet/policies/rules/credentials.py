"""Credentials that bypass Entra ID: account keys, SAS tokens, local (SFTP) users."""

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
    reason_unknown,
    settings_of,
    unknown,
)
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Facet, Maybe, Thresholds


def _at_most(value: Maybe[int | None], maximum: int, policy: str, unit: str) -> Verdict:
    """PASS when the policy exists and allows at most `maximum`; the boundary passes."""
    if value is UNKNOWN:
        return unknown(f"the {policy} is not known yet")
    if value is None:
        return failed(f"the account has no {policy}")
    if value > maximum:
        return failed(f"the {policy} allows {value} {unit}, more than {maximum}")
    return passed(f"the {policy} allows {value} {unit} (at most {maximum})")


def _check_key_expiration(account: Account, thresholds: Thresholds) -> Verdict:
    return _at_most(
        settings_of(account).key_expiration_days,
        thresholds.max_key_expiration_days,
        "key expiration policy",
        "days",
    )


KEY_EXPIRATION_POLICY = Rule(
    id="SN-KEY-EXPIRATION-POLICY",
    title="A key expiration policy asks for key rotation",
    severity=Severity.LOW,
    rationale=(
        "Account keys never expire on their own; with shared key access off they are still "
        "one setting away from working, and a key that is never rotated stays valid if leaked."
    ),
    remediation=Remediation(
        account="set a key expiration policy of at most the maximum key age (90 days by default): account `keyPolicy.keyExpirationPeriodInDays` (`az storage account update -n <account> -g <group> --key-exp-days 90`)",
        pulumi=(
            "set `keyPolicy.keyExpirationPeriodInDays` (at most maxKeyExpirationDays) on the "
            "StorageAccount"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_key_expiration,
    advisory=True,
    controls=cis("4.3"),
    references=(
        "https://learn.microsoft.com/azure/storage/common/storage-account-keys-manage#create-a-key-expiration-policy",
    ),
)


def _check_sas_expiration(account: Account, thresholds: Thresholds) -> Verdict:
    return _at_most(
        settings_of(account).sas_expiration_seconds,
        thresholds.max_sas_expiration_seconds,
        "SAS expiration policy",
        "seconds",
    )


SAS_EXPIRATION_POLICY = Rule(
    id="SN-SAS-EXPIRATION-POLICY",
    title="A SAS expiration policy bounds SAS validity",
    severity=Severity.LOW,
    rationale=(
        "A SAS cannot be revoked one by one; the expiration policy flags (or blocks) every "
        "SAS signed for longer than the recommended interval."
    ),
    remediation=Remediation(
        account="set a SAS expiration policy of at most the maximum SAS validity (one hour by default): account `sasPolicy.sasExpirationPeriod` with `expirationAction` (`az storage account update -n <account> -g <group> --sas-exp 0.01:00:00`)",
        pulumi=(
            "set `sasPolicy` with `sasExpirationPeriod` at most maxSasExpirationSeconds (CIS: "
            "0.01:00:00) on the StorageAccount"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_sas_expiration,
    advisory=True,
    controls=cis("4.5"),
    references=("https://learn.microsoft.com/azure/storage/common/sas-expiration-policy",),
)


def _check_local_users(account: Account, _: Thresholds) -> Verdict:
    """The two switches settle it when both are off; only then may the local users be unread."""
    settings = settings_of(account)
    if settings.sftp_enabled is UNKNOWN or settings.local_users_enabled is UNKNOWN:
        return unknown("whether SFTP or local users are enabled is not known yet")
    if settings.sftp_enabled:
        return failed("SFTP is enabled")
    if settings.local_users_enabled is False:
        return passed("SFTP and local users are disabled")
    if account.local_users is UNKNOWN:
        reason = reason_unknown(account, Facet.LOCAL_USERS)
        return unknown(
            f"local users are not switched off, so their list decides: {reason}", Facet.LOCAL_USERS
        )
    if account.local_users:
        return failed("local users exist: " + ", ".join(account.local_users))
    return passed("SFTP is off and the account has no local user")


NO_LOCAL_USERS = Rule(
    id="SN-NO-LOCAL-USERS",
    title="No SFTP and no local users",
    severity=Severity.HIGH,
    rationale=(
        "Local users sign in with their own passwords, SSH keys or shared keys, outside Entra "
        "ID: Azure RBAC and ABAC conditions do not apply to them, exactly like account keys."
    ),
    remediation=Remediation(
        account="turn SFTP and local users off: account `isSftpEnabled: false` and `isLocalUserEnabled: false` (`az storage account update -n <account> -g <group> --enable-sftp false --enable-local-user false`), and delete the local users (`az storage account local-user delete`)",
        pulumi=(
            "set `isSftpEnabled: false` and `isLocalUserEnabled: false` on the StorageAccount and "
            "delete its LocalUser resources"
        ),
    ),
    facets=frozenset({Facet.SETTINGS, Facet.LOCAL_USERS}),
    settles_without=frozenset({Facet.LOCAL_USERS}),
    check=_check_local_users,
    controls=mcsb("IM-1"),
    references=(
        "https://learn.microsoft.com/azure/storage/blobs/secure-file-transfer-protocol-support-authorize-access",
    ),
)
