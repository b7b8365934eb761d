"""Least-privilege RBAC on the data account: custom roles for uploaders, readers and the sweeper.

Each data action is listed with the protocol call that needs it; the README's "Provision an
account" section shows the same table and a test keeps the two equal. Roles are defined on the account (assignable nowhere
else) and assigned on the container, so no identity gets more than the one container.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pulumi
from pulumi_azure_native import authorization

_BLOBS: Final = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
READ: Final = f"{_BLOBS}/read"
WRITE: Final = f"{_BLOBS}/write"
ADD: Final = f"{_BLOBS}/add/action"
DELETE: Final = f"{_BLOBS}/delete"
TAGS_READ: Final = f"{_BLOBS}/tags/read"
TAGS_WRITE: Final = f"{_BLOBS}/tags/write"

SWEEPER_LEASE_BLOB: Final = ".safetynet/sweeper.lease"
"""The one blob the sweeper may create and lease (its single-active-sweeper lock)."""


@dataclass(frozen=True)
class Grant:
    data_action: str
    why: str


@dataclass(frozen=True)
class RoleSpec:
    key: str
    """Short name used in resource names, role names and outputs."""
    description: str
    grants: tuple[Grant, ...]

    @property
    def data_actions(self) -> list[str]:
        return [grant.data_action for grant in self.grants]


UPLOADER: Final = RoleSpec(
    key="uploader",
    description="Blob safety nets: upload create-only with state tags, seal, read, retire.",
    grants=(
        Grant(READ, "Get Blob / Get Blob Properties: read documents back and serve them."),
        Grant(
            ADD,
            "Put Blob and Put Block List that create a new blob: the create-only upload "
            "(If-None-Match: *).",
        ),
        Grant(
            WRITE,
            "Put Block (staged uploads of large files) and Put Block List; overwrites are "
            "still refused by If-None-Match: *, not by RBAC.",
        ),
        Grant(
            TAGS_WRITE,
            "x-ms-tags on upload (state=pending) and Set Blob Tags to seal (committed) and "
            "retire; blob read/write alone does not include tags.",
        ),
        Grant(TAGS_READ, "Get Blob Tags: check a blob's state before and after sealing."),
        Grant(
            DELETE,
            "Delete Blob under x-ms-if-tags: remove the retired blob after a replacement.",
        ),
    ),
)

SWEEPER: Final = RoleSpec(
    key="sweeper",
    description="Blob safety nets: delete pending blobs under a tag condition, reconcile.",
    grants=(
        Grant(
            DELETE,
            "Delete Blob under x-ms-if-tags \"state\" = 'pending', one by one or as Blob "
            "Batch sub-requests (each authorized as Delete Blob).",
        ),
        Grant(
            TAGS_READ,
            "List Blobs with include=tags and Get Blob Tags: reconcile finds pending blobs "
            "no row points to.",
        ),
        Grant(READ, "List Blobs (reconcile) and Get Blob Properties of the lease blob."),
        Grant(
            ADD,
            f"Create the lock blob {SWEEPER_LEASE_BLOB} once; the role assignment's "
            "condition allows this on that path only.",
        ),
        Grant(
            WRITE,
            f"Lease Blob on {SWEEPER_LEASE_BLOB} (one active sweeper without SKIP LOCKED); "
            "the condition allows it on that path only.",
        ),
    ),
)

READER: Final = RoleSpec(
    key="reader",
    description="Blob safety nets: read documents; no tags, no writes, no deletes.",
    grants=(Grant(READ, "Get Blob / Get Blob Properties / List Blobs: read documents."),),
)

ROLES: Final = (UPLOADER, SWEEPER, READER)

NEVER_GRANTED: Final = (
    f"{_BLOBS}/deleteBlobVersion/action",
    f"{_BLOBS}/permanentDelete/action",
    f"{_BLOBS}/filter/action",
    f"{_BLOBS}/immutableStorage/runAsSuperUser/action",
    f"{_BLOBS}/runAsSuperUser/action",
    f"{_BLOBS}/modifyPermissions/action",
    f"{_BLOBS}/manageOwnership/action",
    f"{_BLOBS}/move/action",
    "Microsoft.Storage/storageAccounts/listKeys/action",
)
"""Data and control actions no application role may hold (the policy pack checks the same)."""

SWEEPER_CONDITION: Final = (
    "((!(ActionMatches{'" + WRITE + "'}) AND !(ActionMatches{'" + ADD + "'})) OR "
    "(@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] "
    f"StringEquals '{SWEEPER_LEASE_BLOB}'))"
)
"""ABAC condition on the sweeper's assignment: it may write only its own lock blob."""


class AccessRoles(pulumi.ComponentResource):
    """The three custom roles on the data account and their assignments on its container."""

    role_definition_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        *,
        account_id: pulumi.Input[str],
        account_name: pulumi.Input[str],
        container_id: pulumi.Input[str],
        uploader_principal_ids: Sequence[str],
        reader_principal_ids: Sequence[str],
        sweeper_principal_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:access:Roles", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        definitions = {
            spec.key: authorization.RoleDefinition(
                f"{name}-{spec.key}",
                # Role names are unique per tenant, so each account's roles carry its name.
                role_name=pulumi.Output.concat("safetynet ", spec.key, " (", account_name, ")"),
                description=spec.description,
                role_type="CustomRole",
                scope=account_id,
                assignable_scopes=[account_id],
                permissions=[
                    authorization.PermissionArgs(
                        actions=[],
                        not_actions=[],
                        data_actions=spec.data_actions,
                        not_data_actions=[],
                    )
                ],
                opts=child,
            )
            for spec in ROLES
        }
        self.role_definition_ids = {key: role.id for key, role in definitions.items()}

        def assign(
            label: str,
            role: str,
            principal_id: pulumi.Input[str],
            principal_type: authorization.PrincipalType | None = None,
            condition: str | None = None,
        ) -> None:
            authorization.RoleAssignment(
                f"{name}-{label}",
                principal_id=principal_id,
                principal_type=principal_type,
                role_definition_id=definitions[role].id,
                scope=container_id,
                condition=condition,
                condition_version="2.0" if condition else None,
                opts=child,
            )

        for principal in uploader_principal_ids:
            assign(f"uploader-{principal}", UPLOADER.key, principal)
        for principal in reader_principal_ids:
            assign(f"reader-{principal}", READER.key, principal)
        assign(
            "sweeper-app",
            SWEEPER.key,
            sweeper_principal_id,
            # A new managed identity may not have replicated yet; naming its type avoids the
            # lookup that would fail.
            authorization.PrincipalType.SERVICE_PRINCIPAL,
            SWEEPER_CONDITION,
        )
        self.register_outputs({"roleDefinitionIds": self.role_definition_ids})
