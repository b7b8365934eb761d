"""The protocol's vocabulary: the tag, its values, the default container, the internal prefix.

The bottom layer: `infra/`, `blob_safetynet/policies/`, `blob_safetynet/sweeper/`, `testkit/` and the CLI may all import this
module; it imports only the standard library (tests/test_boundaries.py holds it to that). It
also holds the one rule for an Azure Policy scope, which the export and the infra program share.
"""

import re
from typing import Final

DEFAULT_CONTAINER: Final = "documents"
DEFAULT_INVENTORY_CONTAINER: Final = "inventory"
"""Where the data account's Blob Inventory rule writes its reports (infra and reconcile)."""
INVENTORY_SCHEMA_FIELDS: Final = (
    "Name",
    "Creation-Time",
    "Last-Modified",
    "Etag",
    "Content-Length",
    "BlobType",
    "Tags",
)
"""The fields the inventory rule asks for (ARM's schemaFields spelling); reconcile reads Name,
Last-Modified and Tags, and a person comparing a plan with a report reads Etag."""
RECOVER_INVENTORY_RULE: Final = "safetynetrecover"
"""The second inventory rule, read by `recover --inventory`: the same container with its
soft-deleted blobs, snapshots and (with versioning) versions. Its own rule, because reconcile
refuses a report that includes them. Letters and digits only: "A rule name can contain any
combination of alpha numeric characters"
(https://learn.microsoft.com/rest/api/storagerp/blob-inventory-policies/create-or-update)."""
RECOVER_INVENTORY_SCHEMA_FIELDS: Final = (
    "Name",
    "Last-Modified",
    "Etag",
    "Content-Length",
    "Content-MD5",
    "BlobType",
    "Deleted",
    "RemainingRetentionDays",
    "Snapshot",
)
"""The recover rule's fields. With includeDeleted on an account without a hierarchical
namespace the fields "must include 'Deleted and RemainingRetentionDays'" (DeletedTime and
DeletionId are for hierarchical namespace accounts only); with includeSnapshots, 'Snapshot'
(https://learn.microsoft.com/rest/api/storagerp/blob-inventory-policies/create-or-update,
BlobInventoryPolicyFilter). Recover reads Name, Content-Length, Deleted,
RemainingRetentionDays and Snapshot; Last-Modified, Etag and Content-MD5 are for a person."""
RECOVER_VERSION_FIELDS: Final = ("VersionId", "IsCurrentVersion")
"""Added with includeBlobVersions, which requires them ("else they must be excluded")."""
DEFAULT_TABLE: Final = "documents"
"""The documents table's name unless an application names its own."""
STATE_TAG: Final = "state"
PENDING: Final = "pending"
COMMITTED: Final = "committed"
RETIRED: Final = "retired"
"""A replaced or deleted document's old blob, tagged so its delete can be guarded too."""


def tag_condition(value: str) -> str:
    """The `x-ms-if-tags` expression that holds only while the state tag equals `value`."""
    return f"\"{STATE_TAG}\" = '{value}'"


HEARTBEAT_BLOB: Final = ".safetynet/sweeper.heartbeat.json"
"""Written by every sweeper run (CLI and Function), read by `safetynet verify`."""
HEARTBEAT_FINISHED_FIELD: Final = "finished_utc"
"""The heartbeat's ISO-8601 UTC time at which the run finished."""
HEARTBEAT_TABLE_FIELD: Final = "table"
"""The heartbeat's documents table (`schema.name` or `name`) that the run swept."""
VERIFY_PREFIX: Final = ".safetynet/verify/"
"""Probe blobs of `safetynet verify` live under `<VERIFY_PREFIX><run id>/`; nothing else does."""
HISTORY_PREFIX: Final = f"{VERIFY_PREFIX}history/"
"""Continuous verification's history: one JSON blob per run, create-only, never rewritten. Under
the verifier's prefix (its ABAC condition allows writes nowhere else) and inside `.safetynet/`,
which the sweeper and reconcile never touch."""

POLICY_SCOPE: Final = re.compile(
    r"/subscriptions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|/providers/Microsoft\.Management/managementGroups/[A-Za-z0-9](?:[A-Za-z0-9_().-]{0,88}[A-Za-z0-9_()-])?",
    re.IGNORECASE | re.ASCII,
)
"""Where custom Azure Policy definitions live, the whole scope and nothing after it: a
subscription (its id a GUID) or a management group, whose id is 1-90 alphanumerics, hyphens,
underscores, periods and parentheses, starting with a letter or digit and not ending with a
period (https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftmanagement).
ASCII only: with re.ASCII, IGNORECASE folds A-Z alone, never the long s (U+017F) into `s` nor
the Kelvin sign (U+212A) into `k` (https://docs.python.org/3/library/re.html#re.IGNORECASE).
The `policy export` CLI and `SafetyNetGovernance` both hold a scope to it with `fullmatch`."""


def policy_scope_problem(scope: str) -> str | None:
    """Why `scope` cannot hold policy definitions; None when it can."""
    if POLICY_SCOPE.fullmatch(scope):
        return None
    return (
        "must be /subscriptions/<subscription id> or "
        "/providers/Microsoft.Management/managementGroups/<management group id>, with nothing "
        "after it"
    )


def arm_action_matches(pattern: str, action: str) -> bool:
    """Whether an RBAC action pattern covers `action` as Azure matches them: `*` stands for any
    run of characters, and case does not count for A-Z only (ARM compares with .NET's ordinal
    ignore-case, so the long s or the Kelvin sign never equals an ASCII letter;
    https://learn.microsoft.com/azure/role-based-access-control/role-definitions#actions). The
    one matcher for the audit's role rules and the deployment's lock pre-flight."""
    parts = (re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(".*".join(parts), action, re.IGNORECASE | re.ASCII) is not None
