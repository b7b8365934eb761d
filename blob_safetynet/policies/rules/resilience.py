"""Copies outside the region, earlier versions, a restore to an earlier moment, and a protocol
container the protocol can still delete from: the nets beyond soft delete."""

from __future__ import annotations

from typing import Final

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    RuleScope,
    Severity,
    Verdict,
    cis4,
    failed,
    passed,
    settings_of,
    unknown,
)
from blob_safetynet.policies.rules.model import (
    CONTAINER_WORM_POLICY,
    LEGAL_HOLD,
    UNKNOWN,
    Account,
    Container,
    Facet,
    Fact,
    Thresholds,
    arm_fold,
)

REDUNDANCY = "https://learn.microsoft.com/azure/storage/common/storage-redundancy"
POINT_IN_TIME_RESTORE = (
    "https://learn.microsoft.com/azure/storage/blobs/point-in-time-restore-overview"
)
IMMUTABLE_STORAGE = "https://learn.microsoft.com/azure/storage/blobs/immutable-storage-overview"
VERSIONING = "https://learn.microsoft.com/azure/storage/blobs/versioning-overview"
DATA_PROTECTION = "https://learn.microsoft.com/azure/storage/blobs/data-protection-overview"

GEO_SKUS: Final = (
    "Standard_GRS",
    "Standard_RAGRS",
    "Standard_GZRS",
    "Standard_RAGZRS",
    "StandardV2_GRS",
    "StandardV2_GZRS",
)
"""The SKUs that keep a copy in a second region: GRS, RA-GRS, GZRS and RA-GZRS ("Geo-redundant
storage (GRS) copies your data synchronously three times within a single physical location in
the primary region ... then copies your data asynchronously to a single physical location in
the secondary region", REDUNDANCY), and the provisioned v2 SKUs of the same redundancy
(`SkuName` in the Microsoft.Storage REST spec). Microsoft's built-in bf045164 "Geo-redundant
storage should be enabled for Storage Accounts" takes the first four."""


def _check_geo(account: Account, _: Thresholds) -> Verdict:
    sku = settings_of(account).sku
    if sku is UNKNOWN:
        return unknown("the account's SKU (sku.name) is not known yet")
    if arm_fold(sku) not in {arm_fold(name) for name in GEO_SKUS}:
        return failed(
            f"the account's SKU is {sku}: every copy is in one region, so a region outage "
            "or loss takes every copy"
        )
    return passed(f"the account's SKU is {sku}: a copy is kept in the secondary region")


GEO_REDUNDANCY = Rule(
    id="SN-GEO-REDUNDANCY",
    title="The account keeps a copy in a second region",
    severity=Severity.MEDIUM,
    rationale=(
        "Locally and zone-redundant storage keep every copy in one region: a region outage "
        "makes the documents unreachable and a region loss takes every copy; geo-redundant "
        "storage copies each write to a region hundreds of miles away, with failover."
    ),
    remediation=Remediation(
        account="change the account's redundancy to a geo-redundant SKU: `sku.name` Standard_GRS, Standard_RAGRS, Standard_GZRS or Standard_RAGZRS (`az storage account update -n <account> -g <group> --sku Standard_GZRS`; a change to or from zone redundancy is a conversion: https://learn.microsoft.com/azure/storage/common/redundancy-migration)",
        pulumi=(
            "set Pulumi config `storageSku` to a geo-redundant SKU (Standard_GRS, Standard_RAGRS, "
            "Standard_GZRS or Standard_RAGZRS; the StorageAccount's `sku.name`)"
        ),
    ),
    facets=frozenset({Facet.SETTINGS}),
    check=_check_geo,
    advisory=True,
    blob_only=True,
    controls=cis4("10.3.12"),
    references=(REDUNDANCY,),
)


def _check_point_in_time_restore(account: Account, _: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    service = account.blob_service_properties
    restore = service.restore_policy
    if restore.enabled is UNKNOWN:
        return unknown("whether point-in-time restore is enabled is not known yet")
    if not restore.enabled:
        return failed("point-in-time restore is off")
    soft_delete = service.delete_retention
    for name, value in (
        ("the restore days are", restore.days),
        ("whether blob soft delete is on is", soft_delete.enabled),
        ("the blob soft delete days are", soft_delete.days),
        ("whether the change feed is on is", service.change_feed_enabled),
        ("whether versioning is on is", service.versioning_enabled),
    ):
        if value is UNKNOWN:
            return unknown(f"{name} not known yet")
    missing = [
        name
        for name, on in (
            ("blob soft delete", soft_delete.enabled),
            ("the change feed", service.change_feed_enabled),
            ("versioning", service.versioning_enabled),
        )
        if not on
    ]
    if missing:
        return failed(f"point-in-time restore is on without {' and '.join(missing)}")
    days, kept = restore.days, soft_delete.days
    if days is None:
        return failed("point-in-time restore is on with no restore days")
    if days is UNKNOWN or kept is UNKNOWN or kept is None or days >= kept:
        return failed(
            f"point-in-time restore keeps {restore.days} days, not fewer than blob soft "
            f"delete's {soft_delete.days}"
        )
    return passed(f"blobs can be restored to any moment of the last {restore.days} days")


POINT_IN_TIME = Rule(
    id="SN-POINT-IN-TIME-RESTORE",
    title="Point-in-time restore is on",
    severity=Severity.LOW,
    rationale=(
        "Point-in-time restore puts every block blob of a range back as it was at a moment: "
        "the undo for a bulk mistake (a sweeper run over the wrong rows, a bad migration) that "
        "blob soft delete would undo one blob at a time. Azure requires blob soft delete, the "
        "change feed and versioning with it, and restore days fewer than soft delete's."
    ),
    remediation=Remediation(
        account="turn point-in-time restore on with its prerequisites: blob service `restorePolicy.enabled: true` with `restorePolicy.days` fewer than `deleteRetentionPolicy.days`, `changeFeed.enabled: true`, `isVersioningEnabled: true` (`az storage account blob-service-properties update --account-name <account> -g <group> --enable-delete-retention true --delete-retention-days 14 --enable-versioning true --enable-change-feed true --enable-restore-policy true --restore-days 7`)",
        pulumi=(
            "set Pulumi config `pointInTimeRestoreDays` (fewer than `blobSoftDeleteDays`) with "
            "`changeFeed` and `versioning` true (BlobServiceProperties.restorePolicy, "
            "changeFeed, isVersioningEnabled)"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE}),
    check=_check_point_in_time_restore,
    advisory=True,
    references=(POINT_IN_TIME_RESTORE,),
)


def _check_versioning(account: Account, _: Thresholds) -> Verdict:
    assert account.blob_service_properties is not UNKNOWN
    versioning = account.blob_service_properties.versioning_enabled
    if versioning is UNKNOWN:
        return unknown("whether versioning is on is not known yet")
    if not versioning:
        return failed(
            "versioning is off: an overwrite or delete keeps no previous version; blob soft "
            "delete keeps a soft-deleted snapshot for the retention days only"
        )
    return passed("versioning is on: every overwrite and delete keeps the previous version")


BLOB_VERSIONING = Rule(
    id="SN-BLOB-VERSIONING",
    title="Blob versioning is on",
    severity=Severity.LOW,
    rationale=(
        "With versioning each overwrite or delete keeps the previous version as a version a "
        "client can read and promote back, until a lifecycle rule deletes it; without it, "
        "blob soft delete's snapshot is the only copy, and only for its retention days. The "
        "protocol itself never overwrites (create-only uploads), hence advisory; point-in-time "
        "restore requires versioning."
    ),
    remediation=Remediation(
        account="turn blob versioning on: blob service `isVersioningEnabled: true` (`az storage account blob-service-properties update --account-name <account> -g <group> --enable-versioning true`), then add a lifecycle rule that deletes old versions (SN-VERSION-EXPIRY)",
        pulumi=(
            "set Pulumi config `versioning` to true (BlobServiceProperties.isVersioningEnabled); "
            "SN-VERSION-EXPIRY then wants `versionExpiryDays` set too"
        ),
    ),
    facets=frozenset({Facet.BLOB_SERVICE}),
    check=_check_versioning,
    advisory=True,
    controls=cis4("10.2.2"),
    references=(VERSIONING, DATA_PROTECTION),
)


def _worm(container: Container, account: Account) -> tuple[list[str], list[Fact | None]]:
    """What makes the container's blobs WORM, and what is not known (each by the fact a source
    may be unable to hold, None for one any source holds)."""
    found: list[str] = []
    unread: list[Fact | None] = []
    for what, value, fact in (
        ("a time-based retention policy", container.worm_policy, CONTAINER_WORM_POLICY),
        ("a legal hold", container.legal_hold, LEGAL_HOLD),
        ("version-level immutability", container.version_immutability, None),
    ):
        if value is UNKNOWN:
            unread.append(fact)
        elif value:
            found.append(what)
    account_level = settings_of(account).immutability
    if account_level is UNKNOWN or UNKNOWN in (
        account_level.enabled,
        account_level.default_policy_state,
    ):
        unread.append(None)
    elif account_level.enabled and account_level.default_policy_state not in (None, "Disabled"):
        found.append("the account's default version-level immutability policy")
    return found, unread


def _check_protocol_container(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.containers is not UNKNOWN
    name = thresholds.container
    matches = [c for c in account.containers if c.name == name]
    if not matches:
        return passed(f"the account holds no container {name!r} yet, so none is immutable")
    found, unread = _worm(matches[0], account)
    if found:
        return failed(
            f"the protocol's container {name!r} has {' and '.join(found)}: the sweeper's "
            "deletes and every overwrite fail with 409 while it lasts"
        )
    if unread:
        named = [str(fact) for fact in unread if fact is not None]
        every = len(named) == len(unread)
        missing = [*named, *([] if every else ["its immutability settings"])]
        return unknown(
            f"whether the protocol's container {name!r} is immutable is not known (not read: "
            f"{', '.join(missing)})",
            *(named if every else ()),
        )
    return passed(f"the protocol's container {name!r} has no immutability policy or legal hold")


PROTOCOL_CONTAINER_MUTABLE = Rule(
    id="SN-PROTOCOL-CONTAINER-MUTABLE",
    title="The protocol's container is not immutable",
    severity=Severity.HIGH,
    rationale=(
        "The protocol replaces documents and has the sweeper delete the retired blobs and the "
        "orphans no row names; a WORM container (a time-based retention policy, a legal hold, "
        "version-level immutability) refuses every delete and overwrite with 409 "
        "(BlobImmutableDueToPolicy), so nothing is ever swept and storage only grows."
    ),
    remediation=Remediation(
        account="keep immutability off the protocol's container: remove its legal hold (`az storage container legal-hold clear`), delete its unlocked time-based policy (`az storage container immutability-policy delete`; a locked one cannot be removed: use a new container) and do not enable version-level immutability on it or on the account; put WORM copies in a separate container (or account) instead, e.g. by object replication or a copy job",
        pulumi=(
            "declare no BlobContainerImmutabilityPolicy and no `immutableStorageWithVersioning` "
            "on the protocol's container or its StorageAccount; keep WORM copies in a separate "
            "container"
        ),
    ),
    facets=frozenset({Facet.SETTINGS, Facet.CONTAINERS}),
    check=_check_protocol_container,
    scope=RuleScope.PROTOCOL,
    references=(
        IMMUTABLE_STORAGE,
        "https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes",
    ),
)
