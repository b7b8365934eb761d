"""Blob Inventory for the data account: two daily Parquet reports of the protocol container.

`safetynet reconcile --inventory` joins the newest run with the documents table instead of
listing the container (docs/sweeper.md#reconcile-from-blob-inventory). The rule asks for what
the join reads and a little more for a person reading the report: the field names are ARM's
`schemaFields` values (https://learn.microsoft.com/rest/api/storagerp/blob-inventory-policies/create-or-update,
"BlobInventoryPolicyDefinition"), the format, schedule, filters and output layout those of
https://learn.microsoft.com/azure/storage/blobs/blob-inventory. The destination container is
private and readable (the reader role) by the reader principals, who audit with reconcile, and
the uploader principals, who run `reconcile --repair`; nothing else. The service itself writes
the reports: no role assignment is needed for that.

The second rule (`safetynetrecover`, its runs under their own folder of the same container:
`YYYY/MM/DD/HH-MM-SS/<rule>/`) is `safetynet recover --inventory`'s candidate list: the same
container with its soft-deleted blobs (`includeDeleted`), snapshots (`includeSnapshots`) and,
when versioning is on, previous versions (`includeBlobVersions`). It is a rule of its own because
reconcile's join refuses a report that includes them: a deleted blob or an old version in it
would read as a live blob. The fields each flag requires are ARM's ("'VersionId and
IsCurrentVersion' are required if this property is set to true, else they must be excluded";
for an account without a hierarchical namespace, includeDeleted needs "'Deleted and
RemainingRetentionDays'"; includeSnapshots needs 'Snapshot'), so the version fields and flag go
together, on only with versioning: an account without it keeps no versions to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pulumi
from pulumi_azure_native import authorization, storage

from blob_safetynet.infra.config import Principal
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.vocabulary import (
    DEFAULT_INVENTORY_CONTAINER,
    INVENTORY_SCHEMA_FIELDS,
    RECOVER_INVENTORY_RULE,
    RECOVER_INVENTORY_SCHEMA_FIELDS,
    RECOVER_VERSION_FIELDS,
)

RULE_NAME: Final = appsettings.INVENTORY_RULE.default or "safetynet"


def inventory_rule(
    destination: pulumi.Input[str],
    container: pulumi.Input[str],
    *,
    recover: bool = False,
    versioning: bool = False,
) -> storage.BlobInventoryPolicyRuleArgs:
    """Daily, Parquet, block blobs of the protocol container: the base blobs reconcile joins, or
    with `recover` the recover rule's, also the copies the nets keep (with `versioning`, previous
    versions too), each flag with the fields ARM requires for it."""
    versions = recover and versioning
    if recover:
        fields = [*RECOVER_INVENTORY_SCHEMA_FIELDS, *(RECOVER_VERSION_FIELDS if versions else ())]
    else:
        fields = list(INVENTORY_SCHEMA_FIELDS)
    return storage.BlobInventoryPolicyRuleArgs(
        name=RECOVER_INVENTORY_RULE if recover else RULE_NAME,
        enabled=True,
        destination=destination,
        definition=storage.BlobInventoryPolicyDefinitionArgs(
            format=storage.Format.PARQUET,
            schedule=storage.Schedule.DAILY,
            object_type=storage.ObjectType.BLOB,
            schema_fields=fields,
            filters=storage.BlobInventoryPolicyFilterArgs(
                blob_types=["blockBlob"],
                # "A prefix must be a container name prefix or a container name."
                prefix_match=[pulumi.Output.concat(container, "/")],
                include_snapshots=recover,
                include_blob_versions=versions,
                include_deleted=recover,
            ),
        ),
    )


class Inventory(pulumi.ComponentResource):
    """The destination container, the account's inventory policy, and the readers' access."""

    container: storage.BlobContainer
    policy: storage.BlobInventoryPolicy

    def __init__(
        self,
        name: str,
        *,
        account_name: pulumi.Input[str],
        resource_group_name: pulumi.Input[str],
        data_container_name: pulumi.Input[str],
        reader_role_definition_id: pulumi.Input[str],
        principals: Sequence[Principal],
        deleted_with: pulumi.Resource | None = None,
        versioning: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`deleted_with`: the data account. Everything here lives under it, and a delete lock
        on it refuses their own deletes, so `pulumi destroy` leaves them to the account's."""
        super().__init__("safetynet:storage:Inventory", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, deleted_with=deleted_with)
        self.container = storage.BlobContainer(
            f"{name}-container",
            container_name=DEFAULT_INVENTORY_CONTAINER,
            account_name=account_name,
            resource_group_name=resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=child,
        )
        self.policy = storage.BlobInventoryPolicy(
            f"{name}-policy",
            # ARM knows only this name, as for the lifecycle policy.
            blob_inventory_policy_name="default",
            account_name=account_name,
            resource_group_name=resource_group_name,
            policy=storage.BlobInventoryPolicySchemaArgs(
                enabled=True,
                type=storage.InventoryRuleType.INVENTORY,
                rules=[
                    inventory_rule(self.container.name, data_container_name),
                    inventory_rule(
                        self.container.name,
                        data_container_name,
                        recover=True,
                        versioning=versioning,
                    ),
                ],
            ),
            # "The destination container must already exist."
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.container], deleted_with=deleted_with
            ),
        )
        for principal in dict.fromkeys(principals):
            authorization.RoleAssignment(
                f"{name}-reader-{principal.object_id}",
                principal_id=principal.object_id,
                # Named, as every assignment of the program: ARM refuses a type that does not
                # match the principal in Entra, and azure-native sends User when none is given.
                principal_type=authorization.PrincipalType(principal.type),
                role_definition_id=reader_role_definition_id,
                scope=self.container.id,
                opts=child,
            )
        self.register_outputs({"containerName": self.container.name})
