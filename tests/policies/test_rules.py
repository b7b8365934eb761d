"""Every rule over fixtures named by outcome: one model that passes, fails, or cannot be judged."""

from __future__ import annotations

import pytest

from blob_safetynet.infra import access
from blob_safetynet.infra.access import SWEEPER_CONDITION
from blob_safetynet.policies.rules import RULES, RULES_BY_ID, Outcome, evaluate
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    AccountImmutability,
    BackupInstance,
    Container,
    DiagnosticSetting,
    Encryption,
    Facet,
    Lock,
    Locks,
    LockScope,
    Network,
    TagFilter,
    Thresholds,
)
from blob_safetynet.policies.rules.roles import (
    ACCOUNT_WRITE,
    BLOBS,
    LIST_KEYS,
    PERMANENT_DELETE,
    ROLE_ASSIGNMENT_WRITE,
    TAG_WRITE,
    RoleDefinition,
    built_in_role,
    parse_condition,
)
from tests.policies import models as m

THRESHOLDS = Thresholds()
VERIFY_PREFIX = ".safetynet/verify/"
UNREADABLE_CONDITION = "@Request[Microsoft.Authorization/roleAssignments:RoleDefinitionId] ForAnyOfAnyValues:GuidEquals {x}"
"""A condition of a form this project never writes (constrained delegation)."""


VERIFIER_SHAPE = (
    "((!(ActionMatches{'" + TAG_WRITE + "'}) AND !(ActionMatches{'" + BLOBS + "/read'} AND NOT "
    "SubOperationMatches{'Blob.List'})) OR (@Resource[" + BLOBS + ":path] StringLike "
    "'.safetynet/verify/*')) AND ((!(ActionMatches{'" + BLOBS + "/read'} AND "
    "SubOperationMatches{'Blob.List'})) OR (@Request[" + BLOBS + ":prefix] StringStartsWith "
    "'.safetynet/verify/'))"
)
"""Two ANDed clauses, as the verification role's condition is written: tag writes and reads
only under .safetynet/verify/, listing only with that prefix."""


def fenced(action: str, path: str = VERIFY_PREFIX, qualifier: str = "") -> str:
    """The condition shape blob_safetynet/infra/access.py writes: `action` (with an optional sub-operation
    qualifier) only on blobs under `path`."""
    return (
        f"((!(ActionMatches{{'{action}'}}{qualifier})) OR "
        "(@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] "
        f"StringStartsWith '{path}'))"
    )


MANAGEMENT_GROUP = "/providers/Microsoft.Management/managementGroups/corp"
BLOB_SERVICE = f"{m.ACCOUNT_ID}/blobServices/default"
"""A scope between the account and its containers: it reaches every container."""
OWNER_FENCED = (
    "((!(ActionMatches{'" + LIST_KEYS + "'}) AND !(ActionMatches{'" + ACCOUNT_WRITE + "'}) AND "
    "!(ActionMatches{'" + ROLE_ASSIGNMENT_WRITE + "'})) OR (@Resource[" + BLOBS + ":path] "
    "StringStartsWith '.safetynet/verify/'))"
)
"""Never-granted control-plane actions "fenced" by a blob path: a blob path says nothing
about listKeys, account write or role assignment write."""
KEY_OPERATOR = RoleDefinition(
    "Storage Account Key Operator Service Role",
    actions=("Microsoft.Storage/storageAccounts/regeneratekey/action",),
)
"""Regenerate Key answers with the new keys (StorageAccountListKeysResult), as listKeys does."""
ROLE_ADMIN = RoleDefinition("role admin", actions=(ROLE_ASSIGNMENT_WRITE,))
"""Role assignment write alone: a condition can limit it, but not by a blob path."""
KEYS_AND_ROLES = RoleDefinition(
    "keys and roles", actions=(LIST_KEYS, ACCOUNT_WRITE, ROLE_ASSIGNMENT_WRITE)
)
PERMANENT_DELETE_BOTH_HALVES = (
    fenced(PERMANENT_DELETE, qualifier=" AND SubOperationMatches{'X'}")
    + " AND "
    + fenced(PERMANENT_DELETE, qualifier=" AND NOT SubOperationMatches{'X'}")
)
"""Permanent delete fenced for sub-operation X and for everything but X: all of it."""


CASES: dict[str, dict[Outcome, list[Account]]] = {
    "SN-BLOB-SOFT-DELETE": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [
            m.account(blob_service_properties=m.blob_service_properties(delete={"enabled": False})),
            m.account(blob_service_properties=m.blob_service_properties(delete={"days": 3})),
        ],
        Outcome.UNKNOWN: [
            m.account(blob_service_properties=m.blob_service_properties(delete={"days": UNKNOWN})),
            m.account(blob_service_properties=UNKNOWN),
        ],
    },
    "SN-CONTAINER-SOFT-DELETE": {
        Outcome.PASS: [
            m.account(),
            m.account(blob_service_properties=m.blob_service_properties(containers={"days": 7})),
        ],
        Outcome.FAIL: [
            m.account(
                blob_service_properties=m.blob_service_properties(containers={"enabled": False})
            ),
            m.account(blob_service_properties=m.blob_service_properties(containers={"days": 6})),
            m.account(blob_service_properties=m.blob_service_properties(containers={"days": None})),
        ],
        Outcome.UNKNOWN: [
            m.account(
                blob_service_properties=m.blob_service_properties(containers={"enabled": UNKNOWN})
            ),
            m.account(
                blob_service_properties=m.blob_service_properties(containers={"days": UNKNOWN})
            ),
        ],
    },
    "SN-NO-PERMANENT-DELETE": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [
            m.account(
                blob_service_properties=m.blob_service_properties(
                    delete={"allow_permanent_delete": True}
                )
            )
        ],
        Outcome.UNKNOWN: [
            m.account(
                blob_service_properties=m.blob_service_properties(
                    delete={"allow_permanent_delete": UNKNOWN}
                )
            )
        ],
    },
    "SN-PENDING-LIFECYCLE": {
        Outcome.PASS: [
            m.account(),
            m.account(lifecycle_rules=(m.pending_rule(prefixes=()),)),
            m.account(lifecycle_rules=(m.version_rule(), m.pending_rule(prefixes=("doc",)))),
            m.account(lifecycle_rules=(m.pending_rule(), m.retired_rule())),
            m.account(
                lifecycle_rules=(m.pending_rule(prefixes=("documents/2026/", "documents/")),)
            ),
        ],
        Outcome.FAIL: [
            m.account(lifecycle_rules=()),
            m.account(lifecycle_rules=(m.pending_rule(enabled=False),)),
            m.account(lifecycle_rules=(m.pending_rule(blob_types=("appendBlob",)),)),
            m.account(lifecycle_rules=(m.pending_rule(prefixes=("other/",)),)),
            m.account(lifecycle_rules=(m.pending_rule(prefixes=("documents/sub",)),)),
            m.account(lifecycle_rules=(m.pending_rule(tag_filters=()),)),
            m.account(
                lifecycle_rules=(
                    m.pending_rule(tag_filters=(TagFilter("state", "==", "committed"),)),
                )
            ),
            m.account(lifecycle_rules=(m.pending_rule(delete_after_days=None),)),
            m.account(lifecycle_rules=(m.pending_rule(delete_after_days=30),)),
            m.account(lifecycle_rules=(m.pending_rule(delete_after_days=0),)),
            m.account(
                lifecycle_rules=(
                    m.pending_rule(
                        tag_filters=(TagFilter("state", "==", "pending"), TagFilter("x", "==", "y"))
                    ),
                )
            ),
            m.account(
                lifecycle_rules=(
                    m.pending_rule(
                        tag_filters=(
                            TagFilter("state", "==", "pending"),
                            TagFilter("state", "==", "retired"),
                        )
                    ),
                )
            ),
            m.account(lifecycle_rules=(m.pending_rule(prefixes=("documents/2026/",)),)),
        ],
        Outcome.UNKNOWN: [
            m.account(lifecycle_rules=(m.pending_rule(enabled=UNKNOWN),)),
            m.account(
                lifecycle_rules=(m.pending_rule(tag_filters=(TagFilter(UNKNOWN, "==", "x"),)),)
            ),
            m.account(lifecycle_rules=UNKNOWN),
        ],
    },
    "SN-FLAT-NAMESPACE": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [m.account(settings=m.settings(is_hns_enabled=True))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(is_hns_enabled=UNKNOWN))],
    },
    "SN-ACCOUNT-KIND": {
        Outcome.PASS: [m.account(), m.account(settings=m.settings(kind="BlockBlobStorage"))],
        Outcome.FAIL: [
            m.account(settings=m.settings(kind="Storage")),
            m.account(settings=m.settings(kind="BlobStorage")),
        ],
        Outcome.UNKNOWN: [m.account(settings=m.settings(kind=UNKNOWN))],
    },
    "SN-SHARED-KEY-OFF": {
        Outcome.PASS: [
            m.account(),
            m.account(settings=m.settings(blob_shared_key_access=False)),
        ],
        Outcome.FAIL: [
            m.account(settings=m.settings(allow_shared_key_access=True)),
            m.account(settings=m.settings(blob_shared_key_access=True)),
            m.account(
                settings=m.settings(allow_shared_key_access=UNKNOWN, blob_shared_key_access=True)
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(settings=m.settings(allow_shared_key_access=UNKNOWN)),
            m.account(settings=m.settings(blob_shared_key_access=UNKNOWN)),
            m.account(
                settings=m.settings(allow_shared_key_access=True, blob_shared_key_access=False)
            ),
        ],
    },
    "SN-NO-PUBLIC-ACCESS": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [m.account(settings=m.settings(allow_blob_public_access=True))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(allow_blob_public_access=UNKNOWN))],
    },
    "SN-CONTAINERS-PRIVATE": {
        Outcome.PASS: [m.account(), m.account(containers=(Container("documents", "None"),))],
        Outcome.FAIL: [
            m.account(containers=(Container("documents", None), Container("web", "Blob"))),
            m.account(containers=(Container("documents", "Container"),)),
        ],
        Outcome.UNKNOWN: [m.account(containers=(Container("documents", UNKNOWN),))],
    },
    "SN-HTTPS-TLS": {
        Outcome.PASS: [m.account(), m.account(settings=m.settings(minimum_tls_version="TLS1_3"))],
        Outcome.FAIL: [
            m.account(settings=m.settings(https_only=False)),
            m.account(settings=m.settings(minimum_tls_version="TLS1_1")),
            m.account(settings=m.settings(minimum_tls_version="SSL3")),
        ],
        Outcome.UNKNOWN: [m.account(settings=m.settings(minimum_tls_version=UNKNOWN))],
    },
    "SN-TAG-WRITE-ROLE": {
        Outcome.PASS: [
            m.account(),
            m.account(role_assignments=(m.assignment(condition=SWEEPER_CONDITION),)),
            m.account(role_assignments=(m.assignment(scope=m.ACCOUNT_ID),)),
            m.account(role_assignments=(m.assignment(scope="/subscriptions/s"),)),
            m.account(role_assignments=(m.assignment(scope=BLOB_SERVICE),)),
            m.account(
                resource_id=None,
                role_assignments=(m.assignment(scope="anything/containers/documents"),),
            ),
        ],
        Outcome.FAIL: [
            m.account(role_assignments=()),
            m.account(role_assignments=(m.assignment(condition=fenced(TAG_WRITE)),)),
            m.account(role_assignments=(m.assignment(condition=VERIFIER_SHAPE),)),
            m.account(role_assignments=(m.assignment(condition=fenced(f"{BLOBS}/tags/*")),)),
            m.account(
                role_assignments=(
                    m.assignment(
                        data_actions=(
                            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
                        )
                    ),
                )
            ),
            m.account(
                role_assignments=(
                    m.assignment(
                        not_data_actions=(
                            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/*",
                        )
                    ),
                )
            ),
            m.account(
                role_assignments=(
                    m.assignment(scope=f"{m.ACCOUNT_ID}/blobServices/default/containers/other"),
                )
            ),
            m.account(
                role_assignments=(
                    m.assignment(scope="/subscriptions/s/resourceGroups/rg/providers/X/y/z"),
                )
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(role_assignments=(m.assignment(scope=UNKNOWN),)),
            m.account(role_assignments=(m.assignment(data_actions=UNKNOWN),)),
            m.account(role_assignments=(m.assignment(condition=UNREADABLE_CONDITION),)),
            m.account(role_assignments=(m.assignment(condition=UNKNOWN),)),
        ],
    },
    "SN-NO-BROAD-APP-ROLES": {
        Outcome.PASS: [
            m.account(),
            m.account(role_assignments=(m.assignment(m.OWNER, principal_type="User"),)),
            m.account(role_assignments=(m.assignment(actions=("*/read",)),)),
        ],
        Outcome.FAIL: [
            m.account(role_assignments=(m.assignment(), m.assignment(m.OWNER))),
            m.account(role_assignments=(m.assignment(actions=("Microsoft.Storage/*",)),)),
            m.account(role_assignments=(m.assignment(m.CONTRIBUTOR),)),
            m.account(role_assignments=(m.assignment(m.ACCOUNT_CONTRIBUTOR),)),
            m.account(
                role_assignments=(
                    m.assignment(
                        m.OWNER,
                        actions=("Microsoft.Authorization/roleAssignments/*",),
                    ),
                )
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(role_assignments=(m.assignment(m.OWNER, principal_type=None),)),
            m.account(role_assignments=(m.assignment(actions=UNKNOWN),)),
        ],
    },
    "SN-NEVER-GRANTED": {
        Outcome.PASS: [
            m.account(),
            m.account(role_assignments=(m.assignment(m.OWNER, principal_type="User"),)),
            m.account(
                role_assignments=(
                    m.assignment(m.BLOB_OWNER, condition=fenced(PERMANENT_DELETE, VERIFY_PREFIX)),
                )
            ),
            m.account(
                role_assignments=(
                    m.assignment(
                        m.OWNER, scope=f"{m.ACCOUNT_ID}/blobServices/default/containers/x"
                    ),
                )
            ),
            m.account(
                role_assignments=(m.assignment(m.BLOB_OWNER, condition=fenced(f"{BLOBS}/*")),)
            ),
            m.account(
                role_assignments=(
                    m.assignment(m.BLOB_OWNER, condition=PERMANENT_DELETE_BOTH_HALVES),
                )
            ),
            m.account(
                role_assignments=(m.assignment(m.BLOB_OWNER, not_data_actions=(PERMANENT_DELETE,)),)
            ),
        ],
        Outcome.FAIL: [
            m.account(role_assignments=(m.assignment(m.BLOB_OWNER),)),
            m.account(role_assignments=(m.assignment(m.OWNER, scope="/subscriptions/s"),)),
            m.account(role_assignments=(m.assignment(m.ACCOUNT_CONTRIBUTOR),)),
            m.account(
                role_assignments=(
                    m.assignment(m.BLOB_OWNER, condition=fenced(PERMANENT_DELETE, "documents/")),
                )
            ),
            m.account(role_assignments=(m.assignment(KEYS_AND_ROLES, condition=OWNER_FENCED),)),
            m.account(
                role_assignments=(
                    m.assignment(
                        m.BLOB_OWNER,
                        condition=fenced(
                            PERMANENT_DELETE, qualifier=" AND SubOperationMatches{'X'}"
                        ),
                    ),
                )
            ),
            m.account(role_assignments=(m.assignment(m.OWNER, scope=MANAGEMENT_GROUP),)),
            m.account(role_assignments=(m.assignment(m.BLOB_OWNER, scope=BLOB_SERVICE),)),
            m.account(role_assignments=(m.assignment(m.OWNER, condition=UNREADABLE_CONDITION),)),
            m.account(role_assignments=(m.assignment(m.OWNER, condition=UNKNOWN),)),
            m.account(role_assignments=(m.assignment(KEY_OPERATOR),)),
            m.account(role_assignments=(m.assignment(actions=("Microsoft.Storage/*",)),)),
            m.account(
                role_assignments=(
                    m.assignment(ROLE_ADMIN, condition=fenced(ROLE_ASSIGNMENT_WRITE)),
                )
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(role_assignments=(m.assignment(m.OWNER, principal_type=None),)),
            m.account(
                role_assignments=(m.assignment(m.BLOB_OWNER, condition=UNREADABLE_CONDITION),)
            ),
            m.account(role_assignments=(m.assignment(m.BLOB_OWNER, condition=UNKNOWN),)),
        ],
    },
    "SN-VERSION-EXPIRY": {
        Outcome.PASS: [
            m.account(),
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=False),
                lifecycle_rules=(m.pending_rule(),),
            ),
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=True),
                lifecycle_rules=(m.pending_rule(), m.version_rule()),
            ),
        ],
        Outcome.FAIL: [
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=True),
                lifecycle_rules=(m.pending_rule(),),
            ),
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=True),
                lifecycle_rules=(m.version_rule(enabled=False),),
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=UNKNOWN)
            ),
            m.account(
                blob_service_properties=m.blob_service_properties(versioning_enabled=True),
                lifecycle_rules=(m.version_rule(version_delete_after_days=UNKNOWN),),
            ),
        ],
    },
    "SN-PUBLIC-NETWORK-ACCESS": {
        Outcome.PASS: [
            m.account(settings=m.settings(network=Network("SecuredByPerimeter", "Allow", ())))
        ],
        Outcome.FAIL: [m.account(settings=m.settings(network=Network("Enabled", "Deny", ())))],
        Outcome.UNKNOWN: [
            m.account(settings=m.settings(network=UNKNOWN)),
            m.account(settings=m.settings(network=Network(UNKNOWN, "Deny", ()))),
        ],
    },
    "SN-NETWORK-DEFAULT-DENY": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [m.account(settings=m.settings(network=Network("Disabled", "Allow", ())))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(network=Network("Disabled", UNKNOWN, ())))],
    },
    "SN-TRUSTED-SERVICES": {
        Outcome.PASS: [
            m.account(
                settings=m.settings(
                    network=Network("Disabled", "Deny", ("Logging", "AzureServices"))
                )
            )
        ],
        Outcome.FAIL: [
            m.account(settings=m.settings(network=Network("Disabled", "Deny", ("None",))))
        ],
        Outcome.UNKNOWN: [
            m.account(settings=m.settings(network=Network("Disabled", "Deny", UNKNOWN)))
        ],
    },
    "SN-PRIVATE-ENDPOINT": {
        Outcome.PASS: [m.account(private_endpoints=("Pending", "Approved"))],
        Outcome.FAIL: [m.account(private_endpoints=()), m.account(private_endpoints=("Pending",))],
        Outcome.UNKNOWN: [
            m.account(private_endpoints=UNKNOWN),
            m.account(private_endpoints=("Rejected", UNKNOWN)),
        ],
    },
    "SN-CROSS-TENANT-REPLICATION": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [m.account(settings=m.settings(allow_cross_tenant_replication=True))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(allow_cross_tenant_replication=UNKNOWN))],
    },
    "SN-INFRA-ENCRYPTION": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [
            m.account(settings=m.settings(encryption=Encryption(False, "Microsoft.Keyvault")))
        ],
        Outcome.UNKNOWN: [m.account(settings=m.settings(encryption=UNKNOWN))],
    },
    "SN-CMK-ENCRYPTION": {
        Outcome.PASS: [
            m.account(settings=m.settings(encryption=Encryption(True, "Microsoft.KeyVault")))
        ],
        Outcome.FAIL: [
            m.account(settings=m.settings(encryption=Encryption(True, "Microsoft.Storage")))
        ],
        Outcome.UNKNOWN: [m.account(settings=m.settings(encryption=Encryption(True, UNKNOWN)))],
    },
    "SN-KEY-EXPIRATION-POLICY": {
        Outcome.PASS: [m.account(settings=m.settings(key_expiration_days=1))],
        Outcome.FAIL: [m.account(settings=m.settings(key_expiration_days=None))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(key_expiration_days=UNKNOWN))],
    },
    "SN-SAS-EXPIRATION-POLICY": {
        Outcome.PASS: [m.account(settings=m.settings(sas_expiration_seconds=60))],
        Outcome.FAIL: [m.account(settings=m.settings(sas_expiration_seconds=None))],
        Outcome.UNKNOWN: [m.account(settings=m.settings(sas_expiration_seconds=UNKNOWN))],
    },
    "SN-NO-LOCAL-USERS": {
        Outcome.PASS: [
            m.account(local_users=("kept-but-disabled",)),
            m.account(settings=m.settings(local_users_enabled=None)),
            m.account(local_users=UNKNOWN),
        ],
        Outcome.FAIL: [
            m.account(settings=m.settings(sftp_enabled=True)),
            m.account(settings=m.settings(local_users_enabled=None), local_users=("sftpuser",)),
            m.account(settings=m.settings(local_users_enabled=True), local_users=("sftpuser",)),
        ],
        Outcome.UNKNOWN: [
            m.account(settings=m.settings(local_users_enabled=True), local_users=UNKNOWN),
            m.account(settings=m.settings(sftp_enabled=UNKNOWN)),
        ],
    },
    "SN-DEFENDER-FOR-STORAGE": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [m.account(defender_enabled=False)],
        Outcome.UNKNOWN: [m.account(defender_enabled=UNKNOWN)],
    },
    "SN-GEO-REDUNDANCY": {
        Outcome.PASS: [
            m.account(settings=m.settings(sku=sku))
            for sku in ("Standard_GRS", "Standard_RAGRS", "Standard_GZRS", "standard_ragzrs")
        ],
        Outcome.FAIL: [
            m.account(settings=m.settings(sku=sku))
            for sku in (
                "Standard_LRS",
                "Standard_ZRS",
                "Premium_LRS",
                "Premium_ZRS",
                "Standard_GR\u017f",  # the long s: no ASCII-only fold makes it GRS
            )
        ],
        Outcome.UNKNOWN: [m.account(settings=m.settings(sku=UNKNOWN))],
    },
    "SN-POINT-IN-TIME-RESTORE": {
        Outcome.PASS: [
            m.account(),
            m.account(
                blob_service_properties=m.blob_service_properties(
                    delete={"days": 8}, restore={"days": 7}
                )
            ),
        ],
        Outcome.FAIL: [
            m.account(
                blob_service_properties=m.blob_service_properties(restore={"enabled": False})
            ),
            m.account(
                blob_service_properties=m.blob_service_properties(
                    delete={"days": 7}, restore={"days": 7}
                )
            ),
            m.account(blob_service_properties=m.blob_service_properties(restore={"days": None})),
            m.account(blob_service_properties=m.blob_service_properties(change_feed_enabled=False)),
            m.account(blob_service_properties=m.blob_service_properties(versioning_enabled=False)),
            m.account(blob_service_properties=m.blob_service_properties(delete={"enabled": False})),
        ],
        Outcome.UNKNOWN: [
            m.account(
                blob_service_properties=m.blob_service_properties(restore={"enabled": UNKNOWN})
            ),
            m.account(blob_service_properties=m.blob_service_properties(restore={"days": UNKNOWN})),
            m.account(
                blob_service_properties=m.blob_service_properties(change_feed_enabled=UNKNOWN)
            ),
            m.account(blob_service_properties=m.blob_service_properties(delete={"days": UNKNOWN})),
        ],
    },
    "SN-BLOB-VERSIONING": {
        Outcome.PASS: [m.account()],
        Outcome.FAIL: [
            m.account(blob_service_properties=m.blob_service_properties(versioning_enabled=False))
        ],
        Outcome.UNKNOWN: [
            m.account(blob_service_properties=m.blob_service_properties(versioning_enabled=UNKNOWN))
        ],
    },
    "SN-PROTOCOL-CONTAINER-MUTABLE": {
        Outcome.PASS: [
            m.account(),
            m.account(
                settings=m.settings(immutability=AccountImmutability(True, None)),
            ),
            m.account(
                settings=m.settings(immutability=AccountImmutability(True, "Disabled")),
            ),
            m.account(containers=(m.container(name="other", legal_hold=True), m.container())),
        ],
        Outcome.FAIL: [
            m.account(containers=(m.container(worm_policy=True),)),
            m.account(containers=(m.container(legal_hold=True),)),
            m.account(containers=(m.container(version_immutability=True),)),
            m.account(settings=m.settings(immutability=AccountImmutability(True, "Unlocked"))),
            m.account(
                containers=(m.container(legal_hold=True, worm_policy=UNKNOWN),),
            ),
        ],
        Outcome.UNKNOWN: [
            m.account(containers=(m.container(legal_hold=UNKNOWN),)),
            m.account(containers=(m.container(version_immutability=UNKNOWN),)),
            m.account(settings=m.settings(immutability=UNKNOWN)),
            m.account(containers=UNKNOWN),
        ],
    },
    "SN-DELETE-LOCK": {
        Outcome.PASS: [
            m.account(),
            m.account(locks=Locks((Lock("ro", "readonly", LockScope.SUBSCRIPTION),))),
            m.account(
                locks=Locks(
                    (Lock("keep", "CanNotDelete", LockScope.RESOURCE_GROUP),),
                    {LockScope.SUBSCRIPTION: "permission: locks/list at the subscription"},
                )
            ),
        ],
        Outcome.FAIL: [
            m.account(locks=Locks(())),
            m.account(locks=Locks((Lock("x", "NotSpecified", LockScope.ACCOUNT),))),
        ],
        Outcome.UNKNOWN: [
            m.account(locks=UNKNOWN),
            m.account(
                locks=Locks((), {LockScope.RESOURCE_GROUP: "network: locks/list at the group"})
            ),
            m.account(locks=Locks((Lock("x", UNKNOWN, LockScope.ACCOUNT),))),
        ],
    },
    "SN-BLOB-LOGGING": {
        Outcome.PASS: [
            m.account(),
            m.account(blob_diagnostics=(m.blob_logs("allLogs"),)),
            m.account(
                blob_diagnostics=(
                    m.blob_logs("StorageRead", name="a"),
                    m.blob_logs("StorageWrite", "StorageDelete", name="b"),
                )
            ),
        ],
        Outcome.FAIL: [
            m.account(blob_diagnostics=()),
            m.account(blob_diagnostics=(m.blob_logs("StorageRead", "StorageWrite"),)),
            m.account(blob_diagnostics=(m.blob_logs(destination=False),)),
            m.account(blob_diagnostics=(m.blob_logs("audit"),)),
        ],
        Outcome.UNKNOWN: [
            m.account(blob_diagnostics=UNKNOWN),
            m.account(blob_diagnostics=(DiagnosticSetting("x", UNKNOWN, True),)),
        ],
    },
    "SN-BACKUP-PROTECTED": {
        Outcome.PASS: [m.account(), m.account(backup_instances=(BackupInstance("b", None),))],
        Outcome.FAIL: [
            m.account(backup_instances=()),
            m.account(backup_instances=(BackupInstance("b", "ProtectionStopped"),)),
        ],
        Outcome.UNKNOWN: [m.account(backup_instances=UNKNOWN)],
    },
}

PARAMS = [
    pytest.param(rule_id, outcome, number, id=f"{rule_id}-{outcome.value.lower()}-{number}")
    for rule_id, by_outcome in CASES.items()
    for outcome, accounts in by_outcome.items()
    for number in range(len(accounts))
]


def test_every_rule_has_a_fixture_for_each_outcome() -> None:
    """The fixture table covers every registered rule with a pass, a fail and an unknown case."""
    assert set(CASES) == {rule.id for rule in RULES}
    judged = {Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN}
    assert all(set(by_outcome) == judged for by_outcome in CASES.values())


@pytest.mark.parametrize(("rule_id", "outcome", "number"), PARAMS)
def test_rule_outcome(rule_id: str, outcome: Outcome, number: int) -> None:
    """The rule judges its fixture with the outcome the fixture is named after."""
    finding = RULES_BY_ID[rule_id].evaluate(CASES[rule_id][outcome][number], THRESHOLDS)
    assert finding.outcome is outcome, finding.message


def test_compliant_account_passes_every_rule() -> None:
    """The compliant factory account passes all rules, so each variant isolates one change."""
    assert {f.outcome for f in evaluate(m.account(), THRESHOLDS)} == {Outcome.PASS}


def test_failure_message_is_built_from_rule_metadata() -> None:
    """A FAIL message carries the rule's title and its remediation for an account."""
    rule = RULES_BY_ID["SN-SHARED-KEY-OFF"]
    finding = rule.evaluate(
        m.account(settings=m.settings(allow_shared_key_access=True)), THRESHOLDS
    )
    assert finding.message.startswith(rule.title)
    assert rule.remediation.account in finding.message


def test_unread_facet_names_the_reason() -> None:
    """A facet left unread makes its rules UNKNOWN with the reader's reason in the message."""
    reason = "role assignments not read (permission: roleAssignments/list)"
    model = m.account(role_assignments=UNKNOWN, unknown_reasons={Facet.ROLES: reason})
    finding = RULES_BY_ID["SN-TAG-WRITE-ROLE"].evaluate(model, THRESHOLDS)
    assert finding.outcome is Outcome.UNKNOWN
    assert reason in finding.message


def test_thresholds_change_the_verdict() -> None:
    """A stricter minimum soft delete turns a passing 14-day retention into a failure."""
    finding = RULES_BY_ID["SN-BLOB-SOFT-DELETE"].evaluate(
        m.account(), Thresholds(min_blob_soft_delete_days=30)
    )
    assert finding.outcome is Outcome.FAIL


def test_container_of_unknown_name_makes_protocol_rules_unknown_not_skipped() -> None:
    """A container whose name is not known yet keeps the protocol rules, answered UNKNOWN."""
    preview = m.account(containers=(Container(UNKNOWN, None),), lifecycle_rules=())
    judged = {f.rule.id: f for f in evaluate(preview, THRESHOLDS)}
    lifecycle = judged["SN-PENDING-LIFECYCLE"]
    assert lifecycle.outcome is Outcome.UNKNOWN
    assert "not known yet" in lifecycle.message
    assert judged["SN-SHARED-KEY-OFF"].outcome is Outcome.PASS


def test_protocol_rules_skip_accounts_without_the_container() -> None:
    """An account known not to hold the protocol's container gets only the hygiene rules."""
    helper = m.account(containers=(Container("deployments", None),), lifecycle_rules=())
    judged = {f.rule.id for f in evaluate(helper, THRESHOLDS)}
    assert "SN-PENDING-LIFECYCLE" not in judged
    assert "SN-SHARED-KEY-OFF" in judged
    assert "SN-PENDING-LIFECYCLE" in {
        f.rule.id for f in evaluate(helper, THRESHOLDS, every_rule=True)
    }


def test_rule_ids_are_unique_and_metadata_complete() -> None:
    """Each rule has a unique id and non-empty title, rationale and remediation."""
    assert len(RULES_BY_ID) == len(RULES)
    assert all(rule.title and rule.rationale and rule.remediation for rule in RULES)


def test_named_deployment_identities_are_exempt_from_the_app_role_rules() -> None:
    """An Owner held by a principal listed in deployment_principal_ids is neither broad nor never-granted."""
    model = m.account(role_assignments=(m.assignment(), m.assignment(m.OWNER, principal_id="ci")))
    assert {f.outcome for f in evaluate(model, THRESHOLDS)} >= {Outcome.FAIL}
    exempt = Thresholds(deployment_principal_ids=("ci",))
    judged = {f.rule.id: f for f in evaluate(model, exempt)}
    for rule_id in ("SN-NO-BROAD-APP-ROLES", "SN-NEVER-GRANTED"):
        assert judged[rule_id].outcome is Outcome.PASS
        assert "deployment identities exempt: ci" in judged[rule_id].message


def test_contributor_is_known_by_its_real_guid() -> None:
    """The built-in Contributor role is recognized by b24988ac-6180-42a0-ab88-20f7382dd24c."""
    role = built_in_role(
        "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/"
        "b24988ac-6180-42a0-ab88-20f7382dd24c"
    )
    assert role is not None
    assert role.name == "Contributor"


def test_every_condition_infra_writes_parses() -> None:
    """Each *_CONDITION constant of blob_safetynet/infra/access.py is a condition the role rules understand."""
    conditions = {k: v for k, v in vars(access).items() if k.endswith("_CONDITION")}
    assert conditions
    assert all(parse_condition(text) is not None for text in conditions.values()), conditions


def test_the_conditions_this_project_writes_parse() -> None:
    """The sweeper's lease condition parses to write/add limited to its lock blob."""
    condition = parse_condition(SWEEPER_CONDITION)
    assert condition is not None
    assert condition.restricts(
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write"
    )
    assert not condition.restricts(TAG_WRITE)
    assert condition.reserved_only(
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action"
    )
    assert parse_condition(UNREADABLE_CONDITION) is None


def test_deployment_identities_match_whatever_the_case_of_the_object_id() -> None:
    """An object id named in upper case exempts the lower-case principal ARM reports."""
    guid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    model = m.account(role_assignments=(m.assignment(), m.assignment(m.OWNER, principal_id=guid)))
    judged = {
        f.rule.id: f.outcome
        for f in evaluate(model, Thresholds(deployment_principal_ids=(guid.upper(),)))
    }
    assert judged["SN-NEVER-GRANTED"] is Outcome.PASS
    assert judged["SN-NO-BROAD-APP-ROLES"] is Outcome.PASS


def test_a_subscription_lock_is_reported_as_the_subscriptions() -> None:
    """A lock at the subscription passes the lock rule under its own scope, never the account's."""
    lock = Lock("estate", "CanNotDelete", LockScope.SUBSCRIPTION)
    finding = RULES_BY_ID["SN-DELETE-LOCK"].evaluate(m.account(locks=Locks((lock,))), THRESHOLDS)
    assert finding.outcome is Outcome.PASS
    assert "CanNotDelete lock 'estate' at the subscription" in finding.message
    assert "at the account" not in finding.message


def test_an_unreadable_lock_scope_is_named_in_the_unknown() -> None:
    """A lock scope that could not be read, with no lock found elsewhere, is UNKNOWN naming it."""
    locks = Locks((), {LockScope.RESOURCE_GROUP: "permission: locks/list at the resource group"})
    finding = RULES_BY_ID["SN-DELETE-LOCK"].evaluate(m.account(locks=locks), THRESHOLDS)
    assert finding.outcome is Outcome.UNKNOWN
    assert "the resource group: permission: locks/list" in finding.message


def test_the_logging_failure_names_the_missing_categories() -> None:
    """A blob diagnostic setting short of a category fails naming exactly the ones missing."""
    model = m.account(blob_diagnostics=(m.blob_logs("StorageRead"),))
    finding = RULES_BY_ID["SN-BLOB-LOGGING"].evaluate(model, THRESHOLDS)
    assert "sends StorageWrite, StorageDelete to a destination" in finding.message
