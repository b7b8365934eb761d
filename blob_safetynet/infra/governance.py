"""`SafetyNetGovernance`: Azure Policy definitions, their initiative and its assignment.

Optional, beside `SafetyNetStorage`. It registers the documents it is given, as ARM takes them:
the definitions and initiative `blob_safetynet.policies.governance.export` builds from the rules
(the files `safetynet policy export` writes), so a program passes
`export.definitions(scope)` and `export.initiative(scope)`; this package imports no rules.
Everything it checks it reads from those documents: an assigned value must be one the
initiative allows, and only an effect that remediates (Modify, DeployIfNotExists) gives the
assignment a system-assigned identity and grants it the roles its definitions name in
`roleDefinitionIds` ("the managed identity ... needs to be granted the roles",
https://learn.microsoft.com/azure/governance/policy/how-to/remediate-resources).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
from pulumi_azure_native import authorization

from blob_safetynet.settings.vocabulary import policy_scope_problem

MANAGEMENT_GROUP_PREFIX: Final = "/providers/Microsoft.Management/managementGroups/"
REMEDIATING_EFFECTS: Final = frozenset({"modify", "deployifnotexists"})
ASSIGNMENT_NAME_LIMIT: Final = 24
"""The longest assignment name a management group scope takes
(https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftauthorization)."""
_PARAMETER = re.compile(r"\[parameters\('([A-Za-z0-9_]+)'\)\]")


class GovernanceArgsError(ValueError):
    """An argument of `SafetyNetGovernanceArgs` ARM or the initiative would refuse."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        super().__init__(f"SafetyNetGovernanceArgs.{key}: {problem}")


@dataclass(frozen=True)
class SafetyNetGovernanceArgs:
    """Inputs of `SafetyNetGovernance`. Required: the scope the definitions live in and the
    assignment applies to, the location of the assignment's identity, the definitions and the
    initiative (`blob_safetynet.policies.governance.export`)."""

    scope: str
    """`/subscriptions/<id>` or `/providers/Microsoft.Management/managementGroups/<id>`."""
    location: str
    """Where the assignment keeps its managed identity (ARM requires one with an identity)."""
    definitions: Sequence[Mapping[str, Any]]
    initiative: Mapping[str, Any]
    parameters: Mapping[str, object] = field(default_factory=dict)
    """Initiative parameter -> assigned value (an effect such as `snNoPublicAccessEffect`, a
    threshold such as `minBlobSoftDeleteDays`); the initiative's default for those not named."""
    assignment_name: str = "safetynet-storage"
    enforce: bool = True
    """False assigns with enforcementMode DoNotEnforce: evaluated and reported, never denied."""

    def __post_init__(self) -> None:
        problem = policy_scope_problem(self.scope)
        if problem:
            raise GovernanceArgsError("scope", problem)
        if not self.location.strip():
            raise GovernanceArgsError("location", "must name the Azure region of the assignment")
        if not 0 < len(self.assignment_name) <= ASSIGNMENT_NAME_LIMIT:
            raise GovernanceArgsError(
                "assignment_name", f"must be 1-{ASSIGNMENT_NAME_LIMIT} characters"
            )
        names = {document["name"] for document in self.definitions}
        for reference in self._references:
            wanted = str(reference["policyDefinitionId"]).rsplit("/", 1)[-1]
            if wanted not in names:
                raise GovernanceArgsError(
                    "initiative", f"references {wanted!r}, not among the definitions"
                )
        declared = self.initiative["properties"].get("parameters", {})
        for name, value in self.parameters.items():
            spec = declared.get(name)
            if spec is None:
                raise GovernanceArgsError(
                    "parameters", f"{name!r} is not a parameter of the initiative"
                )
            allowed = spec.get("allowedValues")
            if allowed is not None and value not in allowed:
                raise GovernanceArgsError(
                    "parameters", f"{name}: {value!r} is not one of {allowed}"
                )
            if spec["type"] == "Integer" and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise GovernanceArgsError(
                    "parameters", f"{name}: {value!r} is not a whole number >= 1"
                )

    @property
    def _references(self) -> list[Mapping[str, Any]]:
        return list(self.initiative["properties"]["policyDefinitions"])

    @property
    def management_group(self) -> str | None:
        if self.scope.lower().startswith(MANAGEMENT_GROUP_PREFIX.lower()):
            return self.scope[len(MANAGEMENT_GROUP_PREFIX) :]
        return None

    def value(self, name: str) -> object:
        declared = self.initiative["properties"].get("parameters", {})
        return self.parameters.get(name, declared.get(name, {}).get("defaultValue"))

    def remediation_roles(self) -> list[str]:
        """The roles of every definition whose assigned effect remediates."""
        by_name = {document["name"]: document for document in self.definitions}
        roles: set[str] = set()
        for reference in self._references:
            effect = reference.get("parameters", {}).get("effect", {}).get("value")
            found = _PARAMETER.fullmatch(effect) if isinstance(effect, str) else None
            chosen = self.value(found.group(1)) if found else effect
            if str(chosen).lower() not in REMEDIATING_EFFECTS:
                continue
            document = by_name[str(reference["policyDefinitionId"]).rsplit("/", 1)[-1]]
            details = document["properties"]["policyRule"]["then"].get("details", {})
            roles.update(details.get("roleDefinitionIds", []))
        return sorted(roles)


def _parameters(
    specs: Mapping[str, Mapping[str, Any]],
) -> dict[str, authorization.ParameterDefinitionsValueArgs]:
    return {
        name: authorization.ParameterDefinitionsValueArgs(
            type=spec["type"],
            allowed_values=spec.get("allowedValues"),
            default_value=spec.get("defaultValue"),
            metadata=authorization.ParameterDefinitionsValueMetadataArgs(
                display_name=spec.get("metadata", {}).get("displayName"),
                description=spec.get("metadata", {}).get("description"),
            ),
        )
        for name, spec in specs.items()
    }


def role_definition_id(scope: str, role: str) -> str:
    """A built-in role's id as a role assignment at `scope` names it."""
    return role if scope.lower().startswith(MANAGEMENT_GROUP_PREFIX.lower()) else scope + role


class SafetyNetGovernance(pulumi.ComponentResource):
    """The definitions, the initiative and its assignment (with, for remediation, the
    assignment's identity and its roles); children `parent=self`."""

    definition_ids: dict[str, pulumi.Output[str]]
    """Definition name -> id."""
    initiative_id: pulumi.Output[str]
    assignment_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: SafetyNetGovernanceArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:governance:SafetyNetGovernance", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = args.management_group
        self.definition_ids = {
            document["name"]: _definition(name, document, group, child).id
            for document in args.definitions
        }
        initiative = _initiative(name, args, self.definition_ids, child)
        self.initiative_id = initiative.id
        roles = args.remediation_roles()
        document = args.initiative["properties"]
        assignment = authorization.PolicyAssignment(
            f"{name}-assignment",
            policy_assignment_name=args.assignment_name,
            scope=args.scope,
            policy_definition_id=initiative.id,
            display_name=document.get("displayName"),
            enforcement_mode="Default" if args.enforce else "DoNotEnforce",
            parameters={
                key: authorization.ParameterValuesValueArgs(value=value)
                for key, value in args.parameters.items()
            },
            identity=(
                authorization.IdentityArgs(type=authorization.ResourceIdentityType.SYSTEM_ASSIGNED)
                if roles
                else None
            ),
            location=args.location if roles else None,
            opts=child,
        )
        self.assignment_id = assignment.id
        principal = assignment.identity.apply(lambda found: found.principal_id if found else "")
        for number, role in enumerate(roles):
            authorization.RoleAssignment(
                f"{name}-remediation-{number}",
                scope=args.scope,
                role_definition_id=role_definition_id(args.scope, role),
                principal_id=principal,
                principal_type="ServicePrincipal",
                description="Lets the safetynet policy assignment apply its remediations",
                opts=child,
            )
        self.register_outputs(
            {
                "definitionIds": self.definition_ids,
                "initiativeId": self.initiative_id,
                "assignmentId": self.assignment_id,
            }
        )


def _definition(
    name: str, document: Mapping[str, Any], group: str | None, opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    props = document["properties"]
    common: dict[str, Any] = {
        "policy_definition_name": document["name"],
        "display_name": props["displayName"],
        "description": props.get("description"),
        "mode": props["mode"],
        "metadata": props.get("metadata"),
        "parameters": _parameters(props.get("parameters", {})),
        "policy_rule": props["policyRule"],
        "policy_type": "Custom",
    }
    logical = f"{name}-{document['name']}"
    if group is None:
        return authorization.PolicyDefinition(logical, **common, opts=opts)
    return authorization.PolicyDefinitionAtManagementGroup(
        logical, management_group_id=group, **common, opts=opts
    )


def _initiative(
    name: str,
    args: SafetyNetGovernanceArgs,
    ids: Mapping[str, pulumi.Output[str]],
    opts: pulumi.ResourceOptions,
) -> pulumi.CustomResource:
    document = args.initiative["properties"]
    references = [
        authorization.PolicyDefinitionReferenceArgs(
            policy_definition_id=ids[str(item["policyDefinitionId"]).rsplit("/", 1)[-1]],
            policy_definition_reference_id=item.get("policyDefinitionReferenceId"),
            parameters={
                key: authorization.ParameterValuesValueArgs(value=value["value"])
                for key, value in item.get("parameters", {}).items()
            },
            group_names=item.get("groupNames"),
        )
        for item in document["policyDefinitions"]
    ]
    common: dict[str, Any] = {
        "policy_set_definition_name": args.initiative["name"],
        "display_name": document["displayName"],
        "description": document.get("description"),
        "metadata": document.get("metadata"),
        "policy_type": "Custom",
        "parameters": _parameters(document.get("parameters", {})),
        "policy_definition_groups": [
            authorization.PolicyDefinitionGroupArgs(
                name=group["name"],
                category=group.get("category"),
                display_name=group.get("displayName"),
                description=group.get("description"),
            )
            for group in document.get("policyDefinitionGroups", [])
        ],
        "policy_definitions": references,
    }
    logical = f"{name}-initiative"
    group = args.management_group
    if group is None:
        return authorization.PolicySetDefinition(logical, **common, opts=opts)
    return authorization.PolicySetDefinitionAtManagementGroup(
        logical, management_group_id=group, **common, opts=opts
    )
