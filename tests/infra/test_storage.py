"""The data account's safety-relevant inputs, as registered under mocks."""

from __future__ import annotations

from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError, parse
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


def test_blob_writes_and_deletes_are_logged_to_the_workspace(stack: StackRun) -> None:
    """The blob service's write and delete logs go to the Log Analytics workspace."""
    setting = stack.one("azure-native:monitor:DiagnosticSetting")
    workspace = stack.one("azure-native:operationalinsights:Workspace")
    assert setting.inputs["resourceUri"].endswith("/blobServices/default")
    assert setting.inputs["workspaceId"].endswith(f"/{workspace.name}")
    assert {log["category"] for log in setting.inputs["logs"] if log["enabled"]} == set(
        AUDITED_LOGS
    )


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
