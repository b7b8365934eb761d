"""This repository's stack: a thin program over `SafetyNetStorage`, so `__main__` and the mock
tests build the same thing.

The stack config (`config.load`) becomes the component's typed args (`storage_args`); the program
adds only what is the stack's own: the resource group, the global names derived from the stack and
subscription, the alert rules and the inventory policy. Stacks deployed before the program was
built over the component upgrade in place (`keep_earlier_urns`).
"""

from __future__ import annotations

from typing import Final

import pulumi
from pulumi_azure_native import authorization, resources

from blob_safetynet.infra.access import READER, SWEEPER, UPLOADER, VERIFIER
from blob_safetynet.infra.alerts import Alerts
from blob_safetynet.infra.component import (
    Assignee,
    BackupOptions,
    CustomerKeyOptions,
    NetworkRules,
    SafetyNetStorage,
    SafetyNetStorageArgs,
    SweeperOptions,
)
from blob_safetynet.infra.config import NAMESPACE, Principal, StackConfig
from blob_safetynet.infra.inventory import Inventory
from blob_safetynet.infra.naming import StackNames, stack_names

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
COMPONENT_NAME: Final = "safetynet"
EARLIER_NAMES: Final = {
    "safetynet:monitoring:Monitoring": "safetynet",
    "safetynet:sweeper:SweeperApp": "sweeper",
    "safetynet:access:Roles": "access",
}
"""The names the component's parts had when the program declared them at the top level; the
data account's part (`safetynet:storage:DataAccount`) kept its name."""


def provision(config: StackConfig) -> dict[str, pulumi.Output[str]]:
    """Declares every resource and returns the stack outputs (not yet exported)."""
    # The identity running `pulumi up` as azure-native sees it: its subscription names the
    # resources, its object id is checked against the identity that publishes the package.
    client = authorization.get_client_config_output()
    stack = pulumi.get_stack()
    names: pulumi.Output[StackNames] = client.subscription_id.apply(
        lambda subscription: stack_names(NAMESPACE, stack, subscription)
    )
    group = resources.ResourceGroup("safetynet", location=config.location)
    storage = SafetyNetStorage(
        COMPONENT_NAME,
        storage_args(
            config, names=names, resource_group_name=group.name, resource_group_id=group.id
        ),
        opts=pulumi.ResourceOptions(
            transformations=[keep_earlier_urns(pulumi.get_stack(), pulumi.get_project())]
        ),
    )
    Alerts(
        "alerts",
        resource_group_name=group.name,
        location=config.location,
        insights_id=storage.insights_id,
        emails=config.alert_emails,
        webhooks=config.alert_webhooks,
        sweep_period=config.sweeper_period,
        verify_period=config.verify_period,
    )
    Inventory(
        "inventory",
        account_name=storage.account_name,
        resource_group_name=group.name,
        data_container_name=storage.container_name,
        reader_role_definition_id=storage.role_definition_ids[READER.key],
        principals=[*config.reader_principals, *config.uploader_principals],
        deleted_with=storage.data_account,
        versioning=config.versioning,
    )
    roles = storage.role_definition_ids
    outputs: dict[str, pulumi.Output[str]] = {
        "resourceGroupName": group.name,
        "accountName": storage.account_name,
        "accountId": storage.account_id,
        "blobEndpoint": storage.blob_endpoint,
        "containerName": storage.container_name,
        "uploaderRoleDefinitionId": roles[UPLOADER.key],
        "sweeperRoleDefinitionId": roles[SWEEPER.key],
        "readerRoleDefinitionId": roles[READER.key],
        "verifierRoleDefinitionId": roles[VERIFIER.key],
        "sweeperAppName": _with_sweeper(storage.sweeper_app_name),
        "sweeperPrincipalId": _with_sweeper(storage.sweeper_principal_id),
        "keyVaultName": _with_sweeper(storage.key_vault_name),
    }
    return outputs


def storage_args(
    config: StackConfig,
    *,
    names: pulumi.Output[StackNames],
    resource_group_name: pulumi.Input[str],
    resource_group_id: pulumi.Input[str],
) -> SafetyNetStorageArgs:
    """The stack config as the component's args: every key but the alerts' (the program's own)."""
    network = config.network
    return SafetyNetStorageArgs(
        account_name=names.apply(lambda n: n.data_account),
        resource_group_name=resource_group_name,
        resource_group_id=resource_group_id,
        location=config.location,
        container_name=config.container_name,
        storage_sku=config.storage_sku,
        blob_soft_delete_days=config.blob_soft_delete_days,
        container_soft_delete_days=config.container_soft_delete_days,
        pending_lifecycle_days=config.pending_expiry_days,
        retired_blob_days=config.retired_blob_days,
        inventory_report_days=config.inventory_report_days,
        versioning=config.versioning,
        version_expiry_days=config.version_expiry_days,
        infrastructure_encryption=config.infrastructure_encryption,
        lock=config.lock,
        log_retention_days=config.log_retention_days,
        point_in_time_restore_days=config.point_in_time_restore_days,
        change_feed=config.change_feed,
        uploaders=_assignees(config.uploader_principals),
        readers=_assignees(config.reader_principals),
        verifiers=_assignees(config.verifier_principals),
        network=NetworkRules(
            default_action=network.default_action,
            allowed_ip_ranges=network.allowed_ip_ranges,
            allowed_subnet_ids=network.allowed_subnet_ids,
            private_endpoint_subnet_id=network.private_endpoint_subnet_id,
            public_network_access=network.public_network_access,
            private_dns_zone_id=network.private_dns_zone_id,
        ),
        sweeper=SweeperOptions(
            package_path=config.sweeper_package_path,
            database_url=config.database_url,
            app_name=names.apply(lambda n: n.function_app),
            runtime_account_name=names.apply(lambda n: n.runtime_account),
            key_vault_name=names.apply(lambda n: n.key_vault),
            subnet_id=network.sweeper_subnet_id,
            cutoff=config.sweeper_cutoff,
            schedule=config.sweeper_schedule,
            verify_schedule=config.verify_schedule,
            database_auth=config.database_auth,
            table=config.sweeper_table.qualified,
            columns=dict(config.sweeper_table.columns),
            lease=config.sweeper_lease,
            deployer_principal_type=config.deployer_principal_type,
        ),
        backup=BackupOptions(
            mode=config.backup.mode,
            operational_days=config.backup.operational_days,
            vaulted_days=config.backup.vaulted_days,
        ),
        customer_key=None
        if config.customer_key is None
        else CustomerKeyOptions(
            key_uri=config.customer_key.key_uri, identity_id=config.customer_key.identity_id
        ),
        defender_for_storage=config.defender_for_storage,
    )


def keep_earlier_urns(stack: str, project: str) -> pulumi.ResourceTransformation:
    """A transformation that gives each resource under the component the URN it had when the
    program declared the component's parts at the top level, as an alias.

    Wrapping resources in a component changes every URN under it, and without an alias
    `pulumi up` deletes and re-creates them (Pulumi, "Refactoring with aliases": wrapping
    resources in a component). Each alias is a whole URN, built by the engine's rule: the
    earlier parents' type chain and name, a child's name keeping its parent's earlier prefix.
    """
    earlier: dict[pulumi.Resource, tuple[str, str, str]] = {}
    """resource -> (earlier type chain, earlier name, name now)."""

    def transform(
        args: pulumi.ResourceTransformationArgs,
    ) -> pulumi.ResourceTransformationResult | None:
        parent = args.opts.parent
        # A resource renamed since (a name alias) had its earlier name under the earlier parents.
        own_names = [
            alias.name
            for alias in args.opts.aliases or []
            if isinstance(alias, pulumi.Alias) and isinstance(alias.name, str)
        ] or [args.name]
        if parent in earlier:
            parent_chain, parent_was, parent_is = earlier[parent]
            chain = f"{parent_chain}${args.type_}"
            names = [
                parent_was + own[len(parent_is) :] if own.startswith(parent_is) else own
                for own in own_names
            ]
        elif isinstance(parent, SafetyNetStorage):
            chain, names = args.type_, [EARLIER_NAMES.get(args.type_, own) for own in own_names]
        else:
            return None
        earlier[args.resource] = (chain, names[0], args.name)
        aliases: list[pulumi.Input[str] | pulumi.Alias] = [
            f"urn:pulumi:{stack}::{project}::{chain}::{was}" for was in names
        ]
        opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(aliases=aliases))
        return pulumi.ResourceTransformationResult(args.props, opts)

    return transform


def _assignees(principals: tuple[Principal, ...]) -> list[Assignee]:
    return [Assignee(p.object_id, p.type) for p in principals]


def _with_sweeper(output: pulumi.Output[str] | None) -> pulumi.Output[str]:
    """An output the component has because the program always gives it a sweeper."""
    if output is None:
        raise TypeError("the stack's SafetyNetStorage was built without its sweeper")
    return output
