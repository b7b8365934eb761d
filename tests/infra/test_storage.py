"""The data account's safety-relevant inputs, as registered under mocks."""

from __future__ import annotations

from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.infra.lock import LOCK_NOTES, LOCK_TYPE
from blob_safetynet.infra.storage import (
    AUDITED_LOGS,
    INVENTORY_RULE,
    PENDING_RULE,
    RETIRED_RULE,
    VERSIONS_RULE,
)
from blob_safetynet.settings.vocabulary import PENDING, RETIRED, STATE_TAG
from tests.infra.conftest import RunFactory
from tests.infra.harness import DATA_BLOB_SERVICE, RAW_DEFAULTS, RegisteredResource, StackRun

ACCOUNT = "azure-native:storage:StorageAccount"
DATA_COMPONENT = "safetynet:storage:DataAccount"
DIAGNOSTIC_SETTING = "azure-native:monitor:DiagnosticSetting"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"


def data_account(run: StackRun) -> RegisteredResource:
    [account] = [res for res in run.of_type(ACCOUNT) if res.parent_type == DATA_COMPONENT]
    return account


def rules(run: StackRun) -> dict[str, dict[str, Any]]:
    policy = run.one("azure-native:storage:ManagementPolicy").inputs["policy"]
    return {rule["name"]: rule for rule in policy["rules"]}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("kind", "StorageV2"),
        ("isHnsEnabled", False),
        ("enableHttpsTrafficOnly", True),
        ("minimumTlsVersion", "TLS1_2"),
        ("allowBlobPublicAccess", False),
        ("allowSharedKeyAccess", False),
        ("defaultToOAuthAuthentication", True),
        ("allowCrossTenantReplication", False),
    ],
)
def test_the_data_account_is_hardened(stack: StackRun, key: str, expected: object) -> None:
    """Each hardening input of the data account is set explicitly to its safe value."""
    assert data_account(stack).inputs[key] == expected


def test_the_account_sku_comes_from_the_config(run: RunFactory) -> None:
    """The configured redundancy reaches the account's SKU unchanged."""
    assert data_account(run({"storageSku": "Standard_GZRS"})).inputs["sku"] == {
        "name": "Standard_GZRS"
    }


def test_soft_delete_covers_blobs_and_containers_without_permanent_delete(
    run: RunFactory,
) -> None:
    """Blob and container soft delete are on for the configured days; permanent delete is off."""
    props = run({"blobSoftDeleteDays": 21, "containerSoftDeleteDays": 9}).one(
        "azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE
    )
    assert props.inputs["blobServicesName"] == "default"
    assert props.inputs["deleteRetentionPolicy"] == {
        "enabled": True,
        "days": 21,
        "allowPermanentDelete": False,
    }
    assert props.inputs["containerDeleteRetentionPolicy"] == {"enabled": True, "days": 9}


def test_the_container_is_private_and_named_from_the_config(run: RunFactory) -> None:
    """The protocol's container is created with no public access under the configured name."""
    container = run({"containerName": "invoices"}).one(
        "azure-native:storage:BlobContainer", "safetynet-container"
    )
    assert container.inputs["containerName"] == "invoices"
    assert container.inputs["publicAccess"] == "None"


def test_the_lifecycle_rule_deletes_only_pending_block_blobs_of_the_container(
    run: RunFactory,
) -> None:
    """The seed-000 rule: block blobs under `<container>/` tagged state == pending, N days."""
    result = run({"containerName": "invoices", "pendingExpiryDays": 3})
    assert result.one("azure-native:storage:ManagementPolicy").inputs["managementPolicyName"] == (
        "default"
    )
    rule = rules(result)[PENDING_RULE]
    assert rule["enabled"] is True
    assert rule["type"] == "Lifecycle"
    filters = rule["definition"]["filters"]
    assert filters["blobTypes"] == ["blockBlob"]
    assert filters["prefixMatch"] == ["invoices/"]
    assert filters["blobIndexMatch"] == [{"name": STATE_TAG, "op": "==", "value": PENDING}]
    assert rule["definition"]["actions"] == {
        "baseBlob": {"delete": {"daysAfterCreationGreaterThan": 3}}
    }


def test_versioning_is_off_by_default_and_then_no_version_rule_exists(stack: StackRun) -> None:
    """Without versioning there are no versions to expire: the pending, retired and inventory
    report rules only."""
    props = stack.one("azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE)
    assert props.inputs["isVersioningEnabled"] is False
    assert set(rules(stack)) == {PENDING_RULE, RETIRED_RULE, INVENTORY_RULE}


def test_a_second_rule_collects_retired_blobs_days_after_their_last_read(
    run: RunFactory,
) -> None:
    """Blobs under `<container>/` tagged state == retired go `retiredBlobDays` after the last read."""
    result = run({"containerName": "invoices", "retiredBlobDays": 9})
    rule = rules(result)[RETIRED_RULE]
    props = result.one("azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE).inputs
    assert props["lastAccessTimeTrackingPolicy"] == {"enable": True}
    assert rule["enabled"] is True
    assert rule["type"] == "Lifecycle"
    filters = rule["definition"]["filters"]
    assert filters == {
        "blobTypes": ["blockBlob"],
        "prefixMatch": ["invoices/"],
        "blobIndexMatch": [{"name": STATE_TAG, "op": "==", "value": RETIRED}],
    }
    assert rule["definition"]["actions"] == {
        "baseBlob": {"delete": {"daysAfterLastAccessTimeGreaterThan": 9}}
    }


def test_the_data_account_is_protected_from_replacement(stack: StackRun) -> None:
    """The documents' account carries `protect`, so a rename fails instead of deleting it."""
    assert data_account(stack).protect is True
    assert stack.one(ACCOUNT, "safetynet-sweeper-runtime").protect is False


def test_versioning_on_adds_a_rule_that_expires_old_versions(run: RunFactory) -> None:
    """Turning versioning on also expires previous versions after the configured days."""
    result = run({"versioning": True, "versionExpiryDays": 45})
    assert result.one("azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE).inputs[
        "isVersioningEnabled"
    ]
    rule = rules(result)[VERSIONS_RULE]
    assert rule["enabled"] is True
    assert rule["definition"]["filters"]["prefixMatch"] == [f"{RAW_DEFAULTS['containerName']}/"]
    assert rule["definition"]["actions"] == {
        "version": {"delete": {"daysAfterCreationGreaterThan": 45}}
    }


@pytest.mark.parametrize(
    ("setting_name", "account_name"),
    [
        ("safetynet-blob-audit", "safetynet"),
        ("safetynet-sweeper-runtime-blob-audit", "safetynet-sweeper-runtime"),
    ],
)
def test_blob_reads_writes_and_deletes_are_logged_to_the_workspace(
    stack: StackRun, setting_name: str, account_name: str
) -> None:
    """The data account's and the Function's runtime account's blob services each send
    StorageRead, StorageWrite and StorageDelete to the Log Analytics workspace."""
    setting = stack.one(DIAGNOSTIC_SETTING, setting_name)
    account = stack.one(ACCOUNT, account_name)
    workspace = stack.one("azure-native:operationalinsights:Workspace")
    assert setting.inputs["resourceUri"] == f"{account.id}/blobServices/default"
    assert setting.inputs["workspaceId"].endswith(f"/{workspace.name}")
    enabled = {log["category"] for log in setting.inputs["logs"] if log["enabled"]}
    assert enabled == set(AUDITED_LOGS) == {"StorageRead", "StorageWrite", "StorageDelete"}


def test_every_account_has_its_blob_logs(stack: StackRun) -> None:
    """Each storage account of the default stack has exactly one blob-service diagnostic
    setting: no account is left without "who deleted it"."""
    logged = sorted(
        setting.inputs["resourceUri"].removesuffix("/blobServices/default")
        for setting in stack.of_type(DIAGNOSTIC_SETTING)
    )
    assert logged == sorted(str(account.id) for account in stack.of_type(ACCOUNT))


def test_the_workspace_keeps_logs_for_the_configured_days(run: RunFactory) -> None:
    """logRetentionDays becomes the workspace's retention (default 30)."""
    workspace = "azure-native:operationalinsights:Workspace"
    assert run().one(workspace).inputs["retentionInDays"] == 30
    assert run({"logRetentionDays": 400}).one(workspace).inputs["retentionInDays"] == 400


def test_point_in_time_restore_is_off_by_default(stack: StackRun) -> None:
    """By default the blob service has no restore policy and no change feed, said explicitly."""
    props = stack.one(BLOB_SERVICE, DATA_BLOB_SERVICE).inputs
    assert props["restorePolicy"] == {"enabled": False}
    assert props["changeFeed"] == {"enabled": False}


def test_point_in_time_restore_reaches_the_blob_service(run: RunFactory) -> None:
    """With restore days, versioning and change feed, the blob service carries all three."""
    props = (
        run({"pointInTimeRestoreDays": 13, "versioning": True, "changeFeed": True})
        .one(BLOB_SERVICE, DATA_BLOB_SERVICE)
        .inputs
    )
    assert props["restorePolicy"] == {"enabled": True, "days": 13}
    assert props["changeFeed"] == {"enabled": True}
    assert props["isVersioningEnabled"] is True
    assert props["deleteRetentionPolicy"]["days"] > 13


def test_the_change_feed_can_be_on_without_restore(run: RunFactory) -> None:
    """changeFeed alone turns on the change feed and leaves restore off."""
    props = run({"changeFeed": True}).one(BLOB_SERVICE, DATA_BLOB_SERVICE).inputs
    assert props["changeFeed"] == {"enabled": True}
    assert props["restorePolicy"] == {"enabled": False}


@pytest.mark.parametrize(
    "overrides",
    [{}, {"versioning": True, "changeFeed": True, "pointInTimeRestoreDays": 7}],
    ids=["defaults", "every-net-on"],
)
def test_nothing_is_made_immutable(run: RunFactory, overrides: dict[str, object]) -> None:
    """No account or container carries immutableStorageWithVersioning and no immutability
    policy is declared, with every option on: WORM on the protocol container would make the
    protocol's replace and the sweeper's deletes fail."""
    stack = run(overrides)
    for res in [*stack.of_type(ACCOUNT), *stack.of_type("azure-native:storage:BlobContainer")]:
        assert "immutableStorageWithVersioning" not in res.inputs, res.name
    assert not [res for res in stack.resources if "Immutability" in res.type]


def test_the_data_account_has_a_delete_lock(stack: StackRun) -> None:
    """By default one CanNotDelete lock is scoped to the data account, under the component,
    with notes naming the project."""
    [lock] = stack.of_type(LOCK_TYPE)
    assert lock.inputs["scope"] == data_account(stack).id
    assert lock.inputs["level"] == "CanNotDelete"
    assert lock.inputs["notes"] == LOCK_NOTES
    assert "blob_safetynet" in LOCK_NOTES
    assert len(LOCK_NOTES) <= 512
    assert lock.parent_type == "blob-safetynet:index:SafetyNetStorage"


def test_the_lock_comes_after_everything_under_the_account(stack: StackRun) -> None:
    """The lock depends on the account and on each resource under it (blob service, container,
    lifecycle, blob logs, role assignments on the container), so the engine creates it last and
    `pulumi destroy`, deleting dependents first, deletes it before any of them."""
    lock = stack.one(LOCK_TYPE)
    under_account = {
        data_account(stack).name,
        DATA_BLOB_SERVICE,
        "safetynet-container",
        "safetynet-lifecycle",
        "safetynet-blob-audit",
        *(
            res.name
            for res in stack.of_type("azure-native:authorization:RoleAssignment")
            if res.parent_type == "safetynet:access:Roles"
        ),
    }
    assert under_account <= lock.depends_on


def test_what_the_program_adds_under_the_account_goes_with_it(stack: StackRun) -> None:
    """The inventory container, policy and role assignments are deleted with the data account
    (deleted_with), never on their own under its lock."""
    inventory = [res for res in stack.resources if res.parent_type == "safetynet:storage:Inventory"]
    assert inventory
    assert {res.deleted_with for res in inventory} == {data_account(stack).name}


def test_lock_none_declares_no_lock(run: RunFactory) -> None:
    """lock=none: no management lock at all."""
    assert run({"lock": "none"}).of_type(LOCK_TYPE) == []


def test_repeated_runs_do_not_leak_into_each_other(run: RunFactory) -> None:
    """A run with other settings does not change what a later default run registers."""
    first = data_account(run()).inputs
    run({"storageSku": "Standard_LRS", "blobSoftDeleteDays": 2})
    assert data_account(run()).inputs == first


def test_the_lifecycle_policy_waits_for_last_access_time_tracking(stack: StackRun) -> None:
    """The retired-blob rule counts from the last access, which ARM refuses until the blob
    service properties that enable tracking exist (MissingLastAccessTimeBasedTrackingPolicy)."""
    properties = stack.one("azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE)
    assert properties.inputs["lastAccessTimeTrackingPolicy"]["enable"] is True
    assert properties.name in stack.one("azure-native:storage:ManagementPolicy").depends_on


@pytest.mark.parametrize("name", ["safetynet", "safetynet-sweeper-runtime"])
def test_new_accounts_require_infrastructure_encryption(stack: StackRun, name: str) -> None:
    """Both accounts ask for the second encryption layer, which only creation can turn on."""
    encryption = stack.one(ACCOUNT, name).inputs["encryption"]
    assert encryption["requireInfrastructureEncryption"] is True
    assert encryption["keySource"] == "Microsoft.Storage"


def test_an_account_created_without_infrastructure_encryption_can_keep_it_off(
    run: RunFactory,
) -> None:
    """`infrastructureEncryption: false` is the explicit choice for an account that predates it."""
    result = run({"infrastructureEncryption": False})
    assert data_account(result).inputs["encryption"]["requireInfrastructureEncryption"] is False


def test_the_data_account_refuses_what_no_network_rule_allows_by_default(stack: StackRun) -> None:
    """Default action Deny, trusted Azure services bypass, public access through the firewall."""
    inputs = data_account(stack).inputs
    assert inputs["publicNetworkAccess"] == "Enabled"
    assert inputs["networkRuleSet"]["defaultAction"] == "Deny"
    assert inputs["networkRuleSet"]["bypass"] == "AzureServices"
    assert inputs["allowCrossTenantReplication"] is False


def test_the_runtime_account_keeps_deleted_blobs_and_containers_too(run: RunFactory) -> None:
    """The function host's account has blob and container soft delete for the configured days,
    without permanent delete: the baseline rules judge every account of the stack."""
    props = run({"blobSoftDeleteDays": 21, "containerSoftDeleteDays": 9}).one(
        "azure-native:storage:BlobServiceProperties", "safetynet-sweeper-runtime-blob-service"
    )
    assert props.inputs["deleteRetentionPolicy"] == {
        "enabled": True,
        "days": 21,
        "allowPermanentDelete": False,
    }
    assert props.inputs["containerDeleteRetentionPolicy"] == {"enabled": True, "days": 9}


@pytest.mark.parametrize("account", ["safetynet", "safetynet-sweeper-runtime"])
def test_keys_and_sas_have_expiration_policies(run: RunFactory, account: str) -> None:
    """Every account bounds a key's life to 90 days and blocks a SAS of more than an hour,
    should shared keys ever be turned back on."""
    inputs = run({}).one(ACCOUNT, account).inputs
    assert inputs["keyPolicy"] == {"keyExpirationPeriodInDays": 90}
    assert inputs["sasPolicy"] == {"sasExpirationPeriod": "0.01:00:00", "expirationAction": "Block"}


def test_inventory_reports_expire_after_the_configured_days(run: RunFactory) -> None:
    """Block blobs in the inventory container, the one both Blob Inventory rules (reconcile's and
    recover's) write to, are deleted `inventoryReportDays` after they were written (default 30)."""
    result = run({"inventoryReportDays": 12})
    rule = rules(result)[INVENTORY_RULE]
    policy = result.one("azure-native:storage:BlobInventoryPolicy").inputs["policy"]
    [destination] = {r["destination"] for r in policy["rules"]}
    assert rule["definition"] == {
        "filters": {"blobTypes": ["blockBlob"], "prefixMatch": [f"{destination}/"]},
        "actions": {"baseBlob": {"delete": {"daysAfterCreationGreaterThan": 12}}},
    }
    assert rule["enabled"] is True
    assert parse(RAW_DEFAULTS).inventory_report_days == 30


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"inventoryReportDays": 1}, "inventoryReportDays"),
        ({"containerName": "inventory"}, "containerName"),
    ],
    ids=["one-day", "documents-in-the-inventory-container"],
)
def test_an_inventory_setting_that_would_delete_what_is_read_is_refused(
    overrides: dict[str, object], key: str
) -> None:
    """One day would let the lifecycle run delete the newest report; documents in the
    inventory container would expire with the reports."""
    with pytest.raises(ConfigError) as caught:
        parse({**RAW_DEFAULTS, **overrides})
    assert caught.value.key == key


def test_the_lock_also_comes_after_defender_and_the_backup(run: RunFactory) -> None:
    """With Defender for Storage and Azure Backup on, the lock depends on the Defender setting
    and every resource of the backup too (its role assignment on the account among them)."""
    stack = run({"backup": "operational", "versioning": True, "defenderForStorage": True})
    lock = stack.one(LOCK_TYPE)
    defender = stack.one("azure-native:security:DefenderForStorage")
    backup = [
        res.name
        for res in stack.resources
        if res.custom and res.parent_type == "safetynet:protection:BlobBackup"
    ]
    assert backup
    assert {defender.name, *backup} <= lock.depends_on
