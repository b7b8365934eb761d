"""`SafetyNetGovernance` under Pulumi mocks: definitions, initiative, assignment, remediation role."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pytest

from blob_safetynet.infra import config as infra_config
from blob_safetynet.infra.governance import (
    GovernanceArgsError,
    SafetyNetGovernance,
    SafetyNetGovernanceArgs,
)
from blob_safetynet.infra.program import provision
from blob_safetynet.policies.governance import export, forms
from tests.infra.harness import RAW_DEFAULTS, StackRun, run_function, typed_principals

MANAGEMENT_GROUP = "/providers/Microsoft.Management/managementGroups/platform"
SUBSCRIPTION = "/subscriptions/00000000-0000-0000-0000-00000000a0d1"
AUTH = "azure-native:authorization:"
UPLOADER = "7f3c1a2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b"
"""An application identity that writes tags, so the storage stack passes the role rules."""


def rules_args(scope: str = SUBSCRIPTION, **changes: Any) -> SafetyNetGovernanceArgs:
    """The args for the rule set's own definitions and initiative at `scope`."""
    base: dict[str, Any] = {
        "scope": scope,
        "location": "westeurope",
        "definitions": export.definitions(),
        "initiative": export.initiative(scope),
    }
    return SafetyNetGovernanceArgs(**{**base, **changes})


def governed(args: SafetyNetGovernanceArgs | None, *, with_storage: bool = False) -> StackRun:
    def program() -> Mapping[str, pulumi.Output[Any]]:
        outputs: Mapping[str, pulumi.Output[Any]] = {}
        if with_storage:
            raw = typed_principals({**RAW_DEFAULTS, "uploaderPrincipalIds": [UPLOADER]})
            outputs = provision(infra_config.parse(raw))
        if args is not None:
            SafetyNetGovernance("governance", args)
        return outputs

    return run_function(program)


def test_at_a_management_group_every_definition_and_the_initiative_are_registered() -> None:
    """One definition per exported rule at the management group, the initiative referencing
    each by its rule id, and the assignment of that initiative at the same scope."""
    run = governed(rules_args(MANAGEMENT_GROUP))
    definitions = run.of_type(f"{AUTH}PolicyDefinitionAtManagementGroup")
    assert sorted(d.inputs["policyDefinitionName"] for d in definitions) == sorted(
        export.definition_name(form) for form in forms.FORMS
    )
    assert {d.inputs["managementGroupId"] for d in definitions} == {"platform"}
    for made in definitions:
        form = next(
            f
            for f in forms.FORMS
            if export.definition_name(f) == made.inputs["policyDefinitionName"]
        )
        assert made.inputs["policyRule"] == export.definition(form)["properties"]["policyRule"]
        assert made.parent_type == "safetynet:governance:SafetyNetGovernance"
    (initiative,) = run.of_type(f"{AUTH}PolicySetDefinitionAtManagementGroup")
    references = initiative.inputs["policyDefinitions"]
    assert [r["policyDefinitionReferenceId"] for r in references] == [
        f.rule.id for f in forms.FORMS
    ]
    assert {r["policyDefinitionId"] for r in references} == {
        export.definition_id(MANAGEMENT_GROUP, form) for form in forms.FORMS
    }
    (assignment,) = run.of_type(f"{AUTH}PolicyAssignment")
    assert assignment.inputs["scope"] == MANAGEMENT_GROUP
    assert assignment.inputs["policyDefinitionId"].endswith(
        "/policySetDefinitions/safetynet-storage"
    )
    assert assignment.inputs["enforcementMode"] == "Default"
    assert len(assignment.inputs["policyAssignmentName"]) <= 24


def test_audit_only_needs_no_identity_and_grants_no_role() -> None:
    """With every effect Audit the assignment has no managed identity and nothing is granted."""
    run = governed(rules_args(SUBSCRIPTION))
    (assignment,) = run.of_type(f"{AUTH}PolicyAssignment")
    assert "identity" not in assignment.inputs
    assert run.of_type(f"{AUTH}RoleAssignment") == []
    assert len(run.of_type(f"{AUTH}PolicyDefinition")) == len(forms.FORMS)
    assert len(run.of_type(f"{AUTH}PolicySetDefinition")) == 1


def test_a_modify_effect_adds_the_identity_and_the_remediation_role_at_the_scope() -> None:
    """Modify gives the assignment a system-assigned identity and grants that identity, as a
    service principal, the role the definitions name, at the assignment's scope."""
    chosen = {
        "snNoPublicAccessEffect": "Modify",
        "snHttpsTlsEffect": "Deny",
        "minBlobSoftDeleteDays": 14,
    }
    run = governed(rules_args(SUBSCRIPTION, parameters=chosen))
    (assignment,) = run.of_type(f"{AUTH}PolicyAssignment")
    assert assignment.inputs["identity"]["type"] == "SystemAssigned"
    assert assignment.inputs["location"] == "westeurope"
    values = {key: value["value"] for key, value in assignment.inputs["parameters"].items()}
    assert values["snNoPublicAccessEffect"] == "Modify"
    assert values["snHttpsTlsEffect"] == "Deny"
    assert values == chosen
    (role,) = run.of_type(f"{AUTH}RoleAssignment")
    assert role.inputs["scope"] == SUBSCRIPTION
    assert role.inputs["roleDefinitionId"] == SUBSCRIPTION + forms.STORAGE_ACCOUNT_CONTRIBUTOR
    assert role.inputs["principalType"] == "ServicePrincipal"
    assert role.inputs["principalId"]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"scope": "/subscriptions/nope"}, "scope"),
        ({"scope": f"{SUBSCRIPTION}/resourceGroups/rg"}, "scope"),
        ({"scope": "/providers/Microsoft.Management/managementGroups/.."}, "scope"),
        ({"scope": "/providers/Microsoft.Management/managementGroups/\u212a"}, "scope"),
        ({"location": " "}, "location"),
        ({"assignment_name": "x" * 25}, "assignment_name"),
        ({"definitions": export.definitions()[1:]}, "initiative"),
        ({"parameters": {"snTagWriteRoleEffect": "Audit"}}, "parameters"),
        ({"parameters": {"snHttpsTlsEffect": "Modify"}}, "parameters"),
        ({"parameters": {"snHttpsTlsEffect": "audit!"}}, "parameters"),
        ({"parameters": {"minBlobSoftDeleteDays": 0}}, "parameters"),
        ({"parameters": {"maxKeyExpirationDays": True}}, "parameters"),
    ],
)
def test_invalid_args_are_refused_with_the_key_named(changes: dict[str, Any], key: str) -> None:
    """A scope, location, name, missing definition, effect or threshold ARM or the initiative
    would refuse is a GovernanceArgsError naming the argument, before any resource exists."""
    with pytest.raises(GovernanceArgsError, match=key):
        rules_args(**changes)


def test_the_crossguard_pack_passes_a_stack_with_governance() -> None:
    """The pack judges the storage resources only; with the governance resources (and the
    remediation identity's subscription-wide role) beside the hardened account no policy
    fails, and none is left unknown that is not unknown without them."""
    from tests.policies.test_pack import run_pack

    args = rules_args(SUBSCRIPTION, parameters={"snNoPublicAccessEffect": "Modify"})
    run = governed(args, with_storage=True)
    assert run.of_type(f"{AUTH}RoleAssignment")
    result = run_pack(run)
    assert result.failing == set()
    assert result.unknown.keys() <= run_pack(governed(None, with_storage=True)).unknown.keys()
