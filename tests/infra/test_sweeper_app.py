"""The sweeper's function app: Flex Consumption, Python 3.11, identity everywhere, no keys."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from infra.config import ConfigError
from infra.package import PACKAGE_BLOB
from infra.sweeper_app import (
    DEPLOYMENT_CONTAINER,
    MONITORING_METRICS_PUBLISHER,
    PYTHON_VERSION,
    STORAGE_BLOB_DATA_CONTRIBUTOR,
    STORAGE_BLOB_DATA_OWNER,
)
from tests.infra.conftest import RunFactory
from tests.infra.harness import DEPLOYER_OBJECT_ID, TEST_DATABASE_URL, RegisteredResource, StackRun

APP = "azure-native:web:WebApp"
ACCOUNT = "azure-native:storage:StorageAccount"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"
PACKAGE = "pulumi-python:dynamic/safetynet:FunctionPackage"
KEY_MARKERS = ("AccountKey=", "SharedAccessSignature", "sig=", "DefaultEndpointsProtocol")


def app_settings(run: StackRun) -> dict[str, str]:
    settings = run.one(APP).inputs["siteConfig"]["appSettings"]
    return {item["name"]: item["value"] for item in settings}


def runtime_account(run: StackRun) -> RegisteredResource:
    return run.one(ACCOUNT, "sweeper-runtime")


def assignments_of(run: StackRun, principal: object) -> list[RegisteredResource]:
    return [res for res in run.of_type(ASSIGNMENT) if res.inputs["principalId"] == principal]


def test_the_app_runs_python_on_flex_consumption_linux(stack: StackRun) -> None:
    """A Linux function app on an FC1 plan, Python 3.11, with a system-assigned identity."""
    app = stack.one(APP).inputs
    plan = stack.one("azure-native:web:AppServicePlan").inputs
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["reserved"] is True
    assert app["kind"] == "functionapp,linux"
    assert app["functionAppConfig"]["runtime"] == {"name": "python", "version": PYTHON_VERSION}
    assert app["identity"] == {"type": "SystemAssigned"}
    assert app["httpsOnly"] is True
    assert app["siteConfig"]["minTlsVersion"] == "1.2"
    assert app["siteConfig"]["ftpsState"] == "Disabled"


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
    assert settings["SAFETYNET_DB_URL"] == TEST_DATABASE_URL


def test_the_database_url_is_registered_as_a_secret(stack: StackRun) -> None:
    """The settings that carry the database URL are a secret input, encrypted in state."""
    assert "siteConfig" in stack.one(APP).secret_inputs


def test_no_setting_holds_a_key_or_connection_string(stack: StackRun) -> None:
    """Host storage is reached by account name and identity; no key or SAS appears anywhere."""
    settings = app_settings(stack)
    host_account = settings["AzureWebJobsStorage__accountName"]
    assert runtime_account(stack).name.replace("-", "") in host_account
    assert "AzureWebJobsStorage" not in settings
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == "Authorization=AAD"
    for value in settings.values():
        assert not any(marker in value for marker in KEY_MARKERS)


def test_the_runtime_account_is_as_key_less_as_the_data_account(stack: StackRun) -> None:
    """The host's own account also refuses shared keys, anonymous access and old TLS."""
    inputs = runtime_account(stack).inputs
    assert inputs["allowSharedKeyAccess"] is False
    assert inputs["allowBlobPublicAccess"] is False
    assert inputs["minimumTlsVersion"] == "TLS1_2"
    assert inputs["enableHttpsTrafficOnly"] is True


def test_the_package_is_read_with_the_apps_identity_from_the_runtime_account(
    stack: StackRun,
) -> None:
    """Deployment storage is the runtime account's container, authenticated by the identity."""
    storage = stack.one(APP).inputs["functionAppConfig"]["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {"type": "SystemAssignedIdentity"}
    assert storage["value"].endswith(f".blob.core.windows.net/{DEPLOYMENT_CONTAINER}")
    assert "safetynetmock" not in storage["value"]


def test_the_package_upload_is_keyless_and_tracks_the_zip(stack: StackRun) -> None:
    """The package resource uploads the zip's hash to released-package.zip; the app restarts on it."""
    package = stack.one(PACKAGE).inputs
    assert package["blobName"] == PACKAGE_BLOB
    assert package["containerUrl"].endswith(f"/{DEPLOYMENT_CONTAINER}")
    assert app_settings(stack)["SAFETYNET_PACKAGE_SHA256"] == package["sha256"]
    deployer = assignments_of(stack, DEPLOYER_OBJECT_ID)
    assert [res.inputs["roleDefinitionId"].rsplit("/", 1)[-1] for res in deployer] == [
        STORAGE_BLOB_DATA_CONTRIBUTOR
    ]
    assert deployer[0].inputs["scope"].endswith(f"/containers/{DEPLOYMENT_CONTAINER}")


def test_a_new_zip_changes_the_package_hash(run: RunFactory, tmp_path: Path) -> None:
    """Rebuilding the function with other content gives a new hash, so Pulumi uploads again."""
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
        res.inputs["roleDefinitionId"].rsplit("/", 1)[-1]: res.inputs["scope"]
        for res in assignments_of(stack, stack.outputs["sweeperPrincipalId"])
    }
    runtime_id = roles[STORAGE_BLOB_DATA_OWNER]
    host_account = app_settings(stack)["AzureWebJobsStorage__accountName"]
    assert runtime_id.endswith(f"/storageAccounts/{host_account}")
    assert runtime_id != stack.outputs["accountId"]
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
