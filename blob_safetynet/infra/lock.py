"""The data account's delete lock, and the preview's check that the deployer may create it.

Microsoft recommends an Azure Resource Manager lock on every storage account against its
accidental or malicious deletion ("Apply an Azure Resource Manager lock to a storage account",
https://learn.microsoft.com/azure/storage/common/lock-account-resource). The lock is
`CanNotDelete`: ReadOnly is refused by the config (`config._lock`), since it blocks List Keys and
this stack's own management writes. A lock guards the account (and, through ARM, its child
resources) against deletion through Resource Manager only; blobs deleted through the data plane
are the soft-delete and versioning nets' business.

Ordering: the lock depends on the account and on every resource the stack declares under it, so
`pulumi up` creates it last (nothing the stack still has to write is under it yet) and
`pulumi destroy`, which deletes dependents before what they depend on, deletes it first, before
ARM would refuse the container's or the account's delete because of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pulumi
from pulumi_azure_native import authorization

from blob_safetynet.infra.preflight import LockPreflight

LOCK_TYPE: Final = "azure-native:authorization:ManagementLockByScope"
LOCK_NAME: Final = "blob-safetynet-do-not-delete"
LOCK_NOTES: Final = (
    "blob_safetynet: the documents of the pending-upload protocol live in this account. "
    "Deleting it deletes every document and its soft-deleted copies with it. Lift the lock "
    "(az lock delete) only to delete the account on purpose; see the project's "
    "docs/operations.md, Delete lock."
)
"""At most 512 characters (Management Locks - Create Or Update By Scope)."""


def checked_notes(
    preflight: LockPreflight,
    *,
    subscription_id: pulumi.Input[str],
    resource_group_name: pulumi.Input[str],
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """The lock's notes, known only once the preview has read the deployer's permissions on the
    resource group; a deployer who may not create locks fails the preview with ConfigError.

    Runs in preview only: `pulumi up` previews first, and under the mocks (`safetynet config
    check`, the tests) the program runs as an update and reaches no ARM. With a resource group
    name still unknown (a group the same preview creates) the check cannot run and is skipped."""
    if not pulumi.runtime.is_dry_run():
        return pulumi.Output.from_input(LOCK_NOTES)
    token = authorization.get_client_token_output(
        opts=pulumi.InvokeOutputOptions(parent=parent)
    ).token

    def check(values: Sequence[str]) -> str:
        found = preflight.check(values[0], values[1], values[2])
        if found != "allowed":
            pulumi.log.info(
                f"lock: the deployer's right to create the delete lock was {found}; ARM "
                "checks it when the lock is created",
                resource=parent,
            )
        return LOCK_NOTES

    # Unsecret: were the token marked secret, the notes would be too, and every preview would
    # show the lock's notes as changed.
    return pulumi.Output.unsecret(
        pulumi.Output.all(token, subscription_id, resource_group_name).apply(check)
    )


def delete_lock(
    name: str,
    *,
    account_id: pulumi.Input[str],
    notes: pulumi.Input[str],
    guarded: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> authorization.ManagementLockByScope:
    """A CanNotDelete lock scoped to the account, depending on `guarded` (the account and what
    the stack declares under it) so that destroy deletes the lock before any of them."""
    return authorization.ManagementLockByScope(
        name,
        scope=account_id,
        lock_name=LOCK_NAME,
        level=authorization.LockLevel.CAN_NOT_DELETE,
        notes=notes,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(guarded)),
    )
