"""Fill the model from ARM response bodies (the REST JSON shape, `properties` nested).

The audit reads with azure-mgmt-storage / azure-mgmt-authorization and hands the bodies here as
plain dicts, so this adapter is tested on recorded documents and imports no SDK.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from blob_safetynet.policies.adapters import common, nets
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    AccountSettings,
    Facet,
    Fact,
    Lock,
    Locks,
    LockScope,
    Maybe,
    RoleAssignment,
    arm_fold,
)

T = TypeVar("T")

STORAGE_API_VERSION: Final = "2026-09-01"
"""The Microsoft.Storage api-version the audit reads with (pinned; azure-mgmt-storage 25.3's
default). It is also the oldest version this adapter knows to carry
`allowSharedKeyAccessForServices` (the 2024-01-01 REST examples have no such property)."""


def _properties(body: Mapping[str, Any]) -> Mapping[str, Any]:
    props = common.mapping(body.get("properties"))
    return {} if props is UNKNOWN else props


def settings(body: Mapping[str, Any], api_version: str = STORAGE_API_VERSION) -> AccountSettings:
    """From a storage account body read at `api_version`. Absent values take the REST API's
    documented defaults; a property the api-version cannot return at all is UNKNOWN."""
    props = common.mapping(body.get("properties"))
    if props is UNKNOWN:
        return AccountSettings(
            UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, sku=common.sku(body)
        )
    found = common.account_settings(
        common.get_str(body, "kind"),
        props,
        https_key="supportsHttpsTrafficOnly",
        acls_key="networkAcls",
    )
    found = dataclasses.replace(found, sku=common.sku(body))
    if api_version < STORAGE_API_VERSION and "allowSharedKeyAccessForServices" not in props:
        return dataclasses.replace(found, blob_shared_key_access=UNKNOWN)
    return found


def role_assignment(
    body: Mapping[str, Any], definitions: Mapping[str, Mapping[str, Any]]
) -> RoleAssignment:
    """From a role assignment body and the role definition bodies read so far (by id, folded
    by `arm_fold`)."""
    props = _properties(body)
    definition_id = common.get_str(props, "roleDefinitionId")
    definition = (
        definitions.get(arm_fold(definition_id)) if isinstance(definition_id, str) else None
    )
    if definition is None:
        perms: tuple[Maybe[tuple[str, ...]], ...] = (UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN)
        role: Maybe[str] = definition_id if isinstance(definition_id, str) else UNKNOWN
    else:
        definition_props = _properties(definition)
        perms = common.permissions(definition_props.get("permissions"))
        name = common.get_str(definition_props, "roleName")
        role = name if isinstance(name, str) else str(definition_id)
    principal, scope = common.get_str(props, "principalId"), common.get_str(props, "scope")
    actions, not_actions, data_actions, not_data_actions = perms
    return RoleAssignment(
        principal_id=UNKNOWN if principal is None else principal,
        principal_type=common.get_str(props, "principalType"),
        role=role,
        scope=UNKNOWN if scope is None else scope,
        actions=actions,
        not_actions=not_actions,
        data_actions=data_actions,
        not_data_actions=not_data_actions,
        condition=common.get_str(props, "condition"),
    )


@dataclass
class ArmReads:
    """What the audit read for one account; a facet left UNKNOWN says why in `reasons`."""

    account: Mapping[str, Any]
    blob_service_properties: Maybe[Mapping[str, Any]] = UNKNOWN
    containers: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    management_policy: Maybe[Mapping[str, Any] | None] = UNKNOWN
    """None: the account has no management policy (ARM answered 404)."""
    role_assignments: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    role_definitions: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    private_endpoint_connections: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    local_users: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    defender_settings: Maybe[Mapping[str, Any] | None] = UNKNOWN
    """None: the account has no Defender for Storage setting of its own (ARM answered 404)."""
    defender_plan: Maybe[Mapping[str, Any]] = UNKNOWN
    """The subscription's Defender for Storage plan (pricings/StorageAccounts), read when the
    account has no setting of its own; {} when ARM answered 404."""
    defender_covered: bool | None = None
    """Every account of the subscription protected (True) or none (False), as its plan's
    `resourcesCoverageStatus` reports (`common.plan_coverage`): the account's own setting was
    then not read. None: the setting and the plan decide."""
    locks: Maybe[list[Mapping[str, Any]]] = UNKNOWN
    """Every lock body the lock lists returned, whatever their scope (`nets.locks_at` keeps
    the account's, its group's and its subscription's); UNKNOWN: no lock list was read."""
    account_locks: list[Mapping[str, Any]] = field(default_factory=list)
    """Lock bodies known to sit at the account without an id to tell it (a template's)."""
    lock_gaps: dict[LockScope, str] = field(default_factory=dict)
    """The scopes whose lock list could not be read, with why."""
    diagnostic_settings: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    """The blob service's diagnostic settings."""
    backup_instances: Maybe[Sequence[Mapping[str, Any]]] = UNKNOWN
    """Backup instances; those whose data source is not this account's blobs are left out."""
    reasons: dict[Facet, str] = field(default_factory=dict)
    not_held: set[Fact] = field(default_factory=set)
    """What the source cannot hold (`Account.not_held`); empty for ARM itself."""
    api_version: str = STORAGE_API_VERSION
    """The Microsoft.Storage api-version the bodies were read with."""


def account(reads: ArmReads) -> Account:
    """The model of one account from what was read."""
    body = reads.account
    name = common.get_str(body, "name")
    resource_id = common.get_str(body, "id")
    containers: Maybe[tuple[Any, ...]] = UNKNOWN
    if reads.containers is not UNKNOWN:
        containers = tuple(
            common.container(_name(item), _properties(item)) for item in reads.containers
        )
    lifecycle: Maybe[tuple[Any, ...]] = UNKNOWN
    if reads.management_policy is None:
        lifecycle = ()
    elif reads.management_policy is not UNKNOWN:
        lifecycle = common.lifecycle_rules(_properties(reads.management_policy).get("policy"))
    roles: Maybe[tuple[RoleAssignment, ...]] = UNKNOWN
    if reads.role_assignments is not UNKNOWN:
        roles = tuple(
            role_assignment(item, reads.role_definitions) for item in reads.role_assignments
        )
    account_id = resource_id if isinstance(resource_id, str) else None
    return Account(
        name=name if isinstance(name, str) else "<unnamed>",
        resource_id=account_id,
        settings=settings(body, reads.api_version),
        blob_service_properties=(
            UNKNOWN
            if reads.blob_service_properties is UNKNOWN
            else common.blob_service_properties(_properties(reads.blob_service_properties))
        ),
        containers=containers,
        lifecycle_rules=lifecycle,
        role_assignments=roles,
        private_endpoints=_each(reads.private_endpoint_connections, common.private_endpoint_status),
        local_users=_each(reads.local_users, _name),
        defender_enabled=(
            _defender(reads.defender_settings, reads.defender_plan)
            if reads.defender_covered is None
            else reads.defender_covered
        ),
        locks=_locks(reads, resource_id),
        blob_diagnostics=_each_named(reads.diagnostic_settings, nets.diagnostic_setting),
        backup_instances=_each_named(
            reads.backup_instances,
            nets.backup_instance,
            keep=lambda props: nets.backs_up(props, account_id, str(name)) is not False,
        ),
        unknown_reasons=dict(reads.reasons),
        not_held=frozenset(reads.not_held),
    )


def _locks(reads: ArmReads, resource_id: object) -> Maybe[Locks]:
    """The locks that apply to the account, each once, and the scopes not read."""
    if reads.locks is UNKNOWN:
        return UNKNOWN
    found: dict[tuple[LockScope, str], Lock] = {}
    listed = nets.locks_at(reads.locks, resource_id) if isinstance(resource_id, str) else []
    own = [nets.lock(body, LockScope.ACCOUNT) for body in reads.account_locks]
    for lock in [*own, *listed]:
        found.setdefault((lock.scope, arm_fold(str(lock.name))), lock)
    return Locks(tuple(found.values()), dict(reads.lock_gaps))


def _each(items: Maybe[Sequence[Mapping[str, Any]]], read: Any) -> Maybe[tuple[Any, ...]]:
    return UNKNOWN if items is UNKNOWN else tuple(read(item) for item in items)


def _each_named(
    items: Maybe[Sequence[Mapping[str, Any]]],
    read: Callable[[Mapping[str, Any], object], T],
    keep: Callable[[Mapping[str, Any]], bool] = lambda props: True,
) -> Maybe[tuple[T, ...]]:
    """`read` of each item's `properties` and `name`, for the items whose properties `keep`
    takes."""
    if items is UNKNOWN:
        return UNKNOWN
    return tuple(
        read(_properties(item), item.get("name")) for item in items if keep(_properties(item))
    )


def _defender(
    settings: Maybe[Mapping[str, Any] | None], plan: Maybe[Mapping[str, Any]]
) -> Maybe[bool]:
    """The account's own setting decides; without one, the subscription's plan does."""
    if settings is None:
        return UNKNOWN if plan is UNKNOWN else common.plan_enabled(plan)
    return UNKNOWN if settings is UNKNOWN else common.defender_enabled(settings)


def _name(body: Mapping[str, Any]) -> Maybe[str]:
    name = common.get_str(body, "name")
    return UNKNOWN if name is None else name
