"""`SafetyNetStorage`: a storage account with its safety nets, for a team's own Pulumi program.

    from blob_safetynet.infra.component import Assignee, SafetyNetStorage, SafetyNetStorageArgs

    storage = SafetyNetStorage("documents", SafetyNetStorageArgs(
        account_name="stdocsprod01",
        resource_group_name=group.name,
        location="westeurope",
        uploaders=[Assignee("<object id>", "ServicePrincipal")],
    ))
    pulumi.export("blobEndpoint", storage.blob_endpoint)

Every default is the hardened choice (docs/deployment.md, Use the component in your own program):
Entra ID only (no shared keys), HTTPS and TLS 1.2, no anonymous access, blob and container soft
delete, the pending-blob lifecycle backstop, network default Deny, blob read/write/delete logs
of both accounts to a Log Analytics workspace of its own, and a CanNotDelete Resource Manager
lock on the account (its deployer's right to create it checked at preview). Validation is the
stack config's (`config.parse`), so the component refuses what the repository's own stack
refuses, at construction. The nets that need something only the deployer has, or cost money,
are opt-in: `backup` (Azure Backup, blob_safetynet/infra/protection.py), `customer_key` and
`defender_for_storage`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
from pulumi_azure_native import authorization, storage

from blob_safetynet.infra.access import AccessRoles
from blob_safetynet.infra.config import (
    DATABASE_AUTH_KEY,
    DATABASE_URL_KEY,
    DEFAULTS,
    StackConfig,
    parse,
)
from blob_safetynet.infra.lock import checked_notes, delete_lock
from blob_safetynet.infra.monitoring import Monitoring
from blob_safetynet.infra.package import PackageFile, read_package
from blob_safetynet.infra.preflight import LockPreflight
from blob_safetynet.infra.storage import DataAccount
from blob_safetynet.infra.subnets import check_subnets, subnet_needs
from blob_safetynet.infra.sweeper_app import SweeperApp
from blob_safetynet.settings import appsettings

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
    private_dns_zone_id: str | None = None
    """An existing privatelink.blob zone (a hub's, any subscription) for the endpoint's record;
    None creates the zone and its virtual network links in the resource group."""


@dataclass(frozen=True)
class BackupOptions:
    """Azure Backup of the account's blobs: `none`, `operational` (continuous, kept in the
    account) or `vaulted` (operational plus a daily copy of the container to a Backup vault)."""

    mode: str = str(DEFAULTS["backup"])
    operational_days: int = int(str(DEFAULTS["backupOperationalDays"]))
    vaulted_days: int = int(str(DEFAULTS["backupVaultedDays"]))


@dataclass(frozen=True)
class CustomerKeyOptions:
    """A customer-managed key: its Key Vault URI without a version (the account follows its
    rotations) and a user-assigned identity, holding a role to use the key, that reads it."""

    key_uri: str
    identity_id: str


@dataclass(frozen=True)
class SweeperOptions:
    """The optional sweeper Function app: its zip, its database, and its global names."""

    package_path: Path
    database_url: str = field(repr=False)
    app_name: pulumi.Input[str]
    runtime_account_name: pulumi.Input[str]
    key_vault_name: pulumi.Input[str]
    subnet_id: str | None = None
    """The subnet the app joins; required behind the default firewall (Deny)."""
    cutoff: str = str(DEFAULTS["sweeperCutoff"])
    schedule: str = str(DEFAULTS["sweeperSchedule"])
    verify_schedule: str = str(DEFAULTS["verifySchedule"])
    """When the app's second timer verifies the account's nets, as its own identity."""
    database_auth: str = appsettings.DB_AUTH_PASSWORD
    """`password` (the URL carries it) or `entra` (the app's identity gets a token)."""
    table: str = str(DEFAULTS["sweeperTable"])
    """The documents table, `name` or `schema.name`."""
    columns: Mapping[str, str] = field(default_factory=dict)
    """Columns named otherwise than their key, e.g. `{"id": "file_id"}`."""
    lease: bool = False
    """Hold the sweeper lease, so sweepers outside this app never overlap it."""
    deployer_principal_type: str = "User"
    """The kind of identity running `pulumi up` (User or ServicePrincipal): it gets Key Vault
    Secrets Officer on the app's vault to write the database URL."""


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
    storage_sku: str = str(DEFAULTS["storageSku"])
    blob_soft_delete_days: int = int(str(DEFAULTS["blobSoftDeleteDays"]))
    container_soft_delete_days: int = int(str(DEFAULTS["containerSoftDeleteDays"]))
    pending_lifecycle_days: int = int(str(DEFAULTS["pendingExpiryDays"]))
    retired_blob_days: int = int(str(DEFAULTS["retiredBlobDays"]))
    """Blobs tagged `state=retired` are deleted this many days after they were last read."""
    inventory_report_days: int = int(str(DEFAULTS["inventoryReportDays"]))
    """Blob Inventory reports (container `inventory`, reserved for them) are deleted this many
    days after they were written."""
    versioning: bool = False
    version_expiry_days: int = int(str(DEFAULTS["versionExpiryDays"]))
    infrastructure_encryption: bool = True
    """A second layer of encryption; false only for accounts created without it."""
    uploaders: Sequence[Assignee] = ()
    readers: Sequence[Assignee] = ()
    verifiers: Sequence[Assignee] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    network: NetworkRules = field(default_factory=NetworkRules)
    sweeper: SweeperOptions | None = None
    lock: str = str(DEFAULTS["lock"])
    """`CanNotDelete`: a Resource Manager delete lock on the account; `none`: no lock."""
    lock_preflight: LockPreflight = field(default_factory=LockPreflight)
    """Where the preview reads the deployer's right to create the lock (Resource Manager's
    endpoint; another cloud's for a sovereign cloud)."""
    log_retention_days: int = int(str(DEFAULTS["logRetentionDays"]))
    """How long the workspace keeps the blob resource logs and the sweeper's telemetry."""
    point_in_time_restore_days: int = int(str(DEFAULTS["pointInTimeRestoreDays"]))
    """0: off; otherwise below the blob soft-delete days, with versioning and change feed on."""
    change_feed: bool = bool(DEFAULTS["changeFeed"])
    backup: BackupOptions = field(default_factory=BackupOptions)
    customer_key: CustomerKeyOptions | None = None
    """None: Microsoft-managed keys."""
    defender_for_storage: bool = False
    """Microsoft Defender for Storage on the account (billed per account); off by default, as a
    subscription-wide plan is often a security team's to run."""


def stack_config(args: SafetyNetStorageArgs) -> StackConfig:
    """The args as the stack config the parts are built from, validated by `config.parse`."""
    raw: dict[str, object] = {
        "location": args.location,
        "storageSku": args.storage_sku,
        "containerName": args.container_name,
        "blobSoftDeleteDays": args.blob_soft_delete_days,
        "containerSoftDeleteDays": args.container_soft_delete_days,
        "pendingExpiryDays": args.pending_lifecycle_days,
        "retiredBlobDays": args.retired_blob_days,
        "inventoryReportDays": args.inventory_report_days,
        "versioning": args.versioning,
        "versionExpiryDays": args.version_expiry_days,
        "infrastructureEncryption": args.infrastructure_encryption,
        "uploaderPrincipalIds": _principals(args.uploaders),
        "readerPrincipalIds": _principals(args.readers),
        "verifierPrincipalIds": _principals(args.verifiers),
        "networkDefaultAction": args.network.default_action,
        "publicNetworkAccess": args.network.public_network_access,
        "allowedIpRanges": list(args.network.allowed_ip_ranges),
        "allowedSubnetIds": list(args.network.allowed_subnet_ids),
        "privateEndpointSubnetId": args.network.private_endpoint_subnet_id or "",
        "privateDnsZoneId": args.network.private_dns_zone_id or "",
        "lock": args.lock,
        "logRetentionDays": args.log_retention_days,
        "pointInTimeRestoreDays": args.point_in_time_restore_days,
        "changeFeed": args.change_feed,
        "backup": args.backup.mode,
        "backupOperationalDays": args.backup.operational_days,
        "backupVaultedDays": args.backup.vaulted_days,
        "encryptionKeyUri": "" if args.customer_key is None else args.customer_key.key_uri,
        "encryptionIdentityId": "" if args.customer_key is None else args.customer_key.identity_id,
        "defenderForStorage": args.defender_for_storage,
    }
    if args.sweeper is not None:
        raw |= {
            DATABASE_URL_KEY: args.sweeper.database_url,
            "sweeperPackagePath": str(args.sweeper.package_path),
            "sweeperCutoff": args.sweeper.cutoff,
            "sweeperSchedule": args.sweeper.schedule,
            "sweeperSubnetId": args.sweeper.subnet_id or "",
            "verifySchedule": args.sweeper.verify_schedule,
            DATABASE_AUTH_KEY: args.sweeper.database_auth,
            "sweeperTable": args.sweeper.table,
            "sweeperColumns": dict(args.sweeper.columns),
            "sweeperLease": args.sweeper.lease,
            "deployerPrincipalType": args.sweeper.deployer_principal_type,
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
        "azure-native:dataprotection:BackupVault",
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
    workspace_id: pulumi.Output[str]
    """The Log Analytics workspace the blob audit logs go to."""
    insights_id: pulumi.Output[str]
    """The Application Insights component the sweeper reports to (for alert rules)."""
    sweeper_app_name: pulumi.Output[str] | None
    sweeper_principal_id: pulumi.Output[str] | None
    verifier_principal_id: pulumi.Output[str] | None
    key_vault_name: pulumi.Output[str] | None
    lock: authorization.ManagementLockByScope | None
    """The account's delete lock (None with `lock="none"`)."""
    data_account: storage.StorageAccount

    def __init__(
        self, name: str, args: SafetyNetStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        config = stack_config(args)
        # Read before anything is declared: the engine creates resources as they are registered,
        # so a missing zip found later would leave a half-created stack.
        package = None if args.sweeper is None else read_package(config.sweeper_package_path)
        tagging = [tag_tracked_resources(args.tags)] if args.tags else []
        super().__init__(
            COMPONENT_TYPE,
            name,
            None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=tagging)),
        )
        # The subnets the network team made, read before anything joins or allows them.
        check_subnets(subnet_needs(config, with_sweeper=args.sweeper is not None), parent=self)
        child = pulumi.ResourceOptions(parent=self)
        monitoring = Monitoring(
            f"{name}-monitoring",
            resource_group_name=args.resource_group_name,
            location=config.location,
            retention_days=config.log_retention_days,
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
            if args.sweeper is None or package is None
            else self._sweeper(
                f"{name}-sweeper",
                args.sweeper,
                package,
                args.resource_group_name,
                config,
                data,
                monitoring,
                client,
                group_id,
            )
        )
        self.sweeper_app_name = None if sweeper is None else sweeper.app.name
        self.sweeper_principal_id = None if sweeper is None else sweeper.principal_id
        self.verifier_principal_id = None if sweeper is None else sweeper.verifier_principal_id
        self.key_vault_name = None if sweeper is None else sweeper.vault.name
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
            verifier_app_principal_id=self.verifier_principal_id,
            opts=child,
        )
        self.lock = (
            None
            if not config.locked
            else delete_lock(
                f"{name}-lock",
                account_id=data.account.id,
                notes=checked_notes(
                    args.lock_preflight,
                    subscription_id=client.subscription_id,
                    resource_group_name=args.resource_group_name,
                    parent=self,
                ),
                # The role assignments on the container are under the account too.
                guarded=[*data.guarded, access],
                parent=self,
            )
        )
        self.account_name = data.account.name
        self.data_account = data.account
        """The account resource itself, for `deleted_with` on resources a program adds under it
        (a lock on the account refuses their delete; deleted with it, they need none)."""
        self.account_id = data.account.id
        self.blob_endpoint = data.blob_endpoint
        self.container_name = data.container.name
        self.role_definition_ids = access.role_definition_ids
        self.workspace_id = monitoring.workspace.id
        self.insights_id = monitoring.insights.id
        sweeper_outputs = {
            "sweeperAppName": self.sweeper_app_name,
            "sweeperPrincipalId": self.sweeper_principal_id,
            "verifierPrincipalId": self.verifier_principal_id,
            "keyVaultName": self.key_vault_name,
        }
        self.register_outputs(
            {
                "accountName": self.account_name,
                "accountId": self.account_id,
                "blobEndpoint": self.blob_endpoint,
                "containerName": self.container_name,
                "workspaceId": self.workspace_id,
                "insightsId": self.insights_id,
                **{f"{key}RoleDefinitionId": v for key, v in self.role_definition_ids.items()},
                **{key: value for key, value in sweeper_outputs.items() if value is not None},
            }
        )

    def _sweeper(
        self,
        name: str,
        options: SweeperOptions,
        package: PackageFile,
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
            package=package,
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
            private_dns_zone_id=None
            if data.private_endpoint is None
            else data.private_endpoint.zone_id,
            workspace_id=monitoring.workspace.id,
            opts=pulumi.ResourceOptions(parent=self),
        )
