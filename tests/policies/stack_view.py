"""What CrossGuard hands a stack policy, built from a mock run: each resource's outputs.

The engine sends AnalyzeStack the resources' *outputs* (pulumi/pulumi `AnalyzeStack` in
`sdk/go/common/resource/plugin/analyzer_plugin.go` marshals each state's `Outputs`), with the
parent's URN. azure-native outputs carry the resource's own properties and `name`, not the
path parameters it took as inputs (`accountName`, `containerName`, ...); whether `id` is among
them is not something a policy may count on, so both shapes are built.
"""

from __future__ import annotations

from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
from pulumi_policy.proxy import unknown_checking_proxy

from tests.infra.harness import StackRun, policy_identity_principal
from tests.policies.pulumi_cli import StackResource

PROJECT = "blob-safetynet"
STACK_URN = f"urn:pulumi:test::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-test"

INPUT_ONLY = {
    "azure-native:storage:StorageAccount": ("accountName", "resourceGroupName"),
    "azure-native:storage:BlobContainer": ("accountName", "resourceGroupName", "containerName"),
    "azure-native:storage:BlobServiceProperties": (
        "accountName",
        "resourceGroupName",
        "blobServicesName",
    ),
    "azure-native:storage:ManagementPolicy": (
        "accountName",
        "resourceGroupName",
        "managementPolicyName",
    ),
    "azure-native:authorization:RoleDefinition": ("roleDefinitionId", "scope"),
    "azure-native:authorization:RoleAssignment": ("roleAssignmentName",),
}
"""Path parameters azure-native takes as inputs and does not return as outputs."""


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::{PROJECT}::{type_}::{name}"


def stack_outputs(
    run: StackRun, *, with_ids: bool, roles: str = "safetynet-access"
) -> list[StackResource]:
    """The run's resources as the engine hands them to AnalyzeStack: outputs, not inputs."""
    accounts: dict[str, tuple[str, str]] = {}
    for res in run.resources:
        name, group = res.inputs.get("accountName"), res.inputs.get("resourceGroupName")
        if res.type != "azure-native:storage:StorageAccount" and name and group:
            accounts.setdefault(res.parent_name, (name, group))
    definition_ids = {
        f"{roles}-{key.removesuffix('RoleDefinitionId')}": value
        for key, value in run.outputs.items()
        if key.endswith("RoleDefinitionId")
    }
    subscription = "/subscriptions/00000000-0000-0000-0000-0000000000aa"
    resources = [StackResource(STACK_URN, "pulumi:pulumi:Stack", f"{PROJECT}-test", {})]
    for number, res in enumerate(run.resources):
        props = {k: v for k, v in res.inputs.items() if k not in INPUT_ONLY.get(res.type, ())}
        account, group = accounts.get(res.parent_name, (None, None))
        account_id = f"{subscription}/resourceGroups/{group}/providers/Microsoft.Storage/storageAccounts/{account}"
        resource_id: str | None = None
        if res.type == "azure-native:storage:StorageAccount" and account:
            props["name"], resource_id = account, account_id
        elif res.type == "azure-native:storage:BlobContainer":
            props["name"] = res.inputs["containerName"]
            resource_id = f"{account_id}/blobServices/default/containers/{props['name']}"
        elif res.type == "azure-native:storage:BlobServiceProperties":
            props["name"], resource_id = "default", f"{account_id}/blobServices/default"
        elif res.type == "azure-native:storage:ManagementPolicy":
            props["name"] = "DefaultManagementPolicy"
            resource_id = f"{account_id}/managementPolicies/default"
        elif res.type == "azure-native:authorization:RoleDefinition":
            resource_id = definition_ids[res.name]
            props["name"] = resource_id.rsplit("/", 1)[-1]
        elif res.type == "azure-native:authorization:PolicyAssignment" and "identity" in props:
            principal = policy_identity_principal(res.name)
            props["identity"] = {**props["identity"], "principalId": principal}
        elif res.type == "azure-native:authorization:RoleAssignment":
            props["name"] = f"00000000-0000-4000-8000-{number:012d}"
            resource_id = f"{res.inputs['scope']}/providers/Microsoft.Authorization/roleAssignments/{props['name']}"
        if with_ids and resource_id is not None:
            props["id"] = resource_id
        parent = (
            STACK_URN
            if res.parent_type == "pulumi:pulumi:Stack"
            else urn(res.parent_type, res.parent_name)
        )
        resources.append(StackResource(urn(res.type, res.name), res.type, res.name, props, parent))
    return resources


def as_policy_resources(resources: list[StackResource]) -> list[PolicyResource]:
    """The resources as CrossGuard's Python analyzer builds them: proxied props, parents linked
    by URN (pulumi_policy `_PolicyAnalyzerServicer.AnalyzeStack`)."""
    built = {
        r.urn: PolicyResource(
            r.type,
            unknown_checking_proxy(dict(r.properties)),
            r.urn,
            r.name,
            PolicyResourceOptions(
                False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], r.parent or None
            ),
            None,
            None,
            [],
            {},
        )
        for r in resources
    }
    for r in resources:
        if r.parent in built:
            built[r.urn].parent = built[r.parent]
    return list(built.values())
