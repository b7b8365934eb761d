"""Settings of the storage account resource itself."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    RuleScope,
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
    SHARED_KEY_SWITCH,
    UNKNOWN,
    Account,
    Facet,
    Thresholds,
    arm_fold,
)

TAG_CAPABLE_KINDS = ("StorageV2", "BlockBlobStorage")
"""Account kinds that support blob index tags (general-purpose v2, premium block blob)."""

TLS_VERSIONS = ("TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3")
MIN_TLS = "TLS1_2"


def _check_flat_namespace(account: Account, _: Thresholds) -> Verdict:
    hns = settings_of(account).is_hns_enabled
    if hns is UNKNOWN:
        return unknown("whether the hierarchical namespace is on is not known yet")
    if hns:
        return failed("the hierarchical namespace (Data Lake Gen2) is on")
    return passed("the namespace is flat")


FLAT_NAMESPACE = Rule(
    id="SN-FLAT-NAMESPACE",
    title="The account has a flat namespace",
    severity=Severity.CRITICAL,
    rationale=(
        "Blob index tags and lifecycle blobIndexMatch filters work only on a flat namespace: "
        "with a hierarchical namespace the tag guard and the pending backstop cannot exist."
    ),
    remediation=Remediation(
        account="blob index tags need a flat namespace, which cannot be turned off on an existing account: create a new account with `isHnsEnabled: false` (`az storage account create ... --hns false`) and move the data",
        pulumi=(
            "remove `isHnsEnabled` or set it to false on the StorageAccount (needs a new account)"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_flat_namespace,
    scope=RuleScope.PROTOCOL,
    references=("https://learn.microsoft.com/azure/storage/blobs/storage-manage-find-blobs",),
)


def _check_kind(account: Account, _: Thresholds) -> Verdict:
    kind = settings_of(account).kind
    if kind is UNKNOWN:
        return unknown("the account kind is not known yet")
    if kind not in TAG_CAPABLE_KINDS:
        return failed(f"kind {kind} does not support blob index tags")
    return passed(f"kind {kind} supports blob index tags")


ACCOUNT_KIND = Rule(
    id="SN-ACCOUNT-KIND",
    title="The account kind supports blob index tags",
    severity=Severity.CRITICAL,
    rationale=(
        "Only general-purpose v2 and premium block blob accounts support blob index tags; on "
        "other kinds the protocol's state tag cannot be written."
    ),
    remediation=Remediation(
        account="blob index tags need a general-purpose v2 or premium block blob account: `kind: StorageV2` (`az storage account update -n <account> -g <group> --set kind=StorageV2` upgrades a v1 account) or a new BlockBlobStorage account",
        pulumi="set `kind` to StorageV2 (or BlockBlobStorage) on the StorageAccount",
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_kind,
    scope=RuleScope.PROTOCOL,
    references=("https://learn.microsoft.com/azure/storage/blobs/storage-manage-find-blobs",),
)


def _check_shared_key(account: Account, _: Thresholds) -> Verdict:
    settings = settings_of(account)
    allowed, for_blob = settings.allow_shared_key_access, settings.blob_shared_key_access
    if for_blob is True:
        return failed(
            "shared key access is enabled for the blob service (allowSharedKeyAccessForServices)"
        )
    if allowed is UNKNOWN:
        return unknown("whether shared key access is allowed is not known yet")
    if for_blob is UNKNOWN:
        # Not returned at all: an api-version older than the per-service setting was read,
        # so a blob-level override could exist unseen.
        if allowed:
            return failed("shared key access is allowed (absent means allowed)")
        return unknown(
            "the account disallows shared key, but the blob service's own setting "
            f"({SHARED_KEY_SWITCH}) was not readable",
            SHARED_KEY_SWITCH,
        )
    if for_blob is False and allowed:
        # Microsoft documents no precedence between the account and the per-service switch.
        return unknown(
            "the account allows shared key and the blob service disallows it; which one "
            "wins is not documented"
        )
    if allowed:
        return failed("shared key access is allowed (absent means allowed)")
    return passed("shared key access is off")


SHARED_KEY_OFF = Rule(
    id="SN-SHARED-KEY-OFF",
    title="Shared key access is off",
    severity=Severity.HIGH,
    rationale=(
        "An account key bypasses RBAC: whoever holds it can write tags, delete and purge "
        "without any role; the permissions this project checks only mean something without it."
    ),
    remediation=Remediation(
        account="refuse shared key authorization: account `allowSharedKeyAccess: false` (`az storage account update -n <account> -g <group> --allow-shared-key-access false`), with no per-service exception for blob",
        pulumi=(
            "set `allowSharedKeyAccess: false` on the StorageAccount and leave "
            "`allowSharedKeyAccessForServices.blob` unset (or `enabled: false`)"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_shared_key,
    controls=mcsb("IM-1"),
    references=(
        "https://learn.microsoft.com/azure/storage/common/shared-key-authorization-prevent",
    ),
)


def _check_public_access(account: Account, _: Thresholds) -> Verdict:
    allowed = settings_of(account).allow_blob_public_access
    if allowed is UNKNOWN:
        return unknown("whether public blob access is allowed is not known yet")
    if allowed:
        return failed(
            "anonymous public blob access is allowed on the account (absent means allowed)"
        )
    return passed("anonymous public blob access is disallowed")


NO_PUBLIC_ACCESS = Rule(
    id="SN-NO-PUBLIC-ACCESS",
    title="Anonymous blob access is disallowed on the account",
    severity=Severity.CRITICAL,
    rationale=(
        "Documents are private data: with public access allowed, one container setting away "
        "from private, anyone with a URL reads them."
    ),
    remediation=Remediation(
        account="forbid anonymous read access: account `allowBlobPublicAccess: false` (`az storage account update -n <account> -g <group> --allow-blob-public-access false`)",
        pulumi="set `allowBlobPublicAccess: false` on the StorageAccount",
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_public_access,
    blob_only=True,
    controls=cis("4.17"),
    references=("https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-prevent",),
)


def _check_https_tls(account: Account, _: Thresholds) -> Verdict:
    settings = settings_of(account)
    if settings.https_only is UNKNOWN or settings.minimum_tls_version is UNKNOWN:
        return unknown("HTTPS-only or the minimum TLS version is not known yet")
    problems = []
    if not settings.https_only:
        problems.append("plain HTTP is accepted")
    tls = settings.minimum_tls_version
    # ARM compares enum values by ASCII case only (model.arm_fold): `TLS1_2` with a long s
    # is no TLS version ARM knows.
    known = [arm_fold(version) for version in TLS_VERSIONS]
    rank = known.index(arm_fold(tls)) if arm_fold(tls) in known else -1
    if rank < TLS_VERSIONS.index(MIN_TLS):
        problems.append(f"minimum TLS version is {tls} (absent means TLS1_0)")
    if problems:
        return failed(", ".join(problems))
    return passed(f"HTTPS only, minimum {tls}")


HTTPS_TLS = Rule(
    id="SN-HTTPS-TLS",
    title="HTTPS only with TLS 1.2 or later",
    severity=Severity.HIGH,
    rationale=(
        "Bearer tokens and SAS signatures travel with every request; HTTP or old TLS exposes them."
    ),
    remediation=Remediation(
        account="require HTTPS and TLS 1.2: account `supportsHttpsTrafficOnly: true` and `minimumTlsVersion: TLS1_2` (`az storage account update -n <account> -g <group> --https-only true --min-tls-version TLS1_2`)",
        pulumi=(
            "set `enableHttpsTrafficOnly: true` and `minimumTlsVersion: TLS1_2` on the StorageAccount"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_https_tls,
    controls=(*cis("4.1", "4.15"), *mcsb("DP-3")),
    references=(
        "https://learn.microsoft.com/azure/storage/common/transport-layer-security-configure-minimum-version",
    ),
)
