"""Least-privilege RBAC on the data account: custom roles for uploaders, readers, the sweeper and
the verifier.

Each data action is listed with the protocol call that needs it; docs/roles.md shows the
same table and a test keeps the two equal. Roles are defined in the
stack's resource group and assignable only there: Microsoft documents a custom role's assignable
scopes as management groups, subscriptions or resource groups ("Azure custom roles",
https://learn.microsoft.com/azure/role-based-access-control/custom-roles), so the account
itself is not a valid assignable scope. The assignments stay narrow: the container. Role
definition ids are passed in the subscription form ARM returns for role assignments
(`/subscriptions/<sub>/providers/Microsoft.Authorization/roleDefinitions/<guid>`), so a refresh
shows no drift.

ABAC conditions come from Microsoft's "Actions and attributes for Azure role assignment
conditions for Azure Blob Storage" (https://learn.microsoft.com/azure/storage/blobs/
storage-auth-abac-attributes; MicrosoftDocs/azure-docs articles/storage/blobs/
storage-auth-abac-attributes.md). That page lists, for "Delete a blob" (`blobs/delete`), the
resource attributes account name, is current version, is HNS enabled, container name and blob
path, and no blob index tags: a condition cannot key a delete on the blob's `state` tag. The tag
guard on deletes stays the client's `x-ms-if-tags` header (plus soft delete), and the conditions
here use the blob path, which every targeted action supports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pulumi
from pulumi_azure_native import authorization

from blob_safetynet.infra.config import Principal
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, VERIFY_PREFIX

_BLOBS: Final = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
READ: Final = f"{_BLOBS}/read"
WRITE: Final = f"{_BLOBS}/write"
ADD: Final = f"{_BLOBS}/add/action"
DELETE: Final = f"{_BLOBS}/delete"
TAGS_READ: Final = f"{_BLOBS}/tags/read"
TAGS_WRITE: Final = f"{_BLOBS}/tags/write"

SWEEPER_LEASE_BLOB: Final = ".safetynet/sweeper.lease"
"""The one blob the sweeper may create and lease (its single-active-sweeper lock)."""

BLOB_PATH: Final = "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path]"
BLOB_PREFIX: Final = (
    "@Request[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:prefix]"
)

CONDITION_RESOURCE_ATTRIBUTES: Final[dict[str, frozenset[str]]] = {
    "delete": frozenset(
        {
            "Microsoft.Storage/storageAccounts:name",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs:isCurrentVersion",
            "Microsoft.Storage/storageAccounts:isHnsEnabled",
            "Microsoft.Storage/storageAccounts/blobServices/containers:name",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path",
        }
    ),
    "tags/write": frozenset(
        {
            "Microsoft.Storage/storageAccounts:name",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs:isCurrentVersion",
            "Microsoft.Storage/storageAccounts:isHnsEnabled",
            "Microsoft.Storage/storageAccounts/blobServices/containers:name",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags",
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags&$keys$&",
        }
    ),
}
"""Resource attributes a condition may use per data action, as the ABAC attributes page lists
them ("Delete a blob", "Write blob index tags"): blob index tags exist for tags/write, not for
delete."""


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
        Grant(
            READ,
            "List Blobs (reconcile), Get Blob Properties of the lease blob and Get Blob of the "
            "heartbeat (its ETag for the next conditional rewrite).",
        ),
        Grant(
            ADD,
            f"Create the lock blob {SWEEPER_LEASE_BLOB} and the heartbeat {HEARTBEAT_BLOB} "
            "once (create-only); the role assignment's condition allows this on those two "
            "paths only.",
        ),
        Grant(
            WRITE,
            f"Lease Blob on {SWEEPER_LEASE_BLOB} (one active sweeper without SKIP LOCKED) and "
            f"the If-Match rewrite of {HEARTBEAT_BLOB} after each run; the condition allows it "
            "on those two paths only.",
        ),
    ),
)

READER: Final = RoleSpec(
    key="reader",
    description="Blob safety nets: read documents; no tags, no writes, no deletes.",
    grants=(Grant(READ, "Get Blob / Get Blob Properties / List Blobs: read documents."),),
)

VERIFIER: Final = RoleSpec(
    key="verifier",
    description="Blob safety nets: run `safetynet verify` probes under .safetynet/verify/ only.",
    grants=(
        Grant(
            READ,
            f"Get Blob / Get Blob Properties of its probe blobs and of the sweeper's heartbeat "
            f"{HEARTBEAT_BLOB}, and List Blobs with prefix {VERIFY_PREFIX} (soft-deleted "
            "probes, canaries); the condition allows no other path.",
        ),
        Grant(
            ADD,
            "Put Blob create-only probes (If-None-Match: *): a second upload must be refused; "
            f"only under {VERIFY_PREFIX}.",
        ),
        Grant(
            WRITE,
            f"Put Block, Lease Blob, Undelete Blob and Copy Blob (the recovery drill copies a previous version back) on probe blobs; only under {VERIFY_PREFIX}.",
        ),
        Grant(
            TAGS_WRITE,
            "x-ms-tags on a probe upload and the conditional seal (Set Blob Tags with "
            f"x-ms-if-tags); only under {VERIFY_PREFIX}.",
        ),
        Grant(TAGS_READ, f"Get Blob Tags of its probes; only under {VERIFY_PREFIX}."),
        Grant(
            DELETE,
            "Delete Blob under x-ms-if-tags (a committed probe must answer 412) and clean-up; "
            f"only under {VERIFY_PREFIX}.",
        ),
    ),
)

ROLES: Final = (UPLOADER, SWEEPER, READER, VERIFIER)

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
    f"StringEquals '{SWEEPER_LEASE_BLOB}' OR "
    "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] "
    f"StringEquals '{HEARTBEAT_BLOB}'))"
)
"""ABAC condition on the sweeper's assignment: it may write only its lock blob and its heartbeat
(`blob_safetynet/sweeper/heartbeat.py`, read by `safetynet verify`), never a document."""


def _not_any(actions: list[str]) -> str:
    return " AND ".join(f"!(ActionMatches{{'{action}'}})" for action in actions)


VERIFIER_CLAUSES: Final = (
    f"(({_not_any([ADD, WRITE, TAGS_WRITE, TAGS_READ, DELETE])}) OR "
    f"({BLOB_PATH} StringLike '{VERIFY_PREFIX}*'))",
    f"((!(ActionMatches{{'{READ}'}} AND NOT SubOperationMatches{{'Blob.List'}})) OR "
    f"({BLOB_PATH} StringLike '{VERIFY_PREFIX}*' OR {BLOB_PATH} StringEquals '{HEARTBEAT_BLOB}'))",
    f"((!(ActionMatches{{'{READ}'}} AND SubOperationMatches{{'Blob.List'}})) OR "
    f"({BLOB_PREFIX} StringStartsWith '{VERIFY_PREFIX}'))",
)
"""The verifier's ABAC clauses, all of which must hold: (1) create, write, tag read/write and
delete only on blobs under `.safetynet/verify/`; (2) read only those and the sweeper's heartbeat
blob (`SNV-SWEEPER-HEARTBEAT` reads it); (3) list only with that prefix. "Blob path" is a
resource attribute of read, add/action, write, tags/read, tags/write and delete; listing has
only the "Blob prefix" request attribute. Each clause has the form Microsoft documents for
"allow these actions only on these paths" (storage-auth-abac-examples)."""

VERIFIER_CONDITION: Final = " AND ".join(VERIFIER_CLAUSES)


def subscription_role_id(subscription_id: str, role_guid: str) -> str:
    """A role definition id in the subscription form ARM reports in role assignments."""
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{role_guid}"


class AccessRoles(pulumi.ComponentResource):
    """The custom roles, defined in the resource group, and their assignments on the container."""

    role_definition_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        *,
        resource_group_id: pulumi.Input[str],
        subscription_id: pulumi.Input[str],
        account_name: pulumi.Input[str],
        container_id: pulumi.Input[str],
        uploader_principals: Sequence[Principal],
        reader_principals: Sequence[Principal],
        verifier_principals: Sequence[Principal],
        sweeper_principal_id: pulumi.Input[str] | None,
        verifier_app_principal_id: pulumi.Input[str] | None = None,
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
                scope=resource_group_id,
                assignable_scopes=[resource_group_id],
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
        self.role_definition_ids = {
            key: pulumi.Output.all(subscription_id, role.name).apply(
                lambda parts: subscription_role_id(parts[0], parts[1])
            )
            for key, role in definitions.items()
        }

        def assign(
            label: str,
            role: str,
            principal_id: pulumi.Input[str],
            principal_type: authorization.PrincipalType,
            condition: str | None = None,
        ) -> None:
            authorization.RoleAssignment(
                f"{name}-{label}",
                principal_id=principal_id,
                # Always named: azure-native sends User when none is given, and ARM refuses a
                # type that does not match the principal in Entra (UnmatchedPrincipalType).
                principal_type=principal_type,
                role_definition_id=self.role_definition_ids[role],
                scope=container_id,
                condition=condition,
                condition_version="2.0" if condition else None,
                opts=child,
            )

        configured = (
            (UPLOADER, uploader_principals, None),
            (READER, reader_principals, None),
            (VERIFIER, verifier_principals, VERIFIER_CONDITION),
        )
        for spec, principals, condition in configured:
            for principal in principals:
                assign(
                    f"{spec.key}-{principal.object_id}",
                    spec.key,
                    principal.object_id,
                    authorization.PrincipalType(principal.type),
                    condition,
                )
        if sweeper_principal_id is not None:
            assign(
                "sweeper-app",
                SWEEPER.key,
                sweeper_principal_id,
                # A managed identity is a service principal; naming the type also spares ARM the
                # directory lookup that fails while a new identity replicates.
                authorization.PrincipalType.SERVICE_PRINCIPAL,
                SWEEPER_CONDITION,
            )
        if verifier_app_principal_id is not None:
            assign(
                "verifier-app",
                VERIFIER.key,
                verifier_app_principal_id,
                authorization.PrincipalType.SERVICE_PRINCIPAL,
                VERIFIER_CONDITION,
            )
        self.register_outputs({"roleDefinitionIds": self.role_definition_ids})
