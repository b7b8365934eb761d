"""The adapters: recorded ARM documents and Pulumi inputs become the same normalized model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blob_safetynet.policies.adapters import arm, pulumi_props
from blob_safetynet.policies.rules import Outcome, evaluate
from blob_safetynet.policies.rules.model import UNKNOWN, Facet, Thresholds
from testkit.arm_fake import compliant_account

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DATA / name).read_text())
    return document


def outcomes(reads: arm.ArmReads) -> dict[str, Outcome]:
    findings = evaluate(arm.account(reads), Thresholds(), every_rule=True)
    return {f.rule.id: f.outcome for f in findings}


def test_recorded_arm_examples_are_judged_without_crashing() -> None:
    """The REST spec's own example account (GPv1, HNS, HTTP allowed) fails the rules it breaks."""
    reads = arm.ArmReads(
        account=load("StorageAccountGetProperties.json"),
        blob_service_properties=load("BlobServicesGet.json"),
        containers=[],
        management_policy=load("StorageAccountGetManagementPolicy.json"),
        role_assignments=[],
    )
    judged = outcomes(reads)
    failing = {rule for rule, outcome in judged.items() if outcome is Outcome.FAIL}
    assert failing == {
        "SN-CONTAINER-SOFT-DELETE",
        "SN-POINT-IN-TIME-RESTORE",
        "SN-PENDING-LIFECYCLE",
        "SN-FLAT-NAMESPACE",
        "SN-ACCOUNT-KIND",
        "SN-SHARED-KEY-OFF",
        "SN-NO-PUBLIC-ACCESS",
        "SN-HTTPS-TLS",
        "SN-TAG-WRITE-ROLE",
        "SN-VERSION-EXPIRY",
        "SN-PUBLIC-NETWORK-ACCESS",
        "SN-NETWORK-DEFAULT-DENY",
        "SN-CROSS-TENANT-REPLICATION",
        "SN-INFRA-ENCRYPTION",
        "SN-CMK-ENCRYPTION",
        "SN-KEY-EXPIRATION-POLICY",
        "SN-SAS-EXPIRATION-POLICY",
    }
    assert judged["SN-BLOB-SOFT-DELETE"] is Outcome.PASS


def test_absent_account_properties_take_documented_defaults() -> None:
    """No allowSharedKeyAccess or allowBlobPublicAccess means allowed; no TLS minimum is TLS1_0."""
    settings = arm.settings(load("StorageAccountGetProperties.json"))
    assert settings.allow_shared_key_access is True
    assert settings.allow_blob_public_access is True
    assert settings.minimum_tls_version == "TLS1_0"


def test_absent_public_access_fails_in_both_adapters() -> None:
    """An account body or Pulumi input without allowBlobPublicAccess fails SN-NO-PUBLIC-ACCESS."""
    fake = compliant_account("older")
    del fake.body["properties"]["allowBlobPublicAccess"]
    reads = arm.ArmReads(account=fake.body, containers=fake.containers)
    assert outcomes(reads)["SN-NO-PUBLIC-ACCESS"] is Outcome.FAIL
    inputs = {"kind": "StorageV2", "allowSharedKeyAccess": False, "minimumTlsVersion": "TLS1_2"}
    assert pulumi_props.settings(inputs).allow_blob_public_access is True


def test_values_of_unexpected_type_become_unknown() -> None:
    """A malformed field is UNKNOWN, not a crash and not a pass."""
    body = {"name": "odd", "kind": 7, "properties": {"isHnsEnabled": "maybe"}}
    settings = arm.settings(body)
    assert settings.kind is UNKNOWN
    assert settings.is_hns_enabled is UNKNOWN


def test_missing_management_policy_means_no_rules() -> None:
    """A 404 management policy is known to be absent: the backstop rule fails, not unknown."""
    fake = compliant_account("docs")
    reads = arm.ArmReads(
        account=fake.body,
        blob_service_properties=fake.blob_service_properties,
        containers=fake.containers,
        management_policy=None,
        role_assignments=[],
    )
    assert outcomes(reads)["SN-PENDING-LIFECYCLE"] is Outcome.FAIL


def test_unread_facets_stay_unknown_with_reasons() -> None:
    """Facets the audit could not read are UNKNOWN and keep the reason given."""
    reads = arm.ArmReads(account=compliant_account("docs").body)
    reads.reasons[Facet.ROLES] = "forbidden"
    model = arm.account(reads)
    assert model.role_assignments is UNKNOWN
    assert model.unknown_reasons[Facet.ROLES] == "forbidden"


def test_pulumi_unknown_sentinels_become_unknown() -> None:
    """A preview-time unknown (Pulumi's sentinel string) is UNKNOWN in the model."""
    sentinel = next(iter(pulumi_props.UNKNOWN_SENTINELS))
    settings = pulumi_props.settings({"kind": "StorageV2", "allowSharedKeyAccess": sentinel})
    assert settings.allow_shared_key_access is UNKNOWN
    assert settings.kind == "StorageV2"


def test_arm_and_pulumi_shapes_give_the_same_model() -> None:
    """One account described as ARM JSON and as azure-native inputs is one model."""
    fake = compliant_account("docs")
    from_arm = arm.account(
        arm.ArmReads(
            account=fake.body,
            blob_service_properties=fake.blob_service_properties,
            containers=fake.containers,
            management_policy=fake.management_policy,
            role_assignments=[],
        )
    )
    props = dict(fake.body["properties"])
    props["enableHttpsTrafficOnly"] = props.pop("supportsHttpsTrafficOnly")
    props["networkRuleSet"] = props.pop("networkAcls")
    pulumi_inputs = {**props, "kind": fake.body["kind"], "sku": fake.body["sku"]}
    assert pulumi_props.settings(pulumi_inputs) == from_arm.settings
    assert (
        pulumi_props.blob_service_properties(fake.blob_service_properties["properties"])
        == from_arm.blob_service_properties
    )
    assert (
        pulumi_props.lifecycle_rules(fake.management_policy["properties"])
        == from_arm.lifecycle_rules
    )


def test_a_management_group_assignment_in_the_stack_reaches_its_accounts() -> None:
    """An Owner granted to an application at management group scope fails SN-NEVER-GRANTED."""
    owner = (
        "/providers/Microsoft.Authorization/roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
    )
    resources = [
        pulumi_props.StackResource(
            pulumi_props.STORAGE_ACCOUNT, "docs", {"accountName": "docs", "kind": "StorageV2"}
        ),
        pulumi_props.StackResource(
            pulumi_props.BLOB_CONTAINER, "c", {"accountName": "docs", "containerName": "documents"}
        ),
        pulumi_props.StackResource(
            pulumi_props.ROLE_ASSIGNMENT,
            "app-owner",
            {
                "principalId": "app",
                "principalType": "ServicePrincipal",
                "roleDefinitionId": owner,
                "scope": "/providers/Microsoft.Management/managementGroups/corp",
            },
        ),
    ]
    (account,) = pulumi_props.accounts_from_stack(resources)
    findings = {f.rule.id: f for f in evaluate(account, Thresholds())}
    assert findings["SN-NEVER-GRANTED"].outcome is Outcome.FAIL
