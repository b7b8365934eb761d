"""The sweeper deployed: a Flex Consumption function app that holds no keys.

Built the way Microsoft's Flex Consumption samples build it
(Azure-Samples/azure-functions-flex-consumption-samples, starters/http/*/infra: main.bicep,
app/processor.bicep, core/host/functions-flexconsumption.bicep): a user-assigned identity that
holds its host-storage role *before* the site exists, a site with `functionAppConfig` and no
`siteConfig`, and the app settings as a separate `config/appsettings` resource.

No `siteConfig` is sent at all: Flex Consumption refuses classic site configuration with ARM 400
(extended code 51021, "The following site configuration property (Site.SiteConfig.
NetFrameworkVersion) for Flex Consumption sites is invalid"), and azure-native's `SiteConfigArgs`
adds `netFrameworkVersion: v4.6` as soon as any site config is passed (pulumi/pulumi-azure-native
issues 4168 and 3074; the Terraform AVM web-site module strips such properties for FC1,
Azure/terraform-azurerm-avm-res-web-site issue 283). `ftpsState` is moot on Flex (Linux only;
FTPS deployment is Windows-only per "Deployment technologies in Azure Functions") and basic-auth
publishing is switched off below; new sites default to TLS 1.2.

The host storage and the deployment package live in a runtime account of their own, without
shared keys. The host's broad rights there (Storage Blob Data Owner, as Azure Functions documents
for identity-based `AzureWebJobsStorage`) never touch documents: on the data account the same
identity holds only the sweeper role. The database URL reaches the app as a Key Vault reference
to a secret in a vault this component provisions (RBAC-only, soft delete, purge protection).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pulumi
from pulumi_azure_native import authorization, keyvault, managedidentity, storage, web

from blob_safetynet.infra.config import StackConfig
from blob_safetynet.infra.network import BlobPrivateEndpoint
from blob_safetynet.infra.package import FunctionPackage, PackageFile
from blob_safetynet.infra.storage import (
    blob_resource_logs,
    blob_soft_delete,
    container_soft_delete,
    hardened_account,
    network_rules,
)
from blob_safetynet.settings import appsettings

PYTHON_VERSION: Final = "3.11"
DEPLOYMENT_CONTAINER: Final = "deployments"
INSTANCE_MEMORY_MB: Final = 2048
MAXIMUM_INSTANCE_COUNT: Final = 40
DATABASE_URL_SECRET: Final = "sweeper-database-url"  # noqa: S105 (a secret's name)
KEY_VAULT_RETENTION_DAYS: Final = 90
"""Soft-delete retention of the vault (7-90 days; 90 is Azure's default)."""

_BUILTIN: Final = "/providers/Microsoft.Authorization/roleDefinitions/"
STORAGE_BLOB_DATA_OWNER: Final = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
MONITORING_METRICS_PUBLISHER: Final = "3913510d-42f4-4e42-8a64-420c390055eb"
READER: Final = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
"""Built-in Reader, on the stack's resource group: the verification timer's settings audit reads
the data account through ARM (properties, blob service, management policy, role assignments).
Control plane only, and not on the account itself, where only the project's custom data roles
are assigned."""
KEY_VAULT_SECRETS_USER: Final = "4633458b-17de-408a-b874-0445c86b69e6"
KEY_VAULT_SECRETS_OFFICER: Final = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"

FC1_REFUSED_SITE_CONFIG: Final = (
    "netFrameworkVersion",
    "ftpsState",
    "linuxFxVersion",
    "alwaysOn",
    "use32BitWorkerProcess",
    "javaVersion",
    "powerShellVersion",
)
"""Site config Flex Consumption answers with 51021 (issue 4168, AVM issue 283); none is sent."""
FC1_REFUSED_APP_SETTINGS: Final = (
    "WEBSITE_RUN_FROM_PACKAGE",
    "FUNCTIONS_WORKER_RUNTIME",
    "WEBSITE_CONTENTSHARE",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
    "WEBSITE_NODE_DEFAULT_VERSION",
    "FUNCTIONS_WORKER_PROCESS_COUNT",
)
"""App settings "Flex Consumption plan deprecations" (functions-app-settings) says not to set."""


def builtin_role(subscription_id: str, role_guid: str) -> str:
    return f"/subscriptions/{subscription_id}{_BUILTIN}{role_guid}"


def vault_network_rules(config: StackConfig) -> keyvault.NetworkRuleSetArgs | None:
    """The vault's firewall behind a closed data account: Deny, but the sweeper's subnet (which
    resolves the Key Vault reference: "Access network-restricted vaults",
    https://learn.microsoft.com/azure/app-service/app-service-key-vault-references), the
    allowed public ranges (the deployer deletes or replaces the secret through the vault's data
    plane) and trusted Azure services ("Configure Azure Key Vault networking settings",
    https://learn.microsoft.com/azure/key-vault/general/how-to-azure-key-vault-network-security).
    An open data account (networkDefaultAction Allow) leaves the vault open too."""
    network_config = config.network
    if not network_config.closed:
        return None
    subnet = network_config.sweeper_subnet_id
    return keyvault.NetworkRuleSetArgs(
        default_action=keyvault.NetworkRuleAction.DENY,
        bypass=keyvault.NetworkRuleBypassOptions.AZURE_SERVICES,
        ip_rules=[keyvault.IPRuleArgs(value=r) for r in network_config.allowed_ip_ranges],
        virtual_network_rules=[]
        if subnet is None
        else [keyvault.VirtualNetworkRuleArgs(id=subnet)],
    )


def key_vault_reference(secret_uri: str) -> str:
    """The app-setting value the platform resolves with the app's Key Vault reference identity."""
    return f"@Microsoft.KeyVault(SecretUri={secret_uri})"


class SweeperApp(pulumi.ComponentResource):
    """Identity, plan, app, runtime account, vault, package and the platform's role grants."""

    app: web.WebApp
    principal_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        package: PackageFile,
        resource_group_name: pulumi.Input[str],
        runtime_account_name: pulumi.Input[str],
        key_vault_name: pulumi.Input[str],
        app_name: pulumi.Input[str],
        subscription_id: pulumi.Input[str],
        tenant_id: pulumi.Input[str],
        deployer_object_id: pulumi.Input[str],
        data_blob_endpoint: pulumi.Input[str],
        data_account_id: pulumi.Input[str],
        resource_group_id: pulumi.Input[str],
        insights_id: pulumi.Input[str],
        insights_connection_string: pulumi.Input[str],
        private_dns_zone_id: pulumi.Input[str] | None = None,
        workspace_id: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`private_dns_zone_id`: the blob zone the data account's endpoint registers in, for
        the runtime account's own endpoint when the data account is private. `workspace_id`:
        the Log Analytics workspace the runtime account's blob resource logs go to."""
        super().__init__("safetynet:sweeper:SweeperApp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        subnet = config.network.sweeper_subnet_id

        def identity(label: str) -> managedidentity.UserAssignedIdentity:
            return managedidentity.UserAssignedIdentity(
                f"{name}-{label}",
                resource_group_name=resource_group_name,
                location=config.location,
                opts=child,
            )

        self.identity = identity("identity")
        self.principal_id = self.identity.principal_id
        # Continuous verification acts as its own identity: the verifier role (assigned by
        # blob_safetynet/infra/access.py with its ABAC condition) writes only under .safetynet/verify/, which
        # the sweeper's role may not; the sweeper's identity never gets the probes' rights.
        self.verifier_identity = identity("verifier-identity")
        self.verifier_principal_id = self.verifier_identity.principal_id

        def grant(
            label: str,
            role_guid: str,
            scope: pulumi.Input[str],
            principal: tuple[pulumi.Input[str], authorization.PrincipalType] = (
                self.principal_id,
                # A new identity may not have replicated yet; naming its type avoids the
                # directory lookup that would fail.
                authorization.PrincipalType.SERVICE_PRINCIPAL,
            ),
        ) -> pulumi.Resource:
            return authorization.RoleAssignment(
                f"{name}-{label}",
                principal_id=principal[0],
                principal_type=principal[1],
                role_definition_id=pulumi.Output.from_input(subscription_id).apply(
                    lambda sub: builtin_role(sub, role_guid)
                ),
                scope=scope,
                opts=child,
            )

        # A private data account gets a private runtime account, as Microsoft's Flex
        # Consumption VNet sample has it (Azure-Samples/azure-functions-flex-consumption-samples,
        # infra/app/storage-PrivateEndpoint.bicep, core/storage/storage-account.bicep:
        # publicNetworkAccess Disabled, networkAcls Deny with bypass None, a blob private
        # endpoint): host storage and the package are reached through the app's subnet only.
        private = config.network.public_network_access == "Disabled"
        endpoint_subnet = config.network.private_endpoint_subnet_id
        self.runtime_account = hardened_account(
            f"{name}-runtime",
            account_name=runtime_account_name,
            resource_group_name=resource_group_name,
            location=config.location,
            sku=storage.SkuName.STANDARD_LRS,
            # Host storage and the package serve only the app: no application ranges here.
            network=network_rules("Deny", (), (), storage.Bypass.NONE)
            if private
            else network_rules(
                config.network.default_action,
                (),
                () if subnet is None else (subnet,),
            ),
            public_network_access="Disabled" if private else "Enabled",
            infrastructure_encryption=config.infrastructure_encryption,
            opts=child,
        )
        self.runtime_endpoint = (
            BlobPrivateEndpoint(
                f"{name}-runtime-blob",
                config,
                subnet_id=endpoint_subnet,
                account_id=self.runtime_account.id,
                resource_group_name=resource_group_name,
                zone_id=private_dns_zone_id,
                opts=child,
            )
            if private and endpoint_subnet is not None
            else None
        )
        # Timer locks and the deployment package get the same undo window as the documents.
        runtime_blob_service = storage.BlobServiceProperties(
            f"{name}-runtime-blob-service",
            blob_services_name="default",
            account_name=self.runtime_account.name,
            resource_group_name=resource_group_name,
            delete_retention_policy=blob_soft_delete(config),
            container_delete_retention_policy=container_soft_delete(config),
            opts=child,
        )
        storage.BlobContainer(
            f"{name}-deployments",
            container_name=DEPLOYMENT_CONTAINER,
            account_name=self.runtime_account.name,
            resource_group_name=resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=child,
        )
        if workspace_id is not None:
            # Who replaced the deployment package or deleted a timer lock, as for the documents.
            blob_resource_logs(
                f"{name}-runtime-blob-audit",
                self.runtime_account,
                workspace_id,
                pulumi.ResourceOptions(parent=self, depends_on=[runtime_blob_service]),
            )
        blob_endpoint = self.runtime_account.primary_endpoints.apply(lambda ends: ends.blob)
        container_url = pulumi.Output.concat(blob_endpoint, DEPLOYMENT_CONTAINER)

        # Timer locks and the deployment package are blobs. A timer-only app uses no queue or
        # table in host storage (no blob trigger, no Durable Functions), so it gets neither of
        # the optional queue/table roles the samples' rbac.bicep can add (enableQueue/enableTable
        # default to false there).
        host_storage = grant("host-storage", STORAGE_BLOB_DATA_OWNER, self.runtime_account.id)
        publisher = grant("insights-publisher", MONITORING_METRICS_PUBLISHER, insights_id)
        auditor = grant(
            "verifier-reader",
            READER,
            resource_group_id,
            (self.verifier_principal_id, authorization.PrincipalType.SERVICE_PRINCIPAL),
        )

        self.vault = keyvault.Vault(
            f"{name}-vault",
            vault_name=key_vault_name,
            resource_group_name=resource_group_name,
            location=config.location,
            properties=keyvault.VaultPropertiesArgs(
                tenant_id=tenant_id,
                sku=keyvault.SkuArgs(family=keyvault.SkuFamily.A, name=keyvault.SkuName.STANDARD),
                # Data access by Azure RBAC only: no access policies that bypass role grants.
                enable_rbac_authorization=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=KEY_VAULT_RETENTION_DAYS,
                enable_purge_protection=True,
                network_acls=vault_network_rules(config),
            ),
            opts=child,
        )
        # azure-native writes the secret through ARM but deletes it (destroy, replacement)
        # through the vault's data plane, which Owner and Contributor do not reach on an RBAC
        # vault: the deployer holds Key Vault Secrets Officer on this vault, the narrowest
        # scope that outlives the secret ("Provide access to Key Vault keys, certificates, and
        # secrets with Azure role-based access control",
        # https://learn.microsoft.com/azure/key-vault/general/rbac-guide).
        secrets_officer = grant(
            "deployer-secrets-officer",
            KEY_VAULT_SECRETS_OFFICER,
            self.vault.id,
            (deployer_object_id, authorization.PrincipalType(config.deployer_principal_type)),
        )
        secret = keyvault.Secret(
            f"{name}-database-url",
            secret_name=DATABASE_URL_SECRET,
            vault_name=self.vault.name,
            resource_group_name=resource_group_name,
            properties=keyvault.SecretPropertiesArgs(
                value=pulumi.Output.secret(config.database_url)
            ),
            # Created after the grant and so deleted before it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[secrets_officer]),
        )
        secret_reader = grant("database-url-reader", KEY_VAULT_SECRETS_USER, secret.id)

        plan = web.AppServicePlan(
            f"{name}-plan",
            resource_group_name=resource_group_name,
            location=config.location,
            kind="functionapp",
            reserved=True,
            sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption"),
            opts=child,
        )

        self.app = web.WebApp(
            f"{name}-app",
            name=app_name,
            resource_group_name=resource_group_name,
            location=config.location,
            kind="functionapp,linux",
            server_farm_id=plan.id,
            identity=web.ManagedServiceIdentityArgs(
                type=web.ManagedServiceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[self.identity.id, self.verifier_identity.id],
            ),
            key_vault_reference_identity=self.identity.id,
            https_only=True,
            # Flex Consumption VNet integration (a subnet delegated to Microsoft.App/
            # environments): the app's outbound traffic leaves from this subnet, which the
            # accounts' firewalls allow ("Azure Functions networking options",
            # https://learn.microsoft.com/azure/azure-functions/functions-networking-options).
            virtual_network_subnet_id=subnet,
            function_app_config=web.FunctionAppConfigArgs(
                deployment=web.FunctionsDeploymentArgs(
                    storage=web.FunctionsDeploymentStorageArgs(
                        type=web.FunctionsDeploymentStorageType.BLOB_CONTAINER,
                        value=container_url,
                        authentication=web.FunctionsDeploymentStorageAuthenticationArgs(
                            type=web.AuthenticationType.USER_ASSIGNED_IDENTITY,
                            user_assigned_identity_resource_id=self.identity.id,
                        ),
                    )
                ),
                runtime=web.FunctionsRuntimeArgs(
                    name=web.RuntimeName.PYTHON, version=PYTHON_VERSION
                ),
                scale_and_concurrency=web.FunctionsScaleAndConcurrencyArgs(
                    instance_memory_mb=INSTANCE_MEMORY_MB,
                    maximum_instance_count=MAXIMUM_INSTANCE_COUNT,
                ),
            ),
            # The roles exist before the site: its first start already reaches host storage,
            # telemetry and the Key Vault reference with the identity.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[host_storage, publisher, secret_reader, auditor]
            ),
        )

        names = appsettings
        settings: dict[str, pulumi.Input[str]] = {
            # Identity-based host storage: account name, credential kind and which identity.
            names.HOST_STORAGE_ACCOUNT.name: self.runtime_account.name,
            names.HOST_STORAGE_CREDENTIAL.name: "managedidentity",
            names.HOST_STORAGE_CLIENT_ID.name: self.identity.client_id,
            names.INSIGHTS_CONNECTION_STRING.name: insights_connection_string,
            names.INSIGHTS_AUTHENTICATION_STRING.name: pulumi.Output.concat(
                "ClientId=", self.identity.client_id, ";Authorization=AAD"
            ),
            # DefaultAzureCredential in the sweeper picks the user-assigned identity by this id.
            names.AZURE_CLIENT_ID.name: self.identity.client_id,
            names.ACCOUNT_URL.name: data_blob_endpoint,
            names.CONTAINER.name: config.container_name,
            names.TABLE.name: config.sweeper_table.qualified,
            names.CUTOFF.name: config.sweeper_cutoff,
            names.SCHEDULE.name: config.sweeper_schedule,
            names.LEASE.name: names.format_bool(config.sweeper_lease),
            # entra: the sweeper's DefaultAzureCredential (this identity) gets the database token.
            names.DB_AUTH.name: config.database_auth,
            names.DB_URL.name: secret.properties.apply(
                lambda props: key_vault_reference(props.secret_uri)
            ),
            # The verification timer (docs/operations.md).
            names.VERIFY_SCHEDULE.name: config.verify_schedule,
            names.VERIFIER_CLIENT_ID.name: self.verifier_identity.client_id,
            names.PENDING_DAYS.name: str(config.pending_expiry_days),
            names.SWEEPER_PERIOD.name: names.format_duration(config.sweeper_period),
            names.VERIFY_ACCOUNT_ID.name: data_account_id,
        }
        if config.sweeper_table.columns:
            # Written only when a column is renamed: the Function's default is no renames.
            settings[names.COLUMNS.name] = config.sweeper_table.columns_text()
        # App Service answers a write to a site while another runs with 409 "another operation
        # is in progress" (pulumi/pulumi-azure-native issue 3411): the settings and the two
        # basic-auth policies go one after the other, and the package after the last of them.
        last: pulumi.Resource = web.WebAppApplicationSettings(
            f"{name}-settings",
            name=self.app.name,
            resource_group_name=resource_group_name,
            properties=settings,
            opts=child,
        )
        # Basic-auth publishing would be a password beside the identity: turn both kinds off.
        for label, resource in (("ftp", web.WebAppFtpAllowed), ("scm", web.WebAppScmAllowed)):
            last = resource(
                f"{name}-no-basic-auth-{label}",
                name=self.app.name,
                resource_group_name=resource_group_name,
                allow=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[last]),
            )

        self.package = FunctionPackage(
            f"{name}-package",
            package=package,
            app_id=self.app.id,
            scm_host=self.app.host_name_ssl_states.apply(_repository_host),
            deployer_object_id=deployer_object_id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[last]),
        )

        self.register_outputs({"appName": self.app.name, "principalId": self.principal_id})


def _repository_host(states: Sequence[web.outputs.HostNameSslStateResponse] | None) -> str:
    """The SCM (Kudu) host name ARM reports for the site; Flex sites can have regional names."""
    for state in states or []:
        if state.host_type == "Repository" and state.name:
            return state.name
    return ""
