"""The sweeper deployed: a Flex Consumption function app that holds no keys.

Its host storage and deployment package live in a runtime account of their own, also without
shared keys, reached with the app's system-assigned identity. Keeping them apart from the data
account means the host's broad rights (the Functions host needs Storage Blob Data Owner on its
own storage) never touch documents: on the data account the app holds only the sweeper role.
"""

from __future__ import annotations

from typing import Final

import pulumi
from pulumi_azure_native import authorization, storage, web

from infra.config import StackConfig
from infra.package import FunctionPackage, PackageFile
from infra.storage import hardened_account

PYTHON_VERSION: Final = "3.11"
DEPLOYMENT_CONTAINER: Final = "deployments"
INSTANCE_MEMORY_MB: Final = 2048
MAXIMUM_INSTANCE_COUNT: Final = 40

_BUILTIN: Final = "/providers/Microsoft.Authorization/roleDefinitions/"
STORAGE_BLOB_DATA_OWNER: Final = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
STORAGE_BLOB_DATA_CONTRIBUTOR: Final = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
MONITORING_METRICS_PUBLISHER: Final = "3913510d-42f4-4e42-8a64-420c390055eb"


def builtin_role(subscription_id: str, role_guid: str) -> str:
    return f"/subscriptions/{subscription_id}{_BUILTIN}{role_guid}"


class SweeperApp(pulumi.ComponentResource):
    """Plan, app, runtime account, package and the role assignments the platform needs."""

    app: web.WebApp
    principal_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        package: PackageFile,
        resource_group_name: pulumi.Input[str],
        data_blob_endpoint: pulumi.Input[str],
        insights_id: pulumi.Input[str],
        insights_connection_string: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:sweeper:SweeperApp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        client = authorization.get_client_config_output()

        self.runtime_account = hardened_account(
            f"{name}-runtime",
            resource_group_name=resource_group_name,
            location=config.location,
            sku=storage.SkuName.STANDARD_LRS,
            opts=child,
        )
        deployments = storage.BlobContainer(
            f"{name}-deployments",
            container_name=DEPLOYMENT_CONTAINER,
            account_name=self.runtime_account.name,
            resource_group_name=resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=child,
        )
        container_url = pulumi.Output.concat(
            self.runtime_account.primary_endpoints.apply(lambda ends: ends.blob),
            DEPLOYMENT_CONTAINER,
        )

        # The deployer uploads the package with its own Entra identity (see infra.package).
        deployer_can_upload = authorization.RoleAssignment(
            f"{name}-deployer-upload",
            principal_id=client.object_id,
            role_definition_id=client.subscription_id.apply(
                lambda sub: builtin_role(sub, STORAGE_BLOB_DATA_CONTRIBUTOR)
            ),
            scope=deployments.id,
            opts=child,
        )
        self.package = FunctionPackage(
            f"{name}-package",
            package=package,
            container_url=container_url,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[deployer_can_upload]),
        )

        plan = web.AppServicePlan(
            f"{name}-plan",
            resource_group_name=resource_group_name,
            location=config.location,
            kind="functionapp",
            reserved=True,
            sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption"),
            opts=child,
        )

        settings: list[tuple[str, pulumi.Input[str]]] = [
            # Identity-based host storage: an account name and no connection string.
            ("AzureWebJobsStorage__accountName", self.runtime_account.name),
            ("APPLICATIONINSIGHTS_CONNECTION_STRING", insights_connection_string),
            ("APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "Authorization=AAD"),
            ("SAFETYNET_ACCOUNT_URL", data_blob_endpoint),
            ("SAFETYNET_CONTAINER", config.container_name),
            ("SAFETYNET_CUTOFF", config.sweeper_cutoff),
            ("SAFETYNET_SCHEDULE", config.sweeper_schedule),
            ("SAFETYNET_LEASE", "true" if config.sweeper_lease else "false"),
            ("SAFETYNET_DB_URL", pulumi.Output.secret(config.database_url)),
            # A new package changes this value, and a settings change restarts the app onto it.
            ("SAFETYNET_PACKAGE_SHA256", self.package.sha256),
        ]
        self.app = web.WebApp(
            f"{name}-app",
            resource_group_name=resource_group_name,
            location=config.location,
            kind="functionapp,linux",
            server_farm_id=plan.id,
            identity=web.ManagedServiceIdentityArgs(
                type=web.ManagedServiceIdentityType.SYSTEM_ASSIGNED
            ),
            https_only=True,
            site_config=web.SiteConfigArgs(
                app_settings=[
                    web.NameValuePairArgs(name=key, value=value) for key, value in settings
                ],
                min_tls_version=web.SupportedTlsVersions.SUPPORTED_TLS_VERSIONS_1_2,
                scm_min_tls_version=web.SupportedTlsVersions.SUPPORTED_TLS_VERSIONS_1_2,
                ftps_state=web.FtpsState.DISABLED,
            ),
            function_app_config=web.FunctionAppConfigArgs(
                deployment=web.FunctionsDeploymentArgs(
                    storage=web.FunctionsDeploymentStorageArgs(
                        type=web.FunctionsDeploymentStorageType.BLOB_CONTAINER,
                        value=container_url,
                        authentication=web.FunctionsDeploymentStorageAuthenticationArgs(
                            type=web.AuthenticationType.SYSTEM_ASSIGNED_IDENTITY
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
            opts=child,
        )
        self.principal_id = self.app.identity.apply(
            lambda identity: identity.principal_id if identity else ""
        )

        # Basic-auth publishing would be a password beside the identity: turn both kinds off.
        for label, resource in (("ftp", web.WebAppFtpAllowed), ("scm", web.WebAppScmAllowed)):
            resource(
                f"{name}-no-basic-auth-{label}",
                name=self.app.name,
                resource_group_name=resource_group_name,
                allow=False,
                opts=child,
            )

        def grant(label: str, role_guid: str, scope: pulumi.Input[str]) -> None:
            authorization.RoleAssignment(
                f"{name}-{label}",
                principal_id=self.principal_id,
                principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
                role_definition_id=client.subscription_id.apply(
                    lambda sub: builtin_role(sub, role_guid)
                ),
                scope=scope,
                opts=child,
            )

        # Documented requirement of identity-based AzureWebJobsStorage (timer locks, host
        # state); scoped to the runtime account, which holds no documents.
        grant("host-storage", STORAGE_BLOB_DATA_OWNER, self.runtime_account.id)
        grant("insights-publisher", MONITORING_METRICS_PUBLISHER, insights_id)

        self.register_outputs({"appName": self.app.name, "principalId": self.principal_id})
