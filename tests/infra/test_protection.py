"""The remaining nets of issue 46 under mocks: Azure Backup, the customer-managed key and
Defender for Storage, their stack keys, and the rules they make pass."""

from __future__ import annotations

from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.infra.protection import (
    BLOB_DATASOURCE,
    OPERATIONAL_RULE,
    STORAGE_ACCOUNT_BACKUP_CONTRIBUTOR,
    VAULTED_RULE,
    VAULTED_SCHEDULE,
)
from blob_safetynet.policies.rules import Outcome
from tests.infra.conftest import WITH_PRINCIPALS
from tests.infra.harness import (
    RAW_DEFAULTS,
    SUBSCRIPTION_ID,
    RegisteredResource,
    StackRun,
    run_stack,
)
from tests.infra.test_recommended import data_account_findings

ACCOUNT = "azure-native:storage:StorageAccount"
VAULT = "azure-native:dataprotection:BackupVault"
POLICY = "azure-native:dataprotection:BackupPolicy"
INSTANCE = "azure-native:dataprotection:BackupInstance"
DEFENDER = "azure-native:security:DefenderForStorage"
KEY_URI = "https://safetynet-keys.vault.azure.net/keys/data-key"
IDENTITY = (
    f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/security-rg/providers/"
    "Microsoft.ManagedIdentity/userAssignedIdentities/safetynet-cmk"
)
CMK: dict[str, object] = {"encryptionKeyUri": KEY_URI, "encryptionIdentityId": IDENTITY}
VAULTED: dict[str, object] = {
    "backup": "vaulted",
    "versioning": True,
    "backupOperationalDays": 9,
    "backupVaultedDays": 60,
}


@pytest.fixture(scope="module")
def protected() -> StackRun:
    """Every net of this module on: the key, Defender, both backup tiers."""
    return run_stack({**WITH_PRINCIPALS, **CMK, **VAULTED, "defenderForStorage": True})


@pytest.fixture(scope="module")
def operational() -> StackRun:
    return run_stack({**WITH_PRINCIPALS, "backup": "operational", "versioning": True})


def data_account(run: StackRun) -> RegisteredResource:
    return run.one(ACCOUNT, "safetynet")


def outcome(run: StackRun, rule_id: str) -> Outcome:
    [finding] = [f for f in data_account_findings(run) if f.rule.id == rule_id]
    return finding.outcome


def test_every_new_net_is_off_by_default(stack: StackRun) -> None:
    """The defaults create no backup, no Defender setting and keep Microsoft-managed keys."""
    config = parse(dict(RAW_DEFAULTS))
    assert (config.backup.mode, config.customer_key, config.defender_for_storage) == (
        "none",
        None,
        False,
    )
    types = {res.type for res in stack.resources}
    assert types.isdisjoint({VAULT, POLICY, INSTANCE, DEFENDER})
    assert data_account(stack).inputs["encryption"]["keySource"] == "Microsoft.Storage"
    assert "identity" not in data_account(stack).inputs


@pytest.mark.parametrize(
    ("overrides", "key", "problem"),
    [
        ({**CMK, "encryptionKeyUri": f"{KEY_URI}/0123456789abcdef0123456789abcdef"},
         "encryptionKeyUri", "names a key version"),
        ({**CMK, "encryptionKeyUri": "http://safetynet-keys.vault.azure.net/keys/data-key"},
         "encryptionKeyUri", "is not a Key Vault key URI"),
        ({**CMK, "encryptionKeyUri": "https://safetynet-keys.vault.azure.net/secrets/data-key"},
         "encryptionKeyUri", "is not a Key Vault key URI"),
        ({**CMK, "encryptionKeyUri": "https://example.com/keys/data-key"},
         "encryptionKeyUri", "is not a Key Vault key URI"),
        ({"encryptionKeyUri": KEY_URI}, "encryptionIdentityId", "is missing"),
        ({"encryptionIdentityId": IDENTITY}, "encryptionIdentityId", "without encryptionKeyUri"),
        ({**CMK, "encryptionIdentityId": "safetynet-cmk"}, "encryptionIdentityId",
         "is not the resource id of a user-assigned managed identity"),
        ({"backup": "daily"}, "backup", "is not allowed"),
        ({"backup": "operational"}, "backup", "needs versioning true"),
        ({**VAULTED, "backupOperationalDays": 10}, "blobSoftDeleteDays",
         "shorter than backupOperationalDays + 5 = 15"),
        ({**VAULTED, "backupOperationalDays": 361}, "backupOperationalDays", "out of range"),
        ({**VAULTED, "backupOperationalDays": 0}, "backupOperationalDays", "out of range"),
        ({**VAULTED, "backupVaultedDays": 3651}, "backupVaultedDays", "out of range"),
        ({"defenderForStorage": "sometimes"}, "defenderForStorage", "sometimes"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_its_key(
    overrides: dict[str, object], key: str, problem: str
) -> None:
    """Each bad combination stops the program with a ConfigError naming the key to fix."""
    with pytest.raises(ConfigError) as raised:
        parse({**RAW_DEFAULTS, **overrides})
    assert raised.value.key == key
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("uri", "vault"),
    [
        (KEY_URI, "https://safetynet-keys.vault.azure.net/"),
        (f"{KEY_URI}/", "https://safetynet-keys.vault.azure.net/"),
        ("https://Safetynet-Keys.vault.azure.net:443/keys/data-key",
         "https://safetynet-keys.vault.azure.net/"),
        ("https://safetynet-hsm.managedhsm.azure.net/keys/data-key",
         "https://safetynet-hsm.managedhsm.azure.net/"),
    ],
)  # fmt: skip
def test_a_versionless_key_uri_splits_into_vault_and_key(uri: str, vault: str) -> None:
    """A versionless key URI (a trailing slash, the :443 port, a Managed HSM) gives the vault URI
    and key name that keyVaultProperties takes."""
    key = parse({**RAW_DEFAULTS, **CMK, "encryptionKeyUri": uri}).customer_key
    assert key is not None
    assert (key.key_vault_uri, key.key_name) == (vault, "data-key")


def test_the_key_encrypts_the_data_account_as_its_identity(protected: StackRun) -> None:
    """keySource Microsoft.Keyvault, the key without a version, read as the user-assigned
    identity the account carries; the runtime account keeps Microsoft-managed keys."""
    account = data_account(protected).inputs
    assert account["encryption"]["keySource"] == "Microsoft.Keyvault"
    assert account["encryption"]["keyVaultProperties"] == {
        "keyVaultUri": "https://safetynet-keys.vault.azure.net/",
        "keyName": "data-key",
    }
    assert account["encryption"]["encryptionIdentity"] == {
        "encryptionUserAssignedIdentity": IDENTITY
    }
    assert account["encryption"]["requireInfrastructureEncryption"] is True
    assert account["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [IDENTITY]}
    [runtime] = [res for res in protected.of_type(ACCOUNT) if res.name != "safetynet"]
    assert runtime.inputs["encryption"]["keySource"] == "Microsoft.Storage"


def test_the_cmk_rule_passes_with_the_key_and_fails_without(
    stack: StackRun, protected: StackRun
) -> None:
    """SN-CMK-ENCRYPTION, judged through the Pulumi adapter, passes on the data account with the
    key and fails on the defaults."""
    assert outcome(protected, "SN-CMK-ENCRYPTION") is Outcome.PASS
    assert outcome(stack, "SN-CMK-ENCRYPTION") is Outcome.FAIL


def test_defender_is_on_for_the_account_without_malware_scanning(protected: StackRun) -> None:
    """One DefenderForStorage setting (`current`) on the data account: on, malware scanning off,
    sensitive data threat detection on, the subscription's settings not overridden."""
    setting = protected.one(DEFENDER)
    assert setting.inputs["resourceId"] == data_account(protected).id
    assert setting.inputs["settingName"] == "current"
    assert setting.inputs["properties"] == {
        "isEnabled": True,
        "overrideSubscriptionLevelSettings": False,
        "malwareScanning": {"onUpload": {"isEnabled": False}},
        "sensitiveDataDiscovery": {"isEnabled": True},
    }


def test_the_defender_rule_passes_with_the_setting(stack: StackRun, protected: StackRun) -> None:
    """SN-DEFENDER-FOR-STORAGE passes with defenderForStorage and is not a PASS without it."""
    assert outcome(protected, "SN-DEFENDER-FOR-STORAGE") is Outcome.PASS
    assert outcome(stack, "SN-DEFENDER-FOR-STORAGE") is not Outcome.PASS


def retention_rules(policy: RegisteredResource) -> dict[str, Any]:
    return {rule["name"]: rule for rule in policy.inputs["properties"]["policyRules"]}


def test_the_operational_tier_keeps_its_days_and_protects_the_account(
    operational: StackRun,
) -> None:
    """The policy's one rule keeps the operational store backupOperationalDays; the instance
    protects the account's blob service with no container list (the tier is account-wide)."""
    policy = operational.one(POLICY)
    assert policy.inputs["properties"]["datasourceTypes"] == [BLOB_DATASOURCE]
    [(name, rule)] = retention_rules(policy).items()
    assert name == OPERATIONAL_RULE
    [lifecycle] = rule["lifecycles"]
    assert lifecycle["deleteAfter"]["duration"] == "P7D"
    assert lifecycle["sourceDataStore"]["dataStoreType"] == "OperationalStore"
    instance = operational.one(INSTANCE).inputs["properties"]
    assert instance["dataSourceInfo"]["resourceID"] == data_account(operational).id
    assert instance["dataSourceInfo"]["datasourceType"] == BLOB_DATASOURCE
    assert instance["policyInfo"]["policyId"] == operational.one(POLICY).id
    assert "policyParameters" not in instance["policyInfo"]


def test_the_vaulted_tier_copies_the_container_daily(protected: StackRun) -> None:
    """With backup vaulted the policy adds the vault store's retention and a daily schedule,
    and the instance lists the protocol's container."""
    rules = retention_rules(protected.one(POLICY))
    assert rules[OPERATIONAL_RULE]["lifecycles"][0]["deleteAfter"]["duration"] == "P9D"
    vaulted = rules[VAULTED_RULE]["lifecycles"][0]
    assert (vaulted["deleteAfter"]["duration"], vaulted["sourceDataStore"]["dataStoreType"]) == (
        "P60D",
        "VaultStore",
    )
    schedule = rules["BackupDaily"]["trigger"]["schedule"]
    assert schedule["repeatingTimeIntervals"] == [VAULTED_SCHEDULE]
    assert VAULTED_SCHEDULE.endswith("/P1D")
    instance = protected.one(INSTANCE).inputs["properties"]
    assert instance["policyInfo"]["policyParameters"]["backupDatasourceParametersList"] == [
        {"objectType": "BlobBackupDatasourceParameters", "containersList": ["documents"]}
    ]


def test_the_vault_holds_its_role_before_it_protects(operational: StackRun) -> None:
    """The vault's system-assigned identity gets Storage Account Backup Contributor on the
    account, and the backup instance waits for that assignment and the blob service."""
    vault = operational.one(VAULT)
    assert vault.inputs["identity"] == {"type": "SystemAssigned"}
    assert vault.protect
    [role] = [
        res
        for res in operational.of_type("azure-native:authorization:RoleAssignment")
        if res.inputs["roleDefinitionId"].endswith(STORAGE_ACCOUNT_BACKUP_CONTRIBUTOR)
    ]
    assert role.inputs["scope"] == data_account(operational).id
    assert role.inputs["principalId"] == vault.state["identity"]["principalId"]
    assert role.inputs["principalType"] == "ServicePrincipal"
    assert role.inputs["roleDefinitionId"] == (
        f"/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{STORAGE_ACCOUNT_BACKUP_CONTRIBUTOR}"
    )
    assert {role.name, "safetynet-blob-service"} <= operational.one(INSTANCE).depends_on
