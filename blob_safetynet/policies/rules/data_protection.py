"""Soft delete, permanent delete and version expiry: the nets that undo a wrong delete."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    Severity,
    Verdict,
    cis,
    failed,
    passed,
    unknown,
)
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Facet, Thresholds

SOFT_DELETE = "https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview"
SOFT_DELETE_DAYS = range(1, 366)
"""The retention days Azure takes: "The minimum specified value can be 1 and the maximum value
can be 365" (DeleteRetentionPolicy.days,
https://learn.microsoft.com/javascript/api/@azure/arm-storage/deleteretentionpolicy); a minimum
above it is one no account can meet."""


def _check_blob_soft_delete(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    policy = account.blob_service_properties.delete_retention
    if policy.enabled is UNKNOWN:
        return unknown("whether blob soft delete is enabled is not known yet")
    if not policy.enabled:
        return failed("blob soft delete is off")
    if policy.days is UNKNOWN:
        return unknown("the blob soft delete retention days are not known yet")
    minimum = thresholds.min_blob_soft_delete_days
    if policy.days is None or policy.days < minimum:
        return failed(f"blob soft delete keeps {policy.days} days, fewer than {minimum}")
    return passed(f"blob soft delete keeps {policy.days} days (minimum {minimum})")


BLOB_SOFT_DELETE = Rule(
    id="SN-BLOB-SOFT-DELETE",
    title="Blob soft delete is on for long enough",
    severity=Severity.CRITICAL,
    rationale=(
        "A wrong delete (a sweeper bug, a stale row, a person) can only be undone while the "
        "deleted blob is retained; the CIS 'soft delete for blobs' control means this setting, "
        "not container soft delete."
    ),
    remediation=Remediation(
        account="turn blob soft delete on and keep deleted blobs at least the audit's --min-blob-soft-delete-days (default 7): blob service `deleteRetentionPolicy.enabled: true`, `deleteRetentionPolicy.days` >= that minimum (`az storage account blob-service-properties update --account-name <account> -g <group> --enable-delete-retention true --delete-retention-days 7`)",
        pulumi=(
            "set Pulumi config `blobSoftDeleteDays` to at least minBlobSoftDeleteDays "
            "(blob_safetynet/infra/storage.py: BlobServiceProperties.deleteRetentionPolicy enabled=true)"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE}),
    check=_check_blob_soft_delete,
    controls=cis("4.10"),
    references=(SOFT_DELETE,),
)


def _check_container_soft_delete(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    policy = account.blob_service_properties.container_delete_retention
    if policy.enabled is UNKNOWN:
        return unknown("whether container soft delete is enabled is not known yet")
    if not policy.enabled:
        return failed("container soft delete is off")
    if policy.days is UNKNOWN:
        return unknown("the container soft delete retention days are not known yet")
    minimum = thresholds.min_container_soft_delete_days
    if policy.days is None:
        return failed(f"container soft delete is on with no retention days (minimum {minimum})")
    if policy.days < minimum:
        return failed(f"container soft delete keeps {policy.days} days, fewer than {minimum}")
    return passed(f"container soft delete keeps {policy.days} days (minimum {minimum})")


CONTAINER_SOFT_DELETE = Rule(
    id="SN-CONTAINER-SOFT-DELETE",
    title="Container soft delete is on for long enough",
    severity=Severity.HIGH,
    rationale=(
        "Deleting the container deletes every blob in it at once; blob soft delete does not "
        "bring a deleted container back, and a container kept a day is gone before a weekend "
        "ends."
    ),
    remediation=Remediation(
        account="turn container soft delete on and keep deleted containers at least the audit's --min-container-soft-delete-days (default 7): blob service `containerDeleteRetentionPolicy.enabled: true`, `containerDeleteRetentionPolicy.days` >= that minimum, at most 365 (`az storage account blob-service-properties update --account-name <account> -g <group> --enable-container-delete-retention true --container-delete-retention-days 7`)",
        pulumi=(
            "set Pulumi config `containerSoftDeleteDays` to at least minContainerSoftDeleteDays "
            "(blob_safetynet/infra/storage.py: BlobServiceProperties."
            "containerDeleteRetentionPolicy enabled=true)"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE}),
    check=_check_container_soft_delete,
    controls=cis("4.10"),
    references=("https://learn.microsoft.com/azure/storage/blobs/soft-delete-container-overview",),
)


def _check_permanent_delete(account: Account, _: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    allowed = account.blob_service_properties.delete_retention.allow_permanent_delete
    if allowed is UNKNOWN:
        return unknown("whether permanent delete is allowed is not known yet")
    if allowed:
        return failed("permanent delete of soft-deleted blobs is allowed")
    return passed("soft-deleted blobs cannot be purged before their retention ends")


NO_PERMANENT_DELETE = Rule(
    id="SN-NO-PERMANENT-DELETE",
    title="Permanent delete of soft-deleted blobs is disallowed",
    severity=Severity.HIGH,
    rationale=(
        "With permanent delete allowed, anyone who can delete can also purge the soft-deleted "
        "copy, and the undo net is gone."
    ),
    remediation=Remediation(
        account="stop permanent delete of soft-deleted blobs: blob service `deleteRetentionPolicy.allowPermanentDelete: false` (`az storage account blob-service-properties update --account-name <account> -g <group> --set deleteRetentionPolicy.allowPermanentDelete=false`)",
        pulumi=(
            "set `allowPermanentDelete: false` (or leave it out) in "
            "BlobServiceProperties.deleteRetentionPolicy (blob_safetynet/infra/storage.py)"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE}),
    check=_check_permanent_delete,
    references=(SOFT_DELETE,),
)


def _check_version_expiry(account: Account, _: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    assert account.lifecycle_rules is not UNKNOWN
    versioning = account.blob_service_properties.versioning_enabled
    if versioning is UNKNOWN:
        return unknown("whether versioning is on is not known yet")
    if not versioning:
        return passed("versioning is off, so no version piles up")
    days: list[int] = []
    for rule in account.lifecycle_rules:
        if rule.enabled is UNKNOWN or rule.version_delete_after_days is UNKNOWN:
            return unknown(f"lifecycle rule {rule.name} is not known yet")
        if rule.enabled and rule.version_delete_after_days is not None:
            days.append(rule.version_delete_after_days)
    if not days:
        return failed("versioning is on and no enabled lifecycle rule deletes old versions")
    return passed(f"old versions are deleted after {min(days)} days")


VERSION_EXPIRY = Rule(
    id="SN-VERSION-EXPIRY",
    title="Versioning on implies a version expiry rule",
    severity=Severity.LOW,
    rationale=(
        "With versioning every overwrite and delete keeps a version forever unless a lifecycle "
        "rule deletes old versions: cost grows without bound and deleted data never leaves."
    ),
    remediation=Remediation(
        account="with versioning on, add a lifecycle rule that deletes old versions: `rules[].definition.actions.version.delete.daysAfterCreationGreaterThan` (`az storage account management-policy create --account-name <account> -g <group> --policy @policy.json`), or turn versioning off (`az storage account blob-service-properties update --account-name <account> -g <group> --enable-versioning false`)",
        pulumi=(
            "set Pulumi config `versionExpiryDays` (blob_safetynet/infra/storage.py adds a lifecycle rule with "
            "actions.version.delete when `versioning` is true), or turn versioning off"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE, Facet.LIFECYCLE}),
    check=_check_version_expiry,
    advisory=True,
    references=("https://learn.microsoft.com/azure/storage/blobs/versioning-overview",),
)
