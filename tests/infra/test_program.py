"""The program as a whole: its documented tables, outputs, Pulumi.yaml, and the harness itself."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pulumi
import pytest
import yaml

from blob_safetynet.infra.access import ROLES
from blob_safetynet.infra.component import COMPONENT_TYPE, stack_config
from blob_safetynet.infra.config import (
    ALLOWED,
    DATABASE_URL_KEY,
    DEFAULTS,
    KEYS,
    NAMESPACE,
    parse,
)
from blob_safetynet.infra.naming import stack_names
from blob_safetynet.infra.program import OUTPUT_NAMES, storage_args
from tests.infra.conftest import READER_ID, UPLOADER_ID, RunFactory
from tests.infra.harness import (
    DATA_BLOB_SERVICE,
    DELETE,
    NETWORK_GROUP,
    RAW_DEFAULTS,
    STACK_TYPE,
    StackRun,
    run_main,
    set_input,
    typed_principals,
)

ROOT = Path(__file__).resolve().parents[2]
# Each checked table lives in the page a reader looks for it in.
DOC_OF_TABLE = {
    "config-table": ROOT / "docs" / "configuration.md",
    "outputs": ROOT / "docs" / "deployment.md",
    "resources": ROOT / "docs" / "deployment.md",
    "rbac": ROOT / "docs" / "roles.md",
}


def table(marker: str) -> list[list[str]]:
    """The body rows of the table between `<!-- marker:start -->` and `<!-- marker:end -->`."""
    doc = DOC_OF_TABLE[marker]
    text = doc.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker}:start -->\n(.*?)<!-- {marker}:end -->", text, re.S)
    assert match, f"{doc.relative_to(ROOT)} has no {marker} table"
    rows = [line for line in match.group(1).splitlines() if line.startswith("|")]
    return [[_unquote(cell.strip()) for cell in row.strip("|").split("|")] for row in rows[2:]]


def _unquote(cell: str) -> str:
    wrapped = cell.count("`") == 2 and cell.startswith("`") and cell.endswith("`")
    return cell[1:-1] if wrapped else cell


def test_the_documented_resources_are_what_the_program_registers(stack: StackRun) -> None:
    """Every (type, parent type) pair in the docs is registered, and nothing else is."""
    documented = {(type_, parent) for type_, parent in table("resources")}
    registered = {(res.type, res.parent_type) for res in stack.resources}
    assert registered == documented


def test_every_custom_resource_lives_inside_a_component(stack: StackRun) -> None:
    """Only the resource group, SafetyNetStorage and the stack's own components (alerts and
    inventory) sit at the top; the rest are parented."""
    top = {res.type for res in stack.resources if res.parent_type == STACK_TYPE}
    assert top == {
        "azure-native:resources:ResourceGroup",
        COMPONENT_TYPE,
        "safetynet:alerts:Alerts",
        "safetynet:storage:Inventory",
    }


def test_the_documented_config_table_matches_the_code() -> None:
    """The docs list every key with the default and range that blob_safetynet/infra/config.py enforces."""
    rows = {key: (default, allowed) for key, default, allowed in table("config-table")}
    assert list(rows) == list(KEYS)
    for key, (default, allowed) in rows.items():
        assert allowed == ALLOWED[key]
        if key in DEFAULTS:
            assert json.loads(default) == DEFAULTS[key]
        else:
            assert default == "(required)"


def test_the_documented_rbac_table_matches_the_roles() -> None:
    """Each role's data actions, with their reasons, appear in the docs exactly as granted."""
    documented = [tuple(row) for row in table("rbac")]
    granted = [(spec.key, grant.data_action, grant.why) for spec in ROLES for grant in spec.grants]
    assert documented == granted


def test_the_outputs_pipelines_use_are_exported_and_documented(stack: StackRun) -> None:
    """Every documented output is returned by the program with a resolved, non-empty value."""
    assert [row[0] for row in table("outputs")] == list(OUTPUT_NAMES)
    assert list(stack.outputs) == list(OUTPUT_NAMES)
    assert all(isinstance(value, str) and value for value in stack.outputs.values())
    assert stack.outputs["blobEndpoint"].startswith(f"https://{stack.outputs['accountName']}.")
    assert stack.outputs["containerName"] == DEFAULTS["containerName"]


def test_pulumi_yaml_runs_the_python_program_in_infra() -> None:
    """Pulumi.yaml names the project after the config namespace and points at infra/."""
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    assert project["name"] == NAMESPACE
    assert project["runtime"]["name"] == "python"
    assert project["main"] == "infra/"
    assert (ROOT / project["main"] / "__main__.py").is_file()


def test_set_input_breaks_exactly_one_setting(run: RunFactory) -> None:
    """The harness's mutation changes the captured inputs of the named resource type only."""
    account = "azure-native:storage:StorageAccount"
    broken = run(mutate=set_input(account, "allowSharedKeyAccess", True, name="safetynet"))
    assert broken.one(account, "safetynet").inputs["allowSharedKeyAccess"] is True
    assert broken.one(account, "safetynet-sweeper-runtime").inputs["allowSharedKeyAccess"] is False


def test_set_input_reaches_into_lists_and_can_delete(run: RunFactory) -> None:
    """Dotted paths with list indices edit nested inputs; DELETE removes a key."""
    policy = "azure-native:storage:ManagementPolicy"
    result = run(
        mutate=set_input(policy, "policy.rules.0.definition.filters.blobIndexMatch", DELETE)
    )
    filters = result.one(policy).inputs["policy"]["rules"][0]["definition"]["filters"]
    assert "blobIndexMatch" not in filters
    assert filters["blobTypes"] == ["blockBlob"]


@pytest.mark.parametrize("days", [2, 30])
def test_overrides_change_one_setting_between_runs(run: RunFactory, days: int) -> None:
    """Config overrides reach the registered inputs, run after run in one process."""
    props = run({"blobSoftDeleteDays": days}).one(
        "azure-native:storage:BlobServiceProperties", DATA_BLOB_SERVICE
    )
    assert props.inputs["deleteRetentionPolicy"]["days"] == days


def test_the_entry_point_reads_the_stack_config_and_exports_the_outputs(
    stack: StackRun,
) -> None:
    """`infra/__main__.py` builds the same resources from `pulumi config` and exports them all."""
    config = {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in RAW_DEFAULTS.items()
    }
    config["uploaderPrincipalIds"] = json.dumps([{"id": UPLOADER_ID, "type": "ServicePrincipal"}])
    config["readerPrincipalIds"] = json.dumps([{"id": READER_ID, "type": "ServicePrincipal"}])
    result = run_main(config, secret_keys=[DATABASE_URL_KEY])
    assert sorted((res.type, res.name) for res in result.resources) == sorted(
        (res.type, res.name) for res in stack.resources
    )
    assert result.outputs == stack.outputs


def test_every_stack_key_reaches_the_component_unchanged() -> None:
    """The program hands the component every key it was configured with (all but the alerts',
    which are the program's own): the args, validated again, give back the same config."""
    subnets = f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/other-vnet/subnets"
    changed: dict[str, object] = {
        "location": "northeurope",
        "storageSku": "Standard_GZRS",
        "containerName": "papers",
        "blobSoftDeleteDays": 30,
        "containerSoftDeleteDays": 21,
        "versioning": True,
        "versionExpiryDays": 60,
        "pendingExpiryDays": 3,
        "retiredBlobDays": 9,
        "inventoryReportDays": 45,
        "uploaderPrincipalIds": [UPLOADER_ID],
        "readerPrincipalIds": [{"id": READER_ID, "type": "Group"}],
        "verifierPrincipalIds": [{"id": UPLOADER_ID, "type": "User"}],
        "deployerPrincipalType": "ServicePrincipal",
        "publicNetworkAccess": "Disabled",
        "networkDefaultAction": "Allow",
        "allowedIpRanges": ["203.0.113.0/24"],
        "allowedSubnetIds": [f"{subnets}/apps"],
        "sweeperSubnetId": f"{subnets}/sweeper",
        "privateEndpointSubnetId": f"{subnets}/endpoints",
        "privateDnsZoneId": (
            f"{NETWORK_GROUP}/providers/Microsoft.Network/privateDnsZones/"
            "privatelink.blob.core.windows.net"
        ),
        "infrastructureEncryption": False,
        "sweeperSchedule": "0 */10 * * * *",
        "sweeperCutoff": "2h",
        "sweeperLease": True,
        "sweeperPackagePath": "/elsewhere/sweeper.zip",
        "sweeperTable": "docs.files",
        "sweeperColumns": {"id": "file_id"},
        "sweeperDatabaseAuth": "entra",
        "verifySchedule": "0 0 */6 * * *",
        "alertEmails": ["oncall@example.com"],
        "alertWebhooks": ["https://hooks.example.com/x"],
        "backup": "vaulted",
        "backupOperationalDays": 25,
        "backupVaultedDays": 400,
        "encryptionKeyUri": "https://safetynet-keys.vault.azure.net/keys/data-key",
        "encryptionIdentityId": (
            f"{NETWORK_GROUP}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/cmk"
        ),
        "defenderForStorage": True,
        DATABASE_URL_KEY: "postgresql+psycopg://sweeper@db2.example.test:5432/docs",
        "lock": "none",
        "logRetentionDays": 90,
        "pointInTimeRestoreDays": 6,
        "changeFeed": True,
    }
    assert set(changed) == set(KEYS)
    assert [key for key in DEFAULTS if changed[key] == DEFAULTS[key]] == []
    config = parse(typed_principals(changed))
    names = pulumi.Output.from_input(stack_names(NAMESPACE, "test", "sub"))
    args = storage_args(config, names=names, resource_group_name="rg", resource_group_id="/rg")
    assert stack_config(args) == replace(config, alert_emails=(), alert_webhooks=())
