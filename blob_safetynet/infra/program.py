"""The whole program as one function, so `__main__` and the mock tests build the same thing."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization, resources

from blob_safetynet.infra.access import READER, SWEEPER, UPLOADER, VERIFIER, AccessRoles
from blob_safetynet.infra.alerts import Alerts
from blob_safetynet.infra.config import NAMESPACE, StackConfig
from blob_safetynet.infra.inventory import Inventory
from blob_safetynet.infra.monitoring import Monitoring
from blob_safetynet.infra.naming import StackNames, stack_names
from blob_safetynet.infra.package import read_package
from blob_safetynet.infra.storage import DataAccount
from blob_safetynet.infra.sweeper_app import SweeperApp

OUTPUT_NAMES = (
    "resourceGroupName",
    "accountName",
    "accountId",
    "blobEndpoint",
    "containerName",
    "uploaderRoleDefinitionId",
    "sweeperRoleDefinitionId",
    "readerRoleDefinitionId",
    "verifierRoleDefinitionId",
    "sweeperAppName",
    "sweeperPrincipalId",
    "keyVaultName",
)


def provision(config: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Declares every resource and returns the stack outputs (not yet exported)."""
    package = read_package(config.sweeper_package_path)
    # The identity running `pulumi up` as azure-native sees it: its subscription names the
    # resources, its object id is checked against the identity that publishes the package.
    client = authorization.get_client_config_output()
    stack = pulumi.get_stack()
    names: pulumi.Output[StackNames] = client.subscription_id.apply(
        lambda subscription: stack_names(NAMESPACE, stack, subscription)
    )
    group = resources.ResourceGroup("safetynet", location=config.location)
    monitoring = Monitoring("safetynet", resource_group_name=group.name, location=config.location)
    data = DataAccount(
        "safetynet",
        config,
        account_name=names.apply(lambda n: n.data_account),
        resource_group_name=group.name,
        workspace_id=monitoring.workspace.id,
    )
    sweeper = SweeperApp(
        "sweeper",
        config,
        package=package,
        resource_group_name=group.name,
        runtime_account_name=names.apply(lambda n: n.runtime_account),
        key_vault_name=names.apply(lambda n: n.key_vault),
        app_name=names.apply(lambda n: n.function_app),
        subscription_id=client.subscription_id,
        tenant_id=client.tenant_id,
        deployer_object_id=client.object_id,
        data_blob_endpoint=data.blob_endpoint,
        data_account_id=data.account.id,
        resource_group_id=group.id,
        insights_id=monitoring.insights.id,
        insights_connection_string=monitoring.insights.connection_string,
    )
    access = AccessRoles(
        "access",
        resource_group_id=group.id,
        subscription_id=client.subscription_id,
        account_name=data.account.name,
        container_id=data.container.id,
        uploader_principals=config.uploader_principals,
        reader_principals=config.reader_principals,
        verifier_principals=config.verifier_principals,
        sweeper_principal_id=sweeper.principal_id,
        verifier_app_principal_id=sweeper.verifier_principal_id,
    )
    Alerts(
        "alerts",
        resource_group_name=group.name,
        location=config.location,
        insights_id=monitoring.insights.id,
        emails=config.alert_emails,
        webhooks=config.alert_webhooks,
        sweep_period=config.sweeper_period,
        verify_period=config.verify_period,
    )
    Inventory(
        "inventory",
        account_name=data.account.name,
        resource_group_name=group.name,
        data_container_name=data.container.name,
        reader_role_definition_id=access.role_definition_ids[READER.key],
        principals=[*config.reader_principals, *config.uploader_principals],
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
        "verifierRoleDefinitionId": access.role_definition_ids[VERIFIER.key],
        "sweeperAppName": sweeper.app.name,
        "sweeperPrincipalId": sweeper.principal_id,
        "keyVaultName": sweeper.vault.name,
    }
    return outputs
