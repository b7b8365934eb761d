"""Where the sweeper's telemetry and the data account's audit logs go."""

from __future__ import annotations

from typing import Final

import pulumi
from pulumi_azure_native import applicationinsights, operationalinsights

LOG_RETENTION_DAYS: Final = 30
"""The default of the stack's `logRetentionDays`."""


class Monitoring(pulumi.ComponentResource):
    """A Log Analytics workspace and a workspace-based Application Insights with local auth off.

    With local authentication disabled, telemetry is accepted only from Entra identities (the
    sweeper's, holding Monitoring Metrics Publisher), so the instrumentation key in the
    connection string is not a credential.
    """

    workspace: operationalinsights.Workspace
    insights: applicationinsights.Component

    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        retention_days: int = LOG_RETENTION_DAYS,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:monitoring:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.workspace = operationalinsights.Workspace(
            f"{name}-logs",
            resource_group_name=resource_group_name,
            location=location,
            sku=operationalinsights.WorkspaceSkuArgs(
                name=operationalinsights.WorkspaceSkuNameEnum.PER_GB2018
            ),
            retention_in_days=retention_days,
            opts=child,
        )
        self.insights = applicationinsights.Component(
            f"{name}-insights",
            resource_group_name=resource_group_name,
            location=location,
            kind="web",
            application_type=applicationinsights.ApplicationType.WEB,
            workspace_resource_id=self.workspace.id,
            ingestion_mode=applicationinsights.IngestionMode.LOG_ANALYTICS,
            disable_local_auth=True,
            opts=child,
        )
        self.register_outputs({"workspaceId": self.workspace.id})
