"""Each rule's Azure Policy form, or why it has none.

A form is built from the rule's own constants and threshold defaults (`Thresholds`), and its
condition says when a resource is NOT compliant (the `if` of an Audit/Deny/Modify definition):
change a threshold or an allowed value in the rule module and the definition changes with it.
`tests/policies/test_azure_policy.py` holds every form to its rule on the recorded ARM bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from blob_safetynet.policies.governance import aliases as a
from blob_safetynet.policies.governance.language import (
    Condition,
    all_of,
    any_of,
    field,
    not_,
    not_switched,
    parameter,
)
from blob_safetynet.policies.rules import RULES, Rule
from blob_safetynet.policies.rules.access import (
    NEVER_GRANTED_ACTIONS,
    NO_BROAD_APP_ROLES,
    TAG_WRITE_ROLE,
)
from blob_safetynet.policies.rules.account import (
    ACCOUNT_KIND,
    FLAT_NAMESPACE,
    HTTPS_TLS,
    MIN_TLS,
    NO_PUBLIC_ACCESS,
    SHARED_KEY_OFF,
    TLS_VERSIONS,
)
from blob_safetynet.policies.rules.containers import CONTAINERS_PRIVATE
from blob_safetynet.policies.rules.credentials import (
    KEY_EXPIRATION_POLICY,
    NO_LOCAL_USERS,
    SAS_EXPIRATION_POLICY,
)
from blob_safetynet.policies.rules.data_protection import (
    BLOB_SOFT_DELETE,
    CONTAINER_SOFT_DELETE,
    NO_PERMANENT_DELETE,
    SOFT_DELETE_DAYS,
    VERSION_EXPIRY,
)
from blob_safetynet.policies.rules.encryption import CMK_ENCRYPTION, INFRA_ENCRYPTION, KEY_VAULT
from blob_safetynet.policies.rules.lifecycle import PENDING_LIFECYCLE
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.rules.nets import BACKUP_PROTECTED, BLOB_LOGGING, DELETE_LOCK
from blob_safetynet.policies.rules.network import (
    CLOSED_PUBLIC_ACCESS,
    DENY,
    NETWORK_DEFAULT_DENY,
    PRIVATE_ENDPOINT,
    PUBLIC_NETWORK_ACCESS,
    TRUSTED_BYPASS,
    TRUSTED_SERVICES,
)
from blob_safetynet.policies.rules.resilience import (
    BLOB_VERSIONING,
    GEO_REDUNDANCY,
    GEO_SKUS,
    POINT_IN_TIME,
    PROTOCOL_CONTAINER_MUTABLE,
)
from blob_safetynet.policies.rules.threats import CROSS_TENANT_REPLICATION, DEFENDER_FOR_STORAGE

DEFAULTS: Final = Thresholds()

STORAGE_ACCOUNT_CONTRIBUTOR: Final = (
    "/providers/Microsoft.Authorization/roleDefinitions/17d1049b-9a84-46fb-8f53-869881c3d3ab"
)
"""The role Microsoft's own Modify built-ins give their remediation identity for account and
blob service settings (e.g. a06d0189 "Configure storage accounts to disable public network
access", `StoragePublicNetworkAccess_Modify.json` in Azure/azure-policy)."""


@dataclass(frozen=True)
class Parameter:
    """A threshold the assignment may set; named as the CrossGuard pack's config key."""

    name: str
    type: str
    default: int | str
    description: str
    allowed: tuple[int, ...] = ()
    """The values an assignment may give (`allowedValues`; none: any of the type). An Integer
    parameter has no minimum or maximum: `schema` validates Object parameters only
    (https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-parameters)."""


MIN_BLOB_SOFT_DELETE_DAYS: Final = Parameter(
    "minBlobSoftDeleteDays",
    "Integer",
    DEFAULTS.min_blob_soft_delete_days,
    "Fewest days blob soft delete must keep a deleted blob (1-365, what Azure can keep)",
    allowed=tuple(SOFT_DELETE_DAYS),
)
MAX_KEY_EXPIRATION_DAYS: Final = Parameter(
    "maxKeyExpirationDays",
    "Integer",
    DEFAULTS.max_key_expiration_days,
    "Longest account key validity the key expiration policy may allow",
)


@dataclass(frozen=True)
class Operation:
    """One Modify `addOrReplace` operation: the compliant value of a modifiable alias."""

    alias: a.Alias
    value: object


@dataclass(frozen=True)
class PolicyForm:
    rule: Rule
    resource_type: str
    non_compliant: Condition
    parameters: tuple[Parameter, ...] = ()
    modify: tuple[Operation, ...] = ()
    """The operations of a Modify remediation; empty when the setting cannot be set in place."""
    remediation_role: str = STORAGE_ACCOUNT_CONTRIBUTOR
    """The role the assignment's managed identity needs to apply `modify`."""

    @property
    def aliases(self) -> tuple[a.Alias, ...]:
        names = dict.fromkeys(_alias_names(self.non_compliant))
        return tuple(a.ALIASES[name] for name in names)


@dataclass(frozen=True)
class NotExpressible:
    rule: Rule
    reason: str


def _alias_names(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["field"]] if node.get("field") in a.ALIASES else []
        return found + [name for value in node.values() for name in _alias_names(value)]
    if isinstance(node, list):
        return [name for item in node for name in _alias_names(item)]
    return []


_STRONG_TLS = list(TLS_VERSIONS[TLS_VERSIONS.index(MIN_TLS) :])

FORMS: Final[tuple[PolicyForm, ...]] = (
    PolicyForm(
        BLOB_SOFT_DELETE,
        a.BLOB_SERVICE_TYPE,
        any_of(
            not_switched(a.BLOB_SOFT_DELETE_ENABLED, True, absent_means=False),
            field(a.BLOB_SOFT_DELETE_DAYS, "exists", False),
            field(a.BLOB_SOFT_DELETE_DAYS, "less", parameter(MIN_BLOB_SOFT_DELETE_DAYS.name)),
        ),
        parameters=(MIN_BLOB_SOFT_DELETE_DAYS,),
        modify=(
            Operation(a.BLOB_SOFT_DELETE_ENABLED, True),
            Operation(a.BLOB_SOFT_DELETE_DAYS, parameter(MIN_BLOB_SOFT_DELETE_DAYS.name)),
        ),
    ),
    PolicyForm(
        NO_PUBLIC_ACCESS,
        a.ACCOUNT_TYPE,
        not_switched(a.ALLOW_BLOB_PUBLIC_ACCESS, False, absent_means=True),
        modify=(Operation(a.ALLOW_BLOB_PUBLIC_ACCESS, False),),
    ),
    PolicyForm(
        HTTPS_TLS,
        a.ACCOUNT_TYPE,
        any_of(
            not_switched(a.SUPPORTS_HTTPS_ONLY, True, absent_means=True),
            not_(field(a.MINIMUM_TLS_VERSION, "in", _STRONG_TLS)),
        ),
    ),
    PolicyForm(
        PUBLIC_NETWORK_ACCESS,
        a.ACCOUNT_TYPE,
        not_(field(a.PUBLIC_NETWORK_ACCESS, "in", list(CLOSED_PUBLIC_ACCESS))),
        modify=(Operation(a.PUBLIC_NETWORK_ACCESS, CLOSED_PUBLIC_ACCESS[0]),),
    ),
    PolicyForm(
        NETWORK_DEFAULT_DENY,
        a.ACCOUNT_TYPE,
        not_(field(a.NETWORK_DEFAULT_ACTION, "equals", DENY)),
    ),
    PolicyForm(
        TRUSTED_SERVICES,
        a.ACCOUNT_TYPE,
        all_of(
            field(a.NETWORK_BYPASS, "exists", True),
            field(a.NETWORK_BYPASS, "notContains", TRUSTED_BYPASS),
        ),
    ),
    PolicyForm(
        CROSS_TENANT_REPLICATION,
        a.ACCOUNT_TYPE,
        not_switched(a.CROSS_TENANT_REPLICATION, False, absent_means=True),
    ),
    PolicyForm(
        INFRA_ENCRYPTION,
        a.ACCOUNT_TYPE,
        not_switched(a.INFRASTRUCTURE_ENCRYPTION, True, absent_means=False),
    ),
    PolicyForm(
        CMK_ENCRYPTION,
        a.ACCOUNT_TYPE,
        not_(field(a.KEY_SOURCE, "equals", KEY_VAULT)),
    ),
    PolicyForm(
        KEY_EXPIRATION_POLICY,
        a.ACCOUNT_TYPE,
        any_of(
            field(a.KEY_EXPIRATION_DAYS, "exists", False),
            field(a.KEY_EXPIRATION_DAYS, "greater", parameter(MAX_KEY_EXPIRATION_DAYS.name)),
        ),
        parameters=(MAX_KEY_EXPIRATION_DAYS,),
    ),
    PolicyForm(
        GEO_REDUNDANCY,
        a.ACCOUNT_TYPE,
        not_(field(a.SKU_NAME, "in", list(GEO_SKUS))),
    ),
    PolicyForm(
        BLOB_VERSIONING,
        a.BLOB_SERVICE_TYPE,
        not_switched(a.VERSIONING_ENABLED, True, absent_means=False),
        modify=(Operation(a.VERSIONING_ENABLED, True),),
    ),
)
"""The rules Azure Policy can express, in catalogue order of their rules."""

_PROTOCOL = (
    "judges only accounts that hold or are configured for the protocol's container; a policy "
    "condition sees one resource, and an account's containers and lifecycle rules are other "
    "resources, so assigned at a management group it would judge every account"
)
_ROLES = (
    "judges role assignments and their definitions (other resources, at other scopes); Azure "
    "Policy conditions read the evaluated resource's own properties"
)

NOT_EXPRESSIBLE: Final[tuple[NotExpressible, ...]] = (
    NotExpressible(
        CONTAINER_SOFT_DELETE,
        "its floor reads containerDeleteRetentionPolicy.days, and no Microsoft built-in uses an "
        "alias for it (9fbd64e3 sets it only through its deployment template), so its alias "
        "could not be verified; a condition on the enabled switch alone passes a one-day "
        "retention the rule fails",
    ),
    NotExpressible(
        NO_PERMANENT_DELETE,
        "no Microsoft built-in uses an alias for deleteRetentionPolicy.allowPermanentDelete, so "
        "its alias could not be verified",
    ),
    NotExpressible(
        PENDING_LIFECYCLE,
        f"{_PROTOCOL}; the management policy's blobIndexMatch filters have no alias found in "
        "Microsoft's built-ins, and an account without any management policy has no resource "
        "to evaluate",
    ),
    NotExpressible(FLAT_NAMESPACE, _PROTOCOL),
    NotExpressible(ACCOUNT_KIND, _PROTOCOL),
    NotExpressible(
        SHARED_KEY_OFF,
        "the per-service switch allowSharedKeyAccessForServices.blob has no alias found in "
        "Microsoft's built-ins; a condition on allowSharedKeyAccess alone passes an account "
        "whose blob service still accepts shared key, which the rule fails",
    ),
    NotExpressible(
        CONTAINERS_PRIVATE,
        "no Microsoft built-in uses an alias for a container's publicAccess, so its alias could "
        "not be verified (NO_PUBLIC_ACCESS, which closes every container at once, is exported)",
    ),
    NotExpressible(TAG_WRITE_ROLE, _ROLES),
    NotExpressible(NO_BROAD_APP_ROLES, _ROLES),
    NotExpressible(NEVER_GRANTED_ACTIONS, _ROLES),
    NotExpressible(
        VERSION_EXPIRY,
        "joins the blob service (versioning) with the lifecycle policy, two resources; a "
        "condition reads one",
    ),
    NotExpressible(
        PRIVATE_ENDPOINT,
        "the audit reads the privateEndpointConnections list; the alias over the account "
        "body's copy of it is not among Microsoft's built-ins found",
    ),
    NotExpressible(
        SAS_EXPIRATION_POLICY,
        "sasPolicy.sasExpirationPeriod is a D.HH:MM:SS string; policy conditions compare it as "
        "text, not as a duration, so '0.01:00:00' against a maximum in seconds cannot be written",
    ),
    NotExpressible(
        NO_LOCAL_USERS,
        "with isLocalUserEnabled unset the verdict depends on the account's localUsers child "
        "resources, which a condition on the account cannot see",
    ),
    NotExpressible(
        DEFENDER_FOR_STORAGE,
        "the plan is a subscription resource (Microsoft.Security/pricings) or a "
        "defenderForStorageSettings extension resource, not a property of the account",
    ),
    NotExpressible(
        POINT_IN_TIME,
        "no Microsoft built-in uses an alias for restorePolicy or changeFeed, so their aliases "
        "could not be verified",
    ),
    NotExpressible(
        PROTOCOL_CONTAINER_MUTABLE,
        f"{_PROTOCOL}; a container's hasImmutabilityPolicy and hasLegalHold are read-only "
        "flags no Microsoft built-in names",
    ),
    NotExpressible(
        DELETE_LOCK,
        "a lock is a Microsoft.Authorization/locks resource at the account, its resource group "
        "or its subscription, not a property of the account; the export writes conditions on "
        "the account's own properties (Audit, Deny, Modify), and an AuditIfNotExists on the "
        "account would miss the locks of the scopes above it, which protect it as well",
    ),
    NotExpressible(
        BLOB_LOGGING,
        "the diagnostic setting is a Microsoft.Insights extension resource of the blob service, "
        "not a property of it; judging it takes an AuditIfNotExists over related resources "
        "with an existenceCondition on its logs, outside the conditions the export writes",
    ),
    NotExpressible(
        BACKUP_PROTECTED,
        "a backup instance is a resource of a Backup vault (Microsoft.DataProtection), not of "
        "the account; assign Microsoft's built-in AuditIfNotExists '[Preview]: Azure Backup "
        "should be enabled for Blobs in Storage Accounts' "
        "(https://learn.microsoft.com/azure/storage/common/policy-reference) instead",
    ),
)
"""The rules Azure Policy cannot express, each with why."""


def coverage_problems() -> list[str]:
    """Rules with no form and no reason, or with both (empty when every rule has one)."""
    exported = [form.rule.id for form in FORMS]
    listed = [item.rule.id for item in NOT_EXPRESSIBLE]
    every = [rule.id for rule in RULES]
    problems = [
        f"{rule} has no Azure Policy form and no reason"
        for rule in every
        if rule not in exported + listed
    ]
    problems += [f"{rule} is both exported and listed" for rule in set(exported) & set(listed)]
    return problems
