"""The sweeper's function app: Flex Consumption, Python 3.11, one user-assigned identity, no keys."""

from __future__ import annotations

import json
import re
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.infra.sweeper_app import (
    DATABASE_URL_SECRET,
    DEPLOYMENT_CONTAINER,
    FC1_REFUSED_APP_SETTINGS,
    FC1_REFUSED_SITE_CONFIG,
    KEY_VAULT_SECRETS_OFFICER,
    KEY_VAULT_SECRETS_USER,
    MONITORING_METRICS_PUBLISHER,
    PYTHON_VERSION,
    READER,
    STORAGE_BLOB_DATA_OWNER,
)
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import FunctionSettings, SweepSettings
from blob_safetynet.store.tables import DocumentTable
from tests.infra.conftest import WITH_PRINCIPALS, RunFactory
from tests.infra.harness import (
    DEPLOYER_OBJECT_ID,
    RAW_DEFAULTS,
    SUBSCRIPTION_ID,
    TEST_DATABASE_URL,
    RegisteredResource,
    StackRun,
    typed_principals,
)

APP = "azure-native:web:WebApp"
SETTINGS = "azure-native:web:WebAppApplicationSettings"
ACCOUNT = "azure-native:storage:StorageAccount"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
VAULT = "azure-native:keyvault:Vault"
SECRET = "azure-native:keyvault:Secret"
PACKAGE = "pulumi-python:dynamic/safetynet:FunctionPackage"
KEY_MARKERS = ("AccountKey=", "SharedAccessSignature", "sig=", "DefaultEndpointsProtocol")
HOST_JSON = Path(__file__).resolve().parents[2] / "sweeper" / "host.json"


def app_settings(run: StackRun) -> dict[str, str]:
    return dict(run.one(SETTINGS).inputs["properties"])


def runtime_account(run: StackRun) -> RegisteredResource:
    return run.one(ACCOUNT, "safetynet-sweeper-runtime")


def identity_id(run: StackRun) -> str:
    return (
        f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/safetynet-rg/providers/"
        "Microsoft.ManagedIdentity/userAssignedIdentities/safetynet-sweeper-identity"
    )


def assignments_of(run: StackRun, principal: object) -> list[RegisteredResource]:
    return [res for res in run.of_type(ASSIGNMENT) if res.inputs["principalId"] == principal]


def role_guid(assignment: RegisteredResource) -> str:
    return str(assignment.inputs["roleDefinitionId"]).rsplit("/", 1)[-1]


def keys_anywhere(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in keys_anywhere(item)}
    if isinstance(value, list):
        return {key for item in value for key in keys_anywhere(item)}
    return set()


def test_the_app_runs_python_on_flex_consumption_linux(stack: StackRun) -> None:
    """A Linux function app on an FC1 plan, Python 3.11, HTTPS only."""
    app = stack.one(APP).inputs
    plan = stack.one("azure-native:web:AppServicePlan").inputs
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["reserved"] is True
    assert app["kind"] == "functionapp,linux"
    assert app["functionAppConfig"]["runtime"] == {"name": "python", "version": PYTHON_VERSION}
    assert app["httpsOnly"] is True


def test_the_site_sends_no_site_config_that_flex_consumption_refuses(stack: StackRun) -> None:
    """No siteConfig at all: FC1 answers netFrameworkVersion, ftpsState and the like with 51021."""
    app = stack.one(APP).inputs
    assert "siteConfig" not in app
    assert not keys_anywhere(app) & set(FC1_REFUSED_SITE_CONFIG)
    assert not set(app_settings(stack)) & set(FC1_REFUSED_APP_SETTINGS)


def test_the_app_uses_its_own_identity_for_everything_but_verification(stack: StackRun) -> None:
    """Key Vault references, deployment storage, host storage and telemetry use the app's
    identity; the verifier identity beside it is only named by the verification setting."""
    app = stack.one(APP).inputs
    uai = identity_id(stack)
    verifier = uai.replace("/safetynet-sweeper-identity", "/safetynet-sweeper-verifier-identity")
    assert app["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [uai, verifier]}
    assert app["keyVaultReferenceIdentity"] == uai
    storage = app["functionAppConfig"]["deployment"]["storage"]
    assert storage["authentication"] == {
        "type": "UserAssignedIdentity",
        "userAssignedIdentityResourceId": uai,
    }
    settings = app_settings(stack)
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == settings["AZURE_CLIENT_ID"]
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == (
        f"ClientId={settings['AZURE_CLIENT_ID']};Authorization=AAD"
    )
    assert settings[appsettings.VERIFIER_CLIENT_ID.name] != settings["AZURE_CLIENT_ID"]


def test_the_identitys_roles_exist_before_the_site(stack: StackRun) -> None:
    """The site depends on its host-storage, telemetry and secret grants (Microsoft's Flex samples)."""
    grants = {
        "safetynet-sweeper-host-storage",
        "safetynet-sweeper-insights-publisher",
        "safetynet-sweeper-database-url-reader",
    }
    assert grants <= stack.one(APP).depends_on
    principal = stack.outputs["sweeperPrincipalId"]
    assert {role_guid(res) for res in assignments_of(stack, principal)} >= {
        STORAGE_BLOB_DATA_OWNER,
        MONITORING_METRICS_PUBLISHER,
        KEY_VAULT_SECRETS_USER,
    }


def test_app_settings_are_wired_from_the_stack_config(run: RunFactory) -> None:
    """Container, cutoff, schedule and the data account's endpoint reach the sweeper's settings."""
    result = run(
        {
            "containerName": "invoices",
            "sweeperCutoff": "2h",
            "sweeperSchedule": "0 0 * * * *",
            "sweeperLease": True,
        }
    )
    settings = app_settings(result)
    assert settings["SAFETYNET_CONTAINER"] == "invoices"
    assert settings["SAFETYNET_CUTOFF"] == "2h"
    assert settings["SAFETYNET_SCHEDULE"] == "0 0 * * * *"
    assert settings["SAFETYNET_LEASE"] == "true"
    assert settings["SAFETYNET_ACCOUNT_URL"] == result.outputs["blobEndpoint"]


def test_the_database_url_is_a_key_vault_reference_never_plain(stack: StackRun) -> None:
    """SAFETYNET_DB_URL names the vault secret; the URL itself is only the secret's value."""
    setting = app_settings(stack)["SAFETYNET_DB_URL"]
    vault = stack.outputs["keyVaultName"]
    assert setting == (
        f"@Microsoft.KeyVault(SecretUri=https://{vault}.vault.azure.net/secrets/"
        f"{DATABASE_URL_SECRET})"
    )
    assert TEST_DATABASE_URL not in json.dumps([res.inputs for res in stack.of_type(SETTINGS)])
    secret = stack.one(SECRET)
    assert secret.inputs["properties"] == {"value": TEST_DATABASE_URL}
    assert "properties" in secret.secret_inputs


def test_the_vault_is_rbac_only_with_soft_delete_and_purge_protection(stack: StackRun) -> None:
    """Access policies are off (RBAC decides), deletes are recoverable and cannot be purged."""
    props = stack.one(VAULT).inputs["properties"]
    assert props["enableRbacAuthorization"] is True
    assert props["enableSoftDelete"] is True
    assert props["enablePurgeProtection"] is True
    assert 7 <= props["softDeleteRetentionInDays"] <= 90
    assert "accessPolicies" not in props


def test_only_the_apps_identity_reads_the_secret_and_only_that_secret(stack: StackRun) -> None:
    """Key Vault Secrets User is granted to the app's identity, scoped to the one secret."""
    readers = [res for res in stack.of_type(ASSIGNMENT) if role_guid(res) == KEY_VAULT_SECRETS_USER]
    assert [res.inputs["principalId"] for res in readers] == [stack.outputs["sweeperPrincipalId"]]
    assert (
        readers[0]
        .inputs["scope"]
        .endswith(f"/vaults/{stack.outputs['keyVaultName']}/secrets/{DATABASE_URL_SECRET}")
    )


def test_no_setting_holds_a_key_or_connection_string(stack: StackRun) -> None:
    """Host storage is reached by account name and identity; no key or SAS appears anywhere."""
    settings = app_settings(stack)
    assert (
        settings["AzureWebJobsStorage__accountName"] == runtime_account(stack).inputs["accountName"]
    )
    assert "AzureWebJobsStorage" not in settings
    for value in settings.values():
        assert not any(marker in value for marker in KEY_MARKERS)


def test_the_runtime_account_is_as_key_less_as_the_data_account(stack: StackRun) -> None:
    """The host's own account also refuses shared keys, anonymous access and old TLS."""
    inputs = runtime_account(stack).inputs
    assert inputs["allowSharedKeyAccess"] is False
    assert inputs["allowBlobPublicAccess"] is False
    assert inputs["minimumTlsVersion"] == "TLS1_2"
    assert inputs["enableHttpsTrafficOnly"] is True


def test_the_deployment_container_is_the_runtime_accounts(stack: StackRun) -> None:
    """Flex Consumption keeps the published package in the runtime account's container."""
    storage = stack.one(APP).inputs["functionAppConfig"]["deployment"]["storage"]
    account = runtime_account(stack).inputs["accountName"]
    assert storage["type"] == "blobContainer"
    assert storage["value"] == f"https://{account}.blob.core.windows.net/{DEPLOYMENT_CONTAINER}"


def test_the_package_is_published_to_the_app_after_its_last_site_write(stack: StackRun) -> None:
    """One deploy goes to the site's SCM host, after the site's last write, checked against the
    deployer."""
    package = stack.one(PACKAGE).inputs
    app_name = stack.outputs["sweeperAppName"]
    assert package["scmHost"] == f"{app_name}.scm.azurewebsites.net"
    assert package["appId"].endswith(f"/Microsoft.Web/sites/{app_name}")
    assert package["deployerObjectId"] == DEPLOYER_OBJECT_ID
    assert "safetynet-sweeper-no-basic-auth-scm" in stack.one(PACKAGE).depends_on


def test_the_sites_settings_and_basic_auth_policies_are_written_one_after_another(
    stack: StackRun,
) -> None:
    """Settings, then the FTP policy, then the SCM policy: App Service answers overlapping
    writes to one site with 409 (pulumi-azure-native issue 3411)."""
    ftp = stack.one("azure-native:web:WebAppFtpAllowed")
    scm = stack.one("azure-native:web:WebAppScmAllowed")
    assert "safetynet-sweeper-settings" in ftp.depends_on
    assert ftp.name in scm.depends_on


def test_the_deployer_gets_no_blob_role_and_secrets_officer_on_the_vault_only(
    stack: StackRun,
) -> None:
    """One deploy needs no blob rights for the deployer; deleting the secret through the
    vault's data plane needs Key Vault Secrets Officer, granted on this vault alone."""
    (grant,) = assignments_of(stack, DEPLOYER_OBJECT_ID)
    assert role_guid(grant) == KEY_VAULT_SECRETS_OFFICER
    assert grant.inputs["scope"].endswith(f"/vaults/{stack.outputs['keyVaultName']}")
    assert grant.inputs["principalType"] == "User"


def test_the_secret_is_created_after_the_deployers_grant_and_so_deleted_before_it(
    stack: StackRun,
) -> None:
    """Destroy deletes dependants first: the secret goes while the deployer still holds the role."""
    assert "safetynet-sweeper-deployer-secrets-officer" in stack.one(SECRET).depends_on


def test_a_service_principal_deployer_is_granted_as_one(run: RunFactory) -> None:
    """`deployerPrincipalType` reaches the grant, so a pipeline identity is not sent as a User."""
    result = run({"deployerPrincipalType": "ServicePrincipal"})
    (grant,) = assignments_of(result, DEPLOYER_OBJECT_ID)
    assert grant.inputs["principalType"] == "ServicePrincipal"


def test_a_new_zip_changes_the_package_hash(run: RunFactory, tmp_path: Path) -> None:
    """Rebuilding the function with other content gives a new hash, so Pulumi publishes again."""
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("function_app.py", "# another build\n")
    first = run().one(PACKAGE).inputs["sha256"]
    assert run({"sweeperPackagePath": str(other)}).one(PACKAGE).inputs["sha256"] != first


def test_a_missing_zip_stops_the_program_naming_the_make_target(
    run: RunFactory, tmp_path: Path
) -> None:
    """Without the built zip the program stops and says to run `make function-zip`."""
    with pytest.raises(ConfigError, match="make function-zip"):
        run({"sweeperPackagePath": str(tmp_path / "missing.zip")})


def test_the_host_gets_broad_rights_only_on_its_own_account(stack: StackRun) -> None:
    """Storage Blob Data Owner (host storage) is scoped to the runtime account, never the data."""
    roles = {
        role_guid(res): res.inputs["scope"]
        for res in assignments_of(stack, stack.outputs["sweeperPrincipalId"])
        if res.parent_type == "safetynet:sweeper:SweeperApp"
    }
    host_account = app_settings(stack)["AzureWebJobsStorage__accountName"]
    assert roles[STORAGE_BLOB_DATA_OWNER].endswith(f"/storageAccounts/{host_account}")
    assert roles[STORAGE_BLOB_DATA_OWNER] != stack.outputs["accountId"]
    assert roles[MONITORING_METRICS_PUBLISHER].endswith(
        f"/{stack.one('azure-native:applicationinsights:Component').name}"
    )


def test_basic_auth_publishing_is_off(stack: StackRun) -> None:
    """FTP and SCM basic-auth publishing credentials are disabled for the app."""
    for kind in ("WebAppFtpAllowed", "WebAppScmAllowed"):
        policy = stack.one(f"azure-native:web:{kind}").inputs
        assert policy["allow"] is False
        assert policy["name"] == stack.outputs["sweeperAppName"]


def test_telemetry_needs_an_entra_identity(stack: StackRun) -> None:
    """Application Insights refuses key-only ingestion and stores its data in the workspace."""
    insights = stack.one("azure-native:applicationinsights:Component").inputs
    assert insights["disableLocalAuth"] is True
    assert insights["ingestionMode"] == "LogAnalytics"
    assert app_settings(stack)["APPLICATIONINSIGHTS_CONNECTION_STRING"].startswith(
        "InstrumentationKey="
    )


FLEX_DEFAULT_TIMEOUT_MINUTES = 30
FLEX_SCALE_IN_GRACE_MINUTES = 60
"""MicrosoftDocs/azure-docs includes/functions-timeout-duration.md: Flex Consumption default 30
minutes, no enforced maximum, 60 minutes of grace on scale-in (Consumption: 5 and at most 10)."""


def test_the_function_timeout_follows_the_flex_consumption_limits() -> None:
    """host.json uses Flex's 30-minute default, inside the 60-minute scale-in grace period."""
    timeout = json.loads(HOST_JSON.read_text(encoding="utf-8"))["functionTimeout"]
    match = re.fullmatch(r"(\d\d):(\d\d):(\d\d)", timeout)
    assert match, timeout
    minutes = int(match.group(1)) * 60 + int(match.group(2))
    assert minutes == FLEX_DEFAULT_TIMEOUT_MINUTES
    assert minutes <= FLEX_SCALE_IN_GRACE_MINUTES


LOADER_CASES = [
    {"sweeperDatabaseAuth": "password"},
    {
        "sweeperDatabaseAuth": "entra",
        "containerName": "invoices",
        "sweeperCutoff": "2h",
        "sweeperLease": True,
    },
    # The program's cutoff floor (1m) and a long one lie inside the Function's bounds (1s-365d).
    {"sweeperCutoff": "1m", "sweeperLease": "false"},
    {"sweeperCutoff": "30d", "pendingExpiryDays": 31, "sweeperLease": "TRUE"},
    # An application's own table: the loader reads the same names the stack chose.
    {"sweeperTable": "billing.app_files", "sweeperColumns": {"id": "file_id", "name": "path"}},
    {"sweeperTable": "app_files", "sweeperColumns": '{"blob_name": "object_key"}'},
]


@pytest.mark.parametrize("overrides", LOADER_CASES)
def test_the_app_settings_are_what_the_sweepers_loader_accepts(
    run: RunFactory, overrides: dict[str, object]
) -> None:
    """The Function's settings loader reads the program's app settings as the stack chose them."""
    result = run(overrides)
    config = parse(typed_principals({**RAW_DEFAULTS, **WITH_PRINCIPALS, **overrides}))
    env = {key: str(value) for key, value in app_settings(result).items()}
    assert env[appsettings.DB_URL.name].startswith("@Microsoft.KeyVault(")
    # The platform resolves the Key Vault reference to the secret's value before the app starts.
    env[appsettings.DB_URL.name] = result.one(SECRET).inputs["properties"]["value"]
    loaded = FunctionSettings.from_environment(env)
    assert loaded.db_auth == config.database_auth
    assert loaded.db_url == TEST_DATABASE_URL
    assert loaded.account_url == result.outputs["blobEndpoint"]
    assert loaded.connection_string is None
    assert loaded.allow_custom_endpoint is False
    assert loaded.sweep == SweepSettings(
        cutoff=timedelta(seconds=config.sweeper_cutoff_seconds),
        container=config.container_name,
        use_lease=config.sweeper_lease,
    )
    assert env[appsettings.SCHEDULE.name] == config.sweeper_schedule
    assert loaded.table == config.sweeper_table
    assert DocumentTable.from_names(loaded.table).qualified_name == config.sweeper_table.qualified


def test_the_program_writes_only_settings_of_the_vocabulary(stack: StackRun) -> None:
    """Every app setting the program writes is defined in blob_safetynet/settings/appsettings.py, and every
    setting the Function needs without a default (the schedule, the target) is written."""
    written = set(app_settings(stack))
    assert written <= {setting.name for setting in appsettings.SETTINGS}
    # Stand-ins for tests (Azurite, a local Resource Manager): never written on Azure.
    tests_only = {
        setting.name
        for setting in (
            appsettings.CONNECTION_STRING,
            appsettings.ARM_ENDPOINT,
            appsettings.ARM_TOKEN,
        )
    }
    needed = {
        setting.name
        for setting in appsettings.FUNCTION_SETTINGS
        if setting.default is None and setting.name not in tests_only
    }
    assert needed <= written
    assert not tests_only & written


def test_the_verifier_identitys_only_control_plane_role_is_reader_on_the_resource_group(
    stack: StackRun,
) -> None:
    """The verification timer's settings audit reads as the verifier identity, whose one
    Resource Manager role is Reader on the stack's resource group (the other is its data role on
    the container): tests/sweeper/test_verify_timer.py grants the fake Resource Manager exactly
    this scope and finds no read outside it."""
    grants = [
        (role_guid(res), res.inputs["scope"])
        for res in stack.of_type(ASSIGNMENT)
        if res.name.startswith("safetynet-sweeper-verifier")
    ]
    group = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/safetynet-rg"
    assert grants == [(READER, group)]
