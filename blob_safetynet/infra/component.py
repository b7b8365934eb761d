"""`SafetyNetStorage`: a storage account with its safety nets, for a team's own Pulumi program.

    from blob_safetynet.infra.component import Assignee, SafetyNetStorage, SafetyNetStorageArgs

    storage = SafetyNetStorage("documents", SafetyNetStorageArgs(
        account_name="stdocsprod01",
        resource_group_name=group.name,
        location="westeurope",
        uploaders=[Assignee("<object id>", "ServicePrincipal")],
    ))
    pulumi.export("blobEndpoint", storage.blob_endpoint)

Every default is the hardened choice (docs/infra.md, Use the component in your own program):
Entra ID only (no shared keys), HTTPS and TLS 1.2, no anonymous access, blob and container soft
delete, the pending-blob lifecycle backstop, network default Deny, blob audit logs to a Log
Analytics workspace of its own. Validation is the stack config's (`config.parse`), so the
component refuses what the repository's own stack refuses, at construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
from pulumi_azure_native import authorization

from blob_safetynet.infra.access import AccessRoles
from blob_safetynet.infra.config import DATABASE_URL_KEY, DEFAULTS, StackConfig, parse
from blob_safetynet.infra.monitoring import Monitoring
from blob_safetynet.infra.package import read_package
from blob_safetynet.infra.storage import DataAccount
from blob_safetynet.infra.sweeper_app import SweeperApp

COMPONENT_TYPE = "blob-safetynet:index:SafetyNetStorage"


@dataclass(frozen=True)
class Assignee:
    """Who gets a role: an Entra object id and its principal type (User, Group or
    ServicePrincipal; a managed identity is a ServicePrincipal). The type is required: ARM refuses
    one that does not match Entra, and azure-native would otherwise send User."""

    principal_id: str
    principal_type: str


@dataclass(frozen=True)
class NetworkRules:
    """Opt-in network rules; without them the account's firewall still defaults to Deny."""

    default_action: str = "Deny"
    allowed_ip_ranges: Sequence[str] = ()
    allowed_subnet_ids: Sequence[str] = ()
    private_endpoint_subnet_id: str | None = None
    public_network_access: str = "Enabled"


@dataclass(frozen=True)
class SweeperOptions:
    """The optional sweeper Function app: its zip, its database, and its global names."""

    package_path: Path
    database_url: str = field(repr=False)
    app_name: str
    runtime_account_name: str
    key_vault_name: str
    subnet_id: str | None = None
    """The subnet the app joins; required behind the default firewall (Deny)."""
    cutoff: str = str(DEFAULTS["sweeperCutoff"])
    schedule: str = str(DEFAULTS["sweeperSchedule"])


@dataclass(frozen=True)
class SafetyNetStorageArgs:
    """Inputs of `SafetyNetStorage`. Required: the account's global name, its resource group and
    location; everything else has the hardened default."""

    account_name: pulumi.Input[str]
    resource_group_name: pulumi.Input[str]
    location: str
    resource_group_id: pulumi.Input[str] | None = None
    """Scope of the custom roles; defaults to the resource group the account is in."""
    container_name: str = str(DEFAULTS["containerName"])
    blob_soft_delete_days: int = int(str(DEFAULTS["blobSoftDeleteDays"]))
    container_soft_delete_days: int = int(str(DEFAULTS["containerSoftDeleteDays"]))
    pending_lifecycle_days: int = int(str(DEFAULTS["pendingExpiryDays"]))
    uploaders: Sequence[Assignee] = ()
    readers: Sequence[Assignee] = ()
    verifiers: Sequence[Assignee] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    network: NetworkRules = field(default_factory=NetworkRules)
    sweeper: SweeperOptions | None = None


def stack_config(args: SafetyNetStorageArgs) -> StackConfig:
    """The args as the stack config the parts are built from, validated by `config.parse`."""
    raw: dict[str, object] = {
        "location": args.location,
        "containerName": args.container_name,
        "blobSoftDeleteDays": args.blob_soft_delete_days,
        "containerSoftDeleteDays": args.container_soft_delete_days,
        "pendingExpiryDays": args.pending_lifecycle_days,
        "uploaderPrincipalIds": _principals(args.uploaders),
        "readerPrincipalIds": _principals(args.readers),
        "verifierPrincipalIds": _principals(args.verifiers),
        "networkDefaultAction": args.network.default_action,
        "publicNetworkAccess": args.network.public_network_access,
        "allowedIpRanges": list(args.network.allowed_ip_ranges),
        "allowedSubnetIds": list(args.network.allowed_subnet_ids),
        "privateEndpointSubnetId": args.network.private_endpoint_subnet_id or "",
    }
    if args.sweeper is not None:
        raw |= {
            DATABASE_URL_KEY: args.sweeper.database_url,
            "sweeperPackagePath": str(args.sweeper.package_path),
            "sweeperCutoff": args.sweeper.cutoff,
            "sweeperSchedule": args.sweeper.schedule,
            "sweeperSubnetId": args.sweeper.subnet_id or "",
        }
    return parse(raw, with_sweeper=args.sweeper is not None)


TRACKED_TYPES = frozenset(
    {
        "azure-native:storage:StorageAccount",
        "azure-native:operationalinsights:Workspace",
        "azure-native:applicationinsights:Component",
        "azure-native:web:WebApp",
        "azure-native:web:AppServicePlan",
        "azure-native:keyvault:Vault",
        "azure-native:network:PrivateEndpoint",
    }
)
"""The ARM tracked resources the component creates: the ones that take `tags`."""


def tag_tracked_resources(tags: Mapping[str, str]) -> pulumi.ResourceTransformation:
    """A transformation (applied in the program, so under mocks too) that merges `tags` into
    each tracked resource the component creates."""

    def transform(
        args: pulumi.ResourceTransformationArgs,
    ) -> pulumi.ResourceTransformationResult | None:
        if args.type_ not in TRACKED_TYPES:
            return None
        own = args.props.get("tags")
        props = {**args.props, "tags": {**tags, **own} if isinstance(own, dict) else dict(tags)}
        return pulumi.ResourceTransformationResult(props, args.opts)

    return transform


def _principals(assignees: Sequence[Assignee]) -> list[dict[str, str]]:
    return [{"id": a.principal_id, "type": a.principal_type} for a in assignees]


class SafetyNetStorage(pulumi.ComponentResource):
    """A hardened storage account for the pending-upload protocol, its roles (tag write scoped by
    ABAC conditions), its audit logs, and optionally the sweeper app; children `parent=self`."""

    account_name: pulumi.Output[str]
    account_id: pulumi.Output[str]
    blob_endpoint: pulumi.Output[str]
    container_name: pulumi.Output[str]
    role_definition_ids: Mapping[str, pulumi.Output[str]]
    sweeper_principal_id: pulumi.Output[str] | None

    def __init__(
        self, name: str, args: SafetyNetStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        config = stack_config(args)
        tagging = [tag_tracked_resources(args.tags)] if args.tags else []
        super().__init__(
            COMPONENT_TYPE,
            name,
            None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=tagging)),
        )
        child = pulumi.ResourceOptions(parent=self)
        monitoring = Monitoring(
            f"{name}-monitoring",
            resource_group_name=args.resource_group_name,
            location=config.location,
            opts=child,
        )
        data = DataAccount(
            name,
            config,
            account_name=args.account_name,
            resource_group_name=args.resource_group_name,
            workspace_id=monitoring.workspace.id,
            opts=child,
        )
        client = authorization.get_client_config_output(
            opts=pulumi.InvokeOutputOptions(parent=self)
        )
        group_id = args.resource_group_id or pulumi.Output.concat(
            "/subscriptions/", client.subscription_id, "/resourceGroups/", args.resource_group_name
        )
        sweeper = (
            None
            if args.sweeper is None
            else self._sweeper(
                f"{name}-sweeper",
                args.sweeper,
                args.resource_group_name,
                config,
                data,
                monitoring,
                client,
                group_id,
            )
        )
        self.sweeper_principal_id = None if sweeper is None else sweeper.principal_id
        access = AccessRoles(
            f"{name}-access",
            resource_group_id=group_id,
            subscription_id=client.subscription_id,
            account_name=data.account.name,
            container_id=data.container.id,
            uploader_principals=config.uploader_principals,
            reader_principals=config.reader_principals,
            verifier_principals=config.verifier_principals,
            sweeper_principal_id=self.sweeper_principal_id,
            verifier_app_principal_id=None if sweeper is None else sweeper.verifier_principal_id,
            opts=child,
        )
        self.account_name = data.account.name
        self.account_id = data.account.id
        self.blob_endpoint = data.blob_endpoint
        self.container_name = data.container.name
        self.role_definition_ids = access.role_definition_ids
        self.register_outputs(
            {
                "accountName": self.account_name,
                "accountId": self.account_id,
                "blobEndpoint": self.blob_endpoint,
                "containerName": self.container_name,
                **{f"{key}RoleDefinitionId": v for key, v in self.role_definition_ids.items()},
            }
        )

    def _sweeper(
        self,
        name: str,
        options: SweeperOptions,
        resource_group_name: pulumi.Input[str],
        config: StackConfig,
        data: DataAccount,
        monitoring: Monitoring,
        client: pulumi.Output[authorization.GetClientConfigResult],
        group_id: pulumi.Input[str],
    ) -> SweeperApp:
        return SweeperApp(
            name,
            config,
            package=read_package(config.sweeper_package_path),
            resource_group_name=resource_group_name,
            runtime_account_name=options.runtime_account_name,
            key_vault_name=options.key_vault_name,
            app_name=options.app_name,
            subscription_id=client.subscription_id,
            tenant_id=client.tenant_id,
            deployer_object_id=client.object_id,
            data_blob_endpoint=data.blob_endpoint,
            data_account_id=data.account.id,
            resource_group_id=group_id,
            insights_id=monitoring.insights.id,
            insights_connection_string=monitoring.insights.connection_string,
            opts=pulumi.ResourceOptions(parent=self),
        )
