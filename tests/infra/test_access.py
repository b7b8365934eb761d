"""Least-privilege RBAC: custom roles in the resource group, assignments on the container."""

from __future__ import annotations

import re

import pytest

from blob_safetynet.infra.access import (
    ADD,
    CONDITION_RESOURCE_ATTRIBUTES,
    DELETE,
    NEVER_GRANTED,
    READ,
    ROLES,
    SWEEPER,
    SWEEPER_CONDITION,
    SWEEPER_LEASE_BLOB,
    TAGS_READ,
    TAGS_WRITE,
    VERIFIER,
    VERIFIER_CLAUSES,
    VERIFIER_CONDITION,
    WRITE,
    RoleSpec,
)
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, VERIFY_PREFIX
from tests.infra.conftest import READER_ID, UPLOADER_ID, RunFactory
from tests.infra.harness import SUBSCRIPTION_ID, RegisteredResource, StackRun

VERIFIER_ID = "99999999-8888-7777-6666-555555555555"
TAGS_ATTRIBUTE = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags"
SUBSCRIPTION_ROLE_ID = re.compile(
    rf"/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft\.Authorization/roleDefinitions/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
ASSIGNABLE_SCOPE = re.compile(
    r"/providers/Microsoft\.Management/managementGroups/[^/]+"
    r"|/subscriptions/[^/]+"
    r"|/subscriptions/[^/]+/resourceGroups/[^/]+"
)
"""Management groups, subscriptions or resource groups: what Microsoft documents as a custom
role's assignable scopes (https://learn.microsoft.com/azure/role-based-access-control/custom-roles)."""

DEFINITION = "azure-native:authorization:RoleDefinition"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"
ROLES_COMPONENT = "safetynet:access:Roles"


def definition(stack: StackRun, spec: RoleSpec) -> RegisteredResource:
    return stack.one(DEFINITION, f"safetynet-access-{spec.key}")


def data_assignments(stack: StackRun) -> list[RegisteredResource]:
    return [res for res in stack.of_type(ASSIGNMENT) if res.parent_type == ROLES_COMPONENT]


def verifier_app_principal(stack: StackRun) -> str:
    """The principal of the app's verifier identity (continuous verification)."""
    [assignment] = [
        res for res in data_assignments(stack) if res.name == "safetynet-access-verifier-app"
    ]
    return str(assignment.inputs["principalId"])


def account_id(stack: StackRun) -> str:
    return str(stack.outputs["accountId"])


@pytest.mark.parametrize("spec", ROLES, ids=lambda spec: spec.key)
def test_each_role_grants_exactly_its_documented_data_actions(
    stack: StackRun, spec: RoleSpec
) -> None:
    """A role's permissions are its data actions and nothing else: no control-plane actions."""
    [permission] = definition(stack, spec).inputs["permissions"]
    assert sorted(permission["dataActions"]) == sorted(spec.data_actions)
    assert permission["actions"] == []
    assert permission["notDataActions"] == []


@pytest.mark.parametrize("spec", ROLES, ids=lambda spec: spec.key)
def test_no_role_holds_a_dangerous_action(stack: StackRun, spec: RoleSpec) -> None:
    """No role can skip soft delete, delete versions, query tags, or read account keys."""
    [permission] = definition(stack, spec).inputs["permissions"]
    granted = set(permission["dataActions"]) | set(permission["actions"])
    assert not granted & set(NEVER_GRANTED)
    assert not any("*" in action for action in granted)


@pytest.mark.parametrize("spec", ROLES, ids=lambda spec: spec.key)
def test_roles_are_custom_and_assignable_only_in_the_stacks_resource_group(
    stack: StackRun, spec: RoleSpec
) -> None:
    """Each role is defined in, and assignable only in, the resource group holding the account."""
    role = definition(stack, spec)
    group_id = account_id(stack).split("/providers/")[0]
    assert role.inputs["roleType"] == "CustomRole"
    assert role.inputs["scope"] == group_id
    assert role.inputs["assignableScopes"] == [group_id]
    assert all(ASSIGNABLE_SCOPE.fullmatch(scope) for scope in role.inputs["assignableScopes"])
    # Role names are unique per tenant: the account's name keeps two stacks apart.
    assert role.inputs["roleName"] == f"safetynet {spec.key} ({stack.outputs['accountName']})"


def test_every_assignment_names_its_role_in_the_subscription_form(run: RunFactory) -> None:
    """Role definition ids are `/subscriptions/<sub>/providers/.../roleDefinitions/<guid>`."""
    result = run({"verifierPrincipalIds": [VERIFIER_ID]})
    ids = [res.inputs["roleDefinitionId"] for res in result.of_type(ASSIGNMENT)]
    ids += [result.outputs[f"{spec.key}RoleDefinitionId"] for spec in ROLES]
    assert ids
    assert [role_id for role_id in ids if not SUBSCRIPTION_ROLE_ID.fullmatch(role_id)] == []


def test_the_uploader_can_write_tags_and_the_others_cannot_overreach() -> None:
    """Only the uploader writes tags; the reader only reads; the sweeper deletes but never tags."""
    by_key = {spec.key: set(spec.data_actions) for spec in ROLES}
    tags_write = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write"
    assert tags_write in by_key["uploader"]
    assert tags_write not in by_key["sweeper"] | by_key["reader"]
    assert by_key["reader"] == {
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read"
    }


def test_configured_principals_get_their_role_on_the_container_only(stack: StackRun) -> None:
    """Each configured uploader and reader holds its custom role, scoped to the container."""
    container_id = stack.one("azure-native:storage:BlobContainer", "safetynet-container")
    by_principal = {res.inputs["principalId"]: res for res in data_assignments(stack)}
    for principal, spec_key in ((UPLOADER_ID, "uploader"), (READER_ID, "reader")):
        assignment = by_principal[principal]
        assert assignment.inputs["roleDefinitionId"] == stack.outputs[f"{spec_key}RoleDefinitionId"]
        assert assignment.inputs["scope"].endswith(
            f"/containers/{container_id.inputs['containerName']}"
        )


def test_one_assignment_per_configured_principal(run: RunFactory) -> None:
    """Two uploaders and no readers give two uploader assignments, the sweeper's and the app's
    verifier identity's."""
    ids = ["aaaaaaaa-0000-0000-0000-000000000001", "aaaaaaaa-0000-0000-0000-000000000002"]
    result = run({"uploaderPrincipalIds": ids, "readerPrincipalIds": []})
    principals = sorted(res.inputs["principalId"] for res in data_assignments(result))
    expected = [*ids, str(result.outputs["sweeperPrincipalId"]), verifier_app_principal(result)]
    assert principals == sorted(expected)


def test_the_sweeper_identity_holds_the_sweeper_role_with_a_lease_path_condition(
    stack: StackRun,
) -> None:
    """The app's identity gets the sweeper role; its writes are limited to lock and heartbeat."""
    [assignment] = [
        res
        for res in data_assignments(stack)
        if res.inputs["principalId"] == stack.outputs["sweeperPrincipalId"]
    ]
    assert assignment.inputs["roleDefinitionId"] == stack.outputs["sweeperRoleDefinitionId"]
    assert assignment.inputs["principalType"] == "ServicePrincipal"
    assert assignment.inputs["conditionVersion"] == "2.0"
    condition = assignment.inputs["condition"]
    assert f"StringEquals '{SWEEPER_LEASE_BLOB}'" in condition
    assert f"StringEquals '{HEARTBEAT_BLOB}'" in condition
    assert "StringLike" not in condition
    writes = [grant.data_action for grant in SWEEPER.grants if "write" in grant.data_action]
    writes += [grant.data_action for grant in SWEEPER.grants if "add/action" in grant.data_action]
    assert all(f"ActionMatches{{'{action}'}}" in condition for action in writes)


def test_no_builtin_role_is_granted_on_the_data_account(stack: StackRun) -> None:
    """Every assignment on the data account uses one of the project's custom roles."""
    custom = {str(stack.outputs[f"{spec.key}RoleDefinitionId"]) for spec in ROLES}
    account = account_id(stack)
    on_data = [res for res in stack.of_type(ASSIGNMENT) if res.inputs["scope"].startswith(account)]
    assert on_data
    assert {res.inputs["roleDefinitionId"] for res in on_data} <= custom


def test_a_configured_verifier_gets_the_verifier_role_with_its_prefix_condition(
    run: RunFactory,
) -> None:
    """Each verifier principal holds the verifier role on the container, under the prefix condition."""
    result = run({"verifierPrincipalIds": [VERIFIER_ID]})
    [assignment] = [
        res for res in data_assignments(result) if res.inputs["principalId"] == VERIFIER_ID
    ]
    assert assignment.inputs["roleDefinitionId"] == result.outputs["verifierRoleDefinitionId"]
    assert assignment.inputs["scope"].endswith("/containers/documents")
    assert assignment.inputs["condition"] == VERIFIER_CONDITION
    assert assignment.inputs["conditionVersion"] == "2.0"


def test_the_verifier_condition_confines_every_granted_action_to_the_verify_prefix() -> None:
    """Writes, tags and deletes only under the prefix; reads there and of the heartbeat; lists there."""
    path = "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path]"
    prefix = "@Request[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:prefix]"
    confined, reads, lists = VERIFIER_CLAUSES
    for action in (ADD, WRITE, TAGS_WRITE, TAGS_READ, DELETE):
        assert f"ActionMatches{{'{action}'}}" in confined
    assert confined.endswith(f"({path} StringLike '{VERIFY_PREFIX}*'))")
    assert f"ActionMatches{{'{READ}'}} AND NOT SubOperationMatches{{'Blob.List'}}" in reads
    assert reads.endswith(
        f"({path} StringLike '{VERIFY_PREFIX}*' OR {path} StringEquals '{HEARTBEAT_BLOB}'))"
    )
    assert f"ActionMatches{{'{READ}'}} AND SubOperationMatches{{'Blob.List'}}" in lists
    assert lists.endswith(f"({prefix} StringStartsWith '{VERIFY_PREFIX}'))")
    assert HEARTBEAT_BLOB not in confined + lists
    assert set(VERIFIER.data_actions) == {READ, ADD, WRITE, TAGS_WRITE, TAGS_READ, DELETE}
    assert " AND ".join(VERIFIER_CLAUSES) == VERIFIER_CONDITION
    assert VERIFIER_CONDITION.count("(") == VERIFIER_CONDITION.count(")")


def test_no_condition_keys_a_delete_on_blob_index_tags() -> None:
    """Azure offers no tags attribute for blobs/delete, so the state guard stays x-ms-if-tags."""
    assert TAGS_ATTRIBUTE not in CONDITION_RESOURCE_ATTRIBUTES["delete"]
    assert TAGS_ATTRIBUTE in CONDITION_RESOURCE_ATTRIBUTES["tags/write"]
    for condition in (SWEEPER_CONDITION, VERIFIER_CONDITION):
        used = set(re.findall(r"@Resource\[([^\]]+)\]", condition))
        if f"ActionMatches{{'{DELETE}'}}" in condition:
            assert used <= CONDITION_RESOURCE_ATTRIBUTES["delete"], used
        assert TAGS_ATTRIBUTE not in used


GROUP_ID = "12121212-3434-5656-7878-909090909090"
USER_ID = "abababab-cdcd-efef-0101-232323232323"


def test_every_assignment_sends_the_configured_principal_type(run: RunFactory) -> None:
    """A group, a user and a service principal each go out with their own principalType
    (azure-native would send User, which ARM refuses for the others)."""
    result = run(
        {
            "uploaderPrincipalIds": [{"id": GROUP_ID, "type": "Group"}],
            "readerPrincipalIds": [{"id": USER_ID, "type": "User"}],
            "verifierPrincipalIds": [{"id": VERIFIER_ID, "type": "ServicePrincipal"}],
        }
    )
    sent = {
        res.inputs["principalId"]: res.inputs.get("principalType")
        for res in data_assignments(result)
    }
    assert sent == {
        GROUP_ID: "Group",
        USER_ID: "User",
        VERIFIER_ID: "ServicePrincipal",
        result.outputs["sweeperPrincipalId"]: "ServicePrincipal",
        verifier_app_principal(result): "ServicePrincipal",
    }


def test_no_assignment_goes_out_as_a_user_unless_configured_as_one(stack: StackRun) -> None:
    """With service principals configured (the fixture's), no data assignment carries the
    SDK's default `User`: each names its kind explicitly."""
    kinds = {res.inputs.get("principalType") for res in data_assignments(stack)}
    assert kinds == {"ServicePrincipal"}
