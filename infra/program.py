"""The whole program as one function, so `__main__` and the mock tests build the same thing."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import resources

from infra.access import READER, SWEEPER, UPLOADER, AccessRoles
from infra.config import StackConfig
from infra.monitoring import Monitoring
from infra.package import read_package
from infra.storage import DataAccount
from infra.sweeper_app import SweeperApp

OUTPUT_NAMES = (
    "resourceGroupName",
    "accountName",
    "accountId",
    "blobEndpoint",
    "containerName",
    "uploaderRoleDefinitionId",
    "sweeperRoleDefinitionId",
    "readerRoleDefinitionId",
    "sweeperAppName",
    "sweeperPrincipalId",
)


def provision(config: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Declares every resource and returns the stack outputs (not yet exported)."""
    package = read_package(config.sweeper_package_path)
    group = resources.ResourceGroup("safetynet", location=config.location)
    monitoring = Monitoring("safetynet", resource_group_name=group.name, location=config.location)
    data = DataAccount(
        "safetynet",
        config,
        resource_group_name=group.name,
        workspace_id=monitoring.workspace.id,
    )
    sweeper = SweeperApp(
        "sweeper",
        config,
        package=package,
        resource_group_name=group.name,
        data_blob_endpoint=data.blob_endpoint,
        insights_id=monitoring.insights.id,
        insights_connection_string=monitoring.insights.connection_string,
    )
    access = AccessRoles(
        "access",
        account_id=data.account.id,
        account_name=data.account.name,
        container_id=data.container.id,
        uploader_principal_ids=config.uploader_principal_ids,
        reader_principal_ids=config.reader_principal_ids,
        sweeper_principal_id=sweeper.principal_id,
    )
    outputs: dict[str, pulumi.Output[str]] = {
        "resourceGroupName": group.name,
        "accountName": data.account.name,
        "accountId": data.account.id,
        "blobEndpoint": data.blob_endpoint,
        "containerName": data.container.name,
        "uploaderRoleDefinitionId": access.role_definition_ids[UPLOADER.key],
        "sweeperRoleDefinitionId": access.role_definition_ids[SWEEPER.key],
        "readerRoleDefinitionId": access.role_definition_ids[READER.key],
        "sweeperAppName": sweeper.app.name,
        "sweeperPrincipalId": sweeper.principal_id,
    }
    return outputs
