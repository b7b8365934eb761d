"""Fill the model from azure-native resource inputs (camelCase, no `properties` nesting).

Used by the CrossGuard pack and by tests over the infra program. Values Pulumi does not know
yet arrive as its "unknown" sentinel strings; they become UNKNOWN here. Imports no SDK: the pack
turns CrossGuard's property proxies into plain dicts before calling in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from blob_safetynet.policies.adapters import common, pulumi_nets
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    AccountSettings,
    BlobService,
    Container,
    LifecycleRule,
    Maybe,
    RoleAssignment,
    arm_fold,
)
from blob_safetynet.policies.rules.roles import (
    RoleDefinition,
    built_in_role,
    is_management_group,
    normalize_scope,
)

STORAGE_ACCOUNT: Final = "azure-native:storage:StorageAccount"
BLOB_SERVICE: Final = "azure-native:storage:BlobServiceProperties"
BLOB_CONTAINER: Final = "azure-native:storage:BlobContainer"
IMMUTABILITY_POLICY: Final = "azure-native:storage:BlobContainerImmutabilityPolicy"
MANAGEMENT_POLICY: Final = "azure-native:storage:ManagementPolicy"
ROLE_ASSIGNMENT: Final = "azure-native:authorization:RoleAssignment"
ROLE_DEFINITION: Final = "azure-native:authorization:RoleDefinition"
PRIVATE_ENDPOINT: Final = "azure-native:network:PrivateEndpoint"
LOCAL_USER: Final = "azure-native:storage:LocalUser"
DEFENDER_FOR_STORAGE: Final = "azure-native:security:DefenderForStorage"
PRICING: Final = "azure-native:security:Pricing"
POLICY_ASSIGNMENT: Final = "azure-native:authorization:PolicyAssignment"

UNKNOWN_SENTINELS: Final = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)
"""The Pulumi engine's markers for values unknown during preview (pulumi_policy.proxy)."""

_GUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def resolve_unknowns(value: Any) -> Any:
    """A copy of `value` with every Pulumi unknown sentinel replaced by UNKNOWN."""
    if isinstance(value, str) and value in UNKNOWN_SENTINELS:
        return UNKNOWN
    if isinstance(value, Mapping):
        return {key: resolve_unknowns(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [resolve_unknowns(item) for item in value]
    return value


@dataclass(frozen=True)
class StackResource:
    """One resource of a Pulumi stack, as the pack (or a mock test) sees it."""

    type: str
    name: str
    props: Mapping[str, Any]
    """camelCase inputs (plain dicts and lists; unknown sentinels allowed)."""
    parent: str | None = None
    """Name or URN of the parent resource, if any."""
    id: str | None = None
    """The resource's id when known (an output; mock tests know it)."""


def settings(props: Mapping[str, Any]) -> AccountSettings:
    """From StorageAccount inputs; absent values take the REST API's documented defaults."""
    props = resolve_unknowns(props)
    found = common.account_settings(
        common.get_str(props, "kind"),
        props,
        https_key="enableHttpsTrafficOnly",
        acls_key="networkRuleSet",
    )
    return dataclasses.replace(found, sku=common.sku(props))


def blob_service_properties(props: Mapping[str, Any]) -> BlobService:
    return common.blob_service_properties(resolve_unknowns(props))


def container(props: Mapping[str, Any]) -> Container:
    props = resolve_unknowns(props)
    name = common.get_str(props, "containerName")
    if name is None:
        name = common.get_str(props, "name")  # outputs carry the name, not `containerName`
    return common.container(UNKNOWN if name is None else name, props, read_only_absent=False)


def lifecycle_rules(props: Mapping[str, Any]) -> Maybe[tuple[LifecycleRule, ...]]:
    return common.lifecycle_rules(resolve_unknowns(props).get("policy"))


def account_name(resource: StackResource) -> str:
    """A StorageAccount's name: `accountName` (inputs), `name` (outputs), or the resource's."""
    props = resolve_unknowns(resource.props)
    for key in ("accountName", "name"):
        if isinstance(props.get(key), str):
            return str(props[key])
    return resource.name


def account_from_resource(resource: StackResource) -> Account:
    """A model with only the account's own settings (for a resource policy)."""
    return Account(name=account_name(resource), settings=settings(resource.props))


def container_as_account(resource: StackResource) -> Account:
    """A model with only this one container (for a resource policy on a container)."""
    name = resolve_unknowns(resource.props).get("accountName")
    return Account(
        name=name if isinstance(name, str) else resource.name,
        containers=(container(resource.props),),
    )


def _role_definitions(resources: Sequence[StackResource]) -> dict[str, RoleDefinition]:
    """Custom role definitions declared in the stack, by lower-case id (when known)."""
    found: dict[str, RoleDefinition] = {}
    for resource in resources:
        key = _definition_key(resource) if resource.type == ROLE_DEFINITION else None
        if key is None:
            continue
        props = resolve_unknowns(resource.props)
        perms = common.permissions(props.get("permissions"))
        if any(part is UNKNOWN for part in perms):
            continue
        role_name = props.get("roleName")
        actions, not_actions, data_actions, not_data_actions = (
            part if part is not UNKNOWN else () for part in perms
        )
        found[key] = RoleDefinition(
            name=role_name if isinstance(role_name, str) else resource.name,
            actions=actions,
            not_actions=not_actions,
            data_actions=data_actions,
            not_data_actions=not_data_actions,
        )
    return found


def _guid(value: object) -> str | None:
    """The GUID a role definition id ends with (or the value itself, if it is one)."""
    if not isinstance(value, str):
        return None
    last = arm_fold(value.rstrip("/").rsplit("/", 1)[-1])
    return last if _GUID.fullmatch(last) else None


def _definition_key(resource: StackResource) -> str | None:
    """How assignments find a custom role of the stack: its GUID, from the id when known, else
    from the `name` output (a stack policy sees outputs; `id` may be absent) or the
    `roleDefinitionId` input."""
    props = resolve_unknowns(resource.props)
    for candidate in (resource.id, props.get("name"), props.get("roleDefinitionId")):
        guid = _guid(candidate)
        if guid is not None:
            return guid
    return None


def role_assignment(
    props: Mapping[str, Any], definitions: Mapping[str, RoleDefinition]
) -> RoleAssignment:
    props = resolve_unknowns(props)
    definition_id = props.get("roleDefinitionId")
    definition = None
    if isinstance(definition_id, str):
        guid = _guid(definition_id)
        custom = definitions.get(guid) if guid is not None else None
        definition = custom or built_in_role(definition_id)
    principal, scope = props.get("principalId"), props.get("scope")
    principal_type = common.get_str(props, "principalType")
    condition = common.get_str(props, "condition")
    if definition is None:
        return RoleAssignment(
            principal_id=principal if isinstance(principal, str) else UNKNOWN,
            principal_type=principal_type,
            role=definition_id if isinstance(definition_id, str) else UNKNOWN,
            scope=scope if isinstance(scope, str) else UNKNOWN,
            actions=UNKNOWN,
            not_actions=UNKNOWN,
            data_actions=UNKNOWN,
            not_data_actions=UNKNOWN,
            condition=condition,
        )
    return RoleAssignment(
        principal_id=principal if isinstance(principal, str) else UNKNOWN,
        principal_type=principal_type,
        role=definition.name,
        scope=scope if isinstance(scope, str) else UNKNOWN,
        actions=definition.actions,
        not_actions=definition.not_actions,
        data_actions=definition.data_actions,
        not_data_actions=definition.not_data_actions,
        condition=condition,
    )


def _owner(resource: StackResource, accounts: Sequence[StackResource]) -> StackResource | None:
    """The account a child resource (blob service, container, policy) belongs to.

    By id (a child's id extends its account's), else by `accountName` when known, else by
    sharing a parent with exactly one account, else the only account of the stack.
    """
    if resource.id is not None:
        prefix = normalize_scope(resource.id)
        for account in accounts:
            if account.id is not None and prefix.startswith(normalize_scope(account.id) + "/"):
                return account
    name = resolve_unknowns(resource.props).get("accountName")
    if isinstance(name, str):
        matches = [a for a in accounts if account_name(a) == name]
        if len(matches) == 1:
            return matches[0]
    siblings = [a for a in accounts if resource.parent is not None and a.parent == resource.parent]
    if len(siblings) == 1:
        return siblings[0]
    return accounts[0] if len(accounts) == 1 else None


def policy_assignment_principals(resources: Sequence[StackResource]) -> tuple[str, ...]:
    """The principal ids of the stack's Azure Policy assignments' system-assigned identities.

    Such an identity applies the assignment's Modify remediations and needs the role its
    definitions name ("the managed identity ... needs to be granted the roles",
    https://learn.microsoft.com/azure/governance/policy/how-to/remediate-resources): a
    governance identity created beside the account, judged like a deployment identity."""
    found = []
    for resource in resources:
        if resource.type != POLICY_ASSIGNMENT:
            continue
        identity = resource.props.get("identity")
        principal = identity.get("principalId") if isinstance(identity, Mapping) else None
        if isinstance(principal, str) and principal not in UNKNOWN_SENTINELS:
            found.append(principal)
    return tuple(found)


def accounts_from_stack(resources: Sequence[StackResource]) -> list[Account]:
    """One full model per StorageAccount of the stack.

    A facet whose resource is absent takes the Azure default: no BlobServiceProperties means
    soft delete off, no ManagementPolicy means no lifecycle rules. Role assignments belong to
    an account when their scope is the account, one of its containers, or above the account;
    one whose scope is not known yet is kept (it may be this account's) and makes the rules
    that depend on its scope UNKNOWN.
    """
    accounts = [r for r in resources if r.type == STORAGE_ACCOUNT]
    children: dict[int, dict[str, list[StackResource]]] = {
        index: {kind: [] for kind in _CHILDREN} for index in range(len(accounts))
    }
    for resource in resources:
        if resource.type in _CHILDREN:
            owner = _owner(resource, accounts)
            if owner is not None:
                children[accounts.index(owner)][resource.type].append(resource)
    definitions = _role_definitions(resources)
    assignments = [r for r in resources if r.type == ROLE_ASSIGNMENT]
    return [
        _with_attachments(
            _account(account, children[index], assignments, definitions),
            account,
            accounts,
            resources,
        )
        for index, account in enumerate(accounts)
    ]


_CHILDREN: Final = (BLOB_SERVICE, BLOB_CONTAINER, MANAGEMENT_POLICY, IMMUTABILITY_POLICY)


def _with_worm_policies(
    containers: Sequence[StackResource], policies: Sequence[StackResource]
) -> tuple[Container, ...]:
    """The program's containers, each with the immutability policies the program declares on it
    (a BlobContainerImmutabilityPolicy names its container by `containerName`); a policy whose
    container is not known yet may be any container's."""
    named = [_policy_container(policy) for policy in policies]
    found = []
    for resource in containers:
        model = container(resource.props)
        if any(name == model.name for name in named):
            model = dataclasses.replace(model, worm_policy=True)
        elif any(not isinstance(name, str) for name in named):
            model = dataclasses.replace(model, worm_policy=UNKNOWN)
        found.append(model)
    return tuple(found)


def _policy_container(policy: StackResource) -> object:
    """The container an immutability policy is on: its `containerName` input, else (a stack
    policy sees outputs, which may lack it) the container its id names."""
    name = resolve_unknowns(policy.props).get("containerName")
    if isinstance(name, str) or policy.id is None:
        return name
    parts = policy.id.rstrip("/").split("/")
    folded = [arm_fold(part) for part in parts]
    if "containers" in folded and folded.index("containers") + 1 < len(parts):
        return parts[folded.index("containers") + 1]
    return name


def _targets(value: object, account: StackResource, name: str) -> bool | None:
    """Whether a resource id input names `account`; None while it is not known."""
    if value is UNKNOWN:
        return None
    if not isinstance(value, str):
        return False
    ids = {normalize_scope(account.id)} if account.id is not None else set()
    return _scope_is_account(value, name, ids)


def _endpoint_statuses(
    endpoint: Mapping[str, Any], account: StackResource, name: str
) -> list[Maybe[str]]:
    """A connection through an automatic link is approved on creation when the deployer may
    approve it, a manual one waits ("Pending"): https://learn.microsoft.com/azure/private-link/private-endpoint-overview#access-to-a-private-link-resource-using-approval-workflow."""
    statuses: list[Maybe[str]] = []
    for key, status in (
        ("privateLinkServiceConnections", "Approved"),
        ("manualPrivateLinkServiceConnections", "Pending"),
    ):
        links = endpoint.get(key)
        if links is UNKNOWN:
            statuses.append(UNKNOWN)
            continue
        for link in links or ():
            data = common.mapping(link)
            target = (
                None
                if data is UNKNOWN
                else _targets(data.get("privateLinkServiceId"), account, name)
            )
            if target is not False:
                statuses.append(status if target else UNKNOWN)
    return statuses


def _stack_plan(resources: Sequence[StackResource]) -> Maybe[bool]:
    """The stack's Defender for Storage plan (a Pricing named StorageAccounts), or UNKNOWN."""
    for resource in resources:
        props = resolve_unknowns(resource.props)
        if resource.type == PRICING and props.get("pricingName") == "StorageAccounts":
            return common.plan_enabled({"properties": props})
    return UNKNOWN


def _with_attachments(
    model: Account,
    account: StackResource,
    accounts: Sequence[StackResource],
    resources: Sequence[StackResource],
) -> Account:
    """Private endpoints, local users, the Defender for Storage setting and the nets beside
    the account (`pulumi_nets`) aimed at the account. Without a DefenderForStorage resource of its own, a StorageAccounts Pricing
    resource of the stack decides; with neither, Defender stays UNKNOWN (a plan outside the
    stack may cover the account)."""
    endpoints: list[Maybe[str]] = []
    users: list[str] = []
    defender: Maybe[bool] = _stack_plan(resources)
    for resource in resources:
        props = resolve_unknowns(resource.props)
        if resource.type == PRIVATE_ENDPOINT:
            endpoints.extend(_endpoint_statuses(props, account, model.name))
        elif resource.type == LOCAL_USER and _owner(resource, accounts) is account:
            user = props.get("username", props.get("name", resource.name))
            users.append(user if isinstance(user, str) else resource.name)
        elif (
            resource.type == DEFENDER_FOR_STORAGE
            and _targets(props.get("resourceId"), account, model.name) is not False
        ):
            defender = common.defender_enabled(props)
    nets = pulumi_nets.attachments(account, model.name, resources, resolve_unknowns)
    reasons = {**model.unknown_reasons, **nets.pop("unknown_reasons")}
    return dataclasses.replace(
        model,
        private_endpoints=tuple(endpoints),
        local_users=tuple(users),
        defender_enabled=defender,
        unknown_reasons=reasons,
        **nets,
    )


def _resolved_name(account: StackResource, children: Mapping[str, list[StackResource]]) -> str:
    """The account's name, or the `accountName` its children use when its own is autonamed."""
    props = resolve_unknowns(account.props)
    if isinstance(props.get("accountName"), str) or isinstance(props.get("name"), str):
        return account_name(account)
    for kind in (BLOB_CONTAINER, BLOB_SERVICE, MANAGEMENT_POLICY):
        for child in children[kind]:
            name = resolve_unknowns(child.props).get("accountName")
            if isinstance(name, str):
                return name
    return account.name


def _scope_is_account(scope: str, name: str, ids: set[str]) -> bool:
    """`scope` is the account (by id, or by `/storageAccounts/<name>`) or lies inside it."""
    normalized = normalize_scope(scope)
    if any(normalized == known or normalized.startswith(known + "/") for known in ids):
        return True
    marker = f"/providers/microsoft.storage/storageaccounts/{arm_fold(name)}"
    return normalized.endswith(marker) or f"{marker}/" in normalized


def _account(
    account: StackResource,
    children: Mapping[str, list[StackResource]],
    assignments: Sequence[StackResource],
    definitions: Mapping[str, RoleDefinition],
) -> Account:
    name = _resolved_name(account, children)
    services = children[BLOB_SERVICE]
    policies = children[MANAGEMENT_POLICY]
    service: Maybe[BlobService] = common.blob_service_properties({})
    if services:
        service = blob_service_properties(services[-1].props)
    lifecycle: Maybe[tuple[LifecycleRule, ...]] = ()
    if policies:
        lifecycle = lifecycle_rules(policies[-1].props)
    containers = children[BLOB_CONTAINER]
    ids = {normalize_scope(account.id)} if account.id is not None else set()
    roles: list[RoleAssignment] = []
    for resource in assignments:
        scope = resolve_unknowns(resource.props).get("scope")
        if (
            not isinstance(scope, str)
            or _scope_is_account(scope, name, ids)
            or _above_accounts(scope)
        ):
            roles.append(role_assignment(resource.props, definitions))
    return Account(
        name=name,
        settings=settings(account.props),
        blob_service_properties=service,
        containers=_with_worm_policies(containers, children[IMMUTABILITY_POLICY]),
        lifecycle_rules=lifecycle,
        role_assignments=tuple(roles),
    )


def _above_accounts(scope: str) -> bool:
    """A management group, subscription or resource group scope (it covers every account in
    it; which management groups hold the stack's subscription cannot be told from ids)."""
    parts = normalize_scope(scope).strip("/").split("/")
    return is_management_group(scope) or (parts[0] == "subscriptions" and len(parts) in (2, 4))
