"""The generated Azure Policy definitions judge as the rules do, and validate as ARM documents.

Agreement: on every recorded ARM body, for every exported rule, the audit's verdict (the rule
over `adapters.arm`) and the policy's (testkit/azure_policy.py over the same body) agree:
PASS is compliant, FAIL non-compliant, NOT_APPLICABLE not applicable (or no such resource), and
UNKNOWN non-compliant, since a policy cannot say "unknown" and a definition that lets an
unreadable setting through would be a silent pass.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.governance import aliases, export, forms
from blob_safetynet.policies.pack.crossguard import CONFIG_SCHEMA
from blob_safetynet.policies.rules import RULES, Outcome
from blob_safetynet.policies.rules.model import Thresholds
from testkit.arm_fake import compliant_account, file_storage_account, set_path
from testkit.azure_policy import Verdict, judge

DATA = Path(__file__).parent / "data"
SCOPE = "/providers/Microsoft.Management/managementGroups/platform"
PATHS = {name: alias.path for name, alias in aliases.ALIASES.items()}
DELETE = object()
DEFAULT_THRESHOLDS = Thresholds()

EXPECTED: dict[Outcome, set[Verdict | None]] = {
    Outcome.PASS: {Verdict.COMPLIANT},
    Outcome.FAIL: {Verdict.NON_COMPLIANT},
    Outcome.UNKNOWN: {Verdict.NON_COMPLIANT},
    Outcome.NOT_APPLICABLE: {Verdict.NOT_APPLICABLE, None},
}


KNOWN_DIFFERENCES = {
    ("properties=not an object", "SN-TRUSTED-SERVICES"): (
        "a body whose properties is no object (hostile, never ARM's) leaves the rule UNKNOWN; "
        "the policy reads every alias as absent, and an absent bypass means AzureServices"
    ),
}
"""The one (body, rule) pair where the verdicts differ, and why."""


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DATA / name).read_text())
    return document


Bodies = tuple[dict[str, Any], dict[str, Any] | None]
"""A storage account body and its blob service body (None: the account has none)."""


def _spec_example() -> Bodies:
    return load("StorageAccountGetProperties.json"), load("BlobServicesGet.json")


def _fake(name: str) -> Bodies:
    account = compliant_account(name)
    return account.body, account.blob_service_properties


def _file_storage() -> Bodies:
    return file_storage_account("premiumfiles").body, None


VARIANTS: list[tuple[str, object]] = [
    ("properties", "not an object"),
    ("properties.allowBlobPublicAccess", True),
    ("properties.allowBlobPublicAccess", DELETE),
    ("properties.allowBlobPublicAccess", "yes"),
    ("properties.supportsHttpsTrafficOnly", False),
    ("properties.supportsHttpsTrafficOnly", DELETE),
    ("properties.minimumTlsVersion", "TLS1_0"),
    ("properties.minimumTlsVersion", "TLS1_3"),
    ("properties.minimumTlsVersion", "tls1_2"),
    ("properties.publicNetworkAccess", "disabled"),
    ("properties.networkAcls.defaultAction", "deny"),
    ("properties.networkAcls.bypass", "azureservices"),
    ("properties.encryption.keySource", "microsoft.keyvault"),
    ("properties.minimumTlsVersion", DELETE),
    ("properties.publicNetworkAccess", "Enabled"),
    ("properties.publicNetworkAccess", "SecuredByPerimeter"),
    ("properties.publicNetworkAccess", DELETE),
    ("properties.networkAcls.defaultAction", "Allow"),
    ("properties.networkAcls", DELETE),
    ("properties.networkAcls.bypass", "Logging, Metrics"),
    ("properties.networkAcls.bypass", "Logging, AzureServices"),
    ("properties.networkAcls.bypass", DELETE),
    ("properties.networkAcls.bypass", ""),
    ("properties.allowCrossTenantReplication", True),
    ("properties.allowCrossTenantReplication", DELETE),
    ("properties.encryption.requireInfrastructureEncryption", False),
    ("properties.encryption", DELETE),
    ("properties.encryption.keySource", "Microsoft.Storage"),
    ("properties.keyPolicy.keyExpirationPeriodInDays", 91),
    ("properties.keyPolicy.keyExpirationPeriodInDays", 90),
    ("properties.keyPolicy.keyExpirationPeriodInDays", "ninety"),
    ("properties.keyPolicy", DELETE),
    ("sku.name", "Standard_LRS"),
    ("sku.name", "Standard_ZRS"),
    ("sku.name", "standard_ragrs"),
    ("sku.name", "Standard_GRS"),
    ("sku.name", 7),
    ("sku", DELETE),
    ("blob.properties.deleteRetentionPolicy.enabled", False),
    ("blob.properties.deleteRetentionPolicy.days", 6),
    ("blob.properties.deleteRetentionPolicy.days", 7),
    ("blob.properties.deleteRetentionPolicy.days", DELETE),
    ("blob.properties.deleteRetentionPolicy.enabled", "maybe"),
    ("blob.properties.deleteRetentionPolicy", DELETE),
    ("blob.properties.containerDeleteRetentionPolicy.enabled", False),
    ("blob.properties.containerDeleteRetentionPolicy", DELETE),
    ("blob.properties.isVersioningEnabled", False),
    ("blob.properties.isVersioningEnabled", DELETE),
    ("blob.properties.isVersioningEnabled", "maybe"),
]
"""One setting of the fake's recorded-shape compliant account changed (or removed), each an
edge of an exported rule: the insecure value, the boundary, the absent property, a bad type."""


def _remove(document: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node = document
    for key in parents:
        node = node[key]
    node.pop(last, None)


def _variant(path: str, value: object) -> Callable[[], Bodies]:
    def build() -> Bodies:
        body, blob = _fake("variant")
        target = blob if path.startswith("blob.") else body
        assert target is not None
        local = path.removeprefix("blob.")
        if value is DELETE:
            _remove(target, local)
        else:
            set_path(target, local, value)
        return body, blob

    return build


RECORDED: dict[str, Callable[[], Bodies]] = {
    "rest-spec-example": _spec_example,
    "fake-compliant": lambda: _fake("compliant"),
    "fake-file-storage": _file_storage,
    **{
        f"{path}={'<absent>' if value is DELETE else value}": _variant(path, value)
        for path, value in VARIANTS
    },
}


def rule_outcome(form: forms.PolicyForm, bodies: Bodies, thresholds: Thresholds) -> Outcome:
    account, blob = bodies
    reads = arm.ArmReads(account=account, blob_service_properties=blob if blob is not None else {})
    return form.rule.evaluate(arm.account(reads), thresholds).outcome


def policy_verdict(
    definition: dict[str, Any], form: forms.PolicyForm, bodies: Bodies, assigned: dict[str, object]
) -> Verdict | None:
    account, blob = bodies
    resource = account if form.resource_type == aliases.ACCOUNT_TYPE else blob
    if resource is None:
        return None
    return judge(definition, resource, PATHS, assigned)


def disagreements(
    definitions: dict[str, dict[str, Any]],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    assigned: dict[str, object] | None = None,
) -> list[str]:
    found = []
    for label, build in RECORDED.items():
        for form in forms.FORMS:
            bodies = build()
            outcome = rule_outcome(form, bodies, thresholds)
            definition = definitions[form.rule.id]
            verdict = policy_verdict(definition, form, bodies, assigned or {})
            if verdict not in EXPECTED[outcome] and (label, form.rule.id) not in KNOWN_DIFFERENCES:
                found.append(f"{label}: {form.rule.id} rule {outcome.value}, policy {verdict}")
    return found


def generated() -> dict[str, dict[str, Any]]:
    return {form.rule.id: export.definition(form) for form in forms.FORMS}


def test_every_exported_rule_agrees_with_its_definition_on_every_recorded_body() -> None:
    """For each recorded ARM body and each exported rule, the audit and the policy agree."""
    assert disagreements(generated()) == []


def test_the_recorded_bodies_reach_both_verdicts_of_every_exported_rule() -> None:
    """The bodies are no trivial agreement: every exported rule passes on one and fails on one."""
    for form in forms.FORMS:
        seen = {rule_outcome(form, build(), Thresholds()) for build in RECORDED.values()}
        assert {Outcome.PASS, Outcome.FAIL} <= seen, form.rule.id


def test_an_assigned_threshold_moves_both_verdicts_alike() -> None:
    """With minBlobSoftDeleteDays 20 assigned and the rule's threshold 20, the compliant
    account's 14 days fail both, and every other verdict still agrees."""
    thresholds = Thresholds(min_blob_soft_delete_days=20, max_key_expiration_days=30)
    assigned: dict[str, object] = {"minBlobSoftDeleteDays": 20, "maxKeyExpirationDays": 30}
    assert disagreements(generated(), thresholds, assigned) == []
    form = next(f for f in forms.FORMS if f.rule.id == "SN-BLOB-SOFT-DELETE")
    bodies = _fake("compliant")
    assert rule_outcome(form, bodies, thresholds) is Outcome.FAIL
    verdict = policy_verdict(export.definition(form), form, bodies, assigned)
    assert verdict is Verdict.NON_COMPLIANT


def _weakened(definition: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(definition)
    condition = broken["properties"]["policyRule"]["if"]["allOf"]
    condition[-1] = {"not": condition[-1]}
    return broken


@pytest.mark.parametrize("rule_id", [form.rule.id for form in forms.FORMS])
def test_negating_one_generated_condition_is_caught(rule_id: str) -> None:
    """The agreement test is not blind: with one definition's condition negated, it reports
    disagreements for that rule."""
    definitions = generated()
    definitions[rule_id] = _weakened(definitions[rule_id])
    assert any(f" {rule_id} " in line for line in disagreements(definitions))


def test_parameter_defaults_are_the_rules_thresholds_and_the_packs_names() -> None:
    """Each threshold parameter is named as the CrossGuard pack's config key and defaults to
    the rules' own `Thresholds` value."""
    defaults = dataclasses.asdict(Thresholds())
    names = {
        "minBlobSoftDeleteDays": "min_blob_soft_delete_days",
        "maxKeyExpirationDays": "max_key_expiration_days",
    }
    for form in forms.FORMS:
        for item in form.parameters:
            assert item.name in CONFIG_SCHEMA.properties
            assert item.default == defaults[names[item.name]]


def test_every_rule_is_exported_or_listed_with_a_reason() -> None:
    """No rule is left out in silence, and none is both exported and listed."""
    assert forms.coverage_problems() == []
    assert len(forms.FORMS) + len(forms.NOT_EXPRESSIBLE) == len(RULES)
    assert all(item.reason for item in forms.NOT_EXPRESSIBLE)


def test_every_alias_used_is_recorded_with_its_source_and_modify_only_sets_modifiable_ones() -> (
    None
):
    """The definitions name only recorded aliases (each with its https source); Modify
    operations only touch aliases a built-in modifies."""
    for form in forms.FORMS:
        assert form.aliases, form.rule.id
        assert all(alias.source.startswith("https://") for alias in form.aliases)
        assert all(op.alias.modifiable for op in form.modify), form.rule.id


DEFINITION_SCHEMA = load("azure-policy-definition.schema.json")
SET_SCHEMA = load("azure-policy-set-definition.schema.json")


@pytest.mark.parametrize("form", forms.FORMS, ids=lambda form: form.rule.id)
def test_each_definition_validates_against_the_documented_structure(
    form: forms.PolicyForm,
) -> None:
    """Every generated definition is a valid policy definition document."""
    jsonschema.validate(export.definition(form), DEFINITION_SCHEMA)


def test_the_initiative_validates_and_references_each_rule_by_its_id() -> None:
    """The initiative is a valid policy set: one reference per exported rule, its id the rule's,
    every group a control the rule maps, every parameter it passes defined."""
    document = export.initiative(SCOPE)
    jsonschema.validate(document, SET_SCHEMA)
    references = document["properties"]["policyDefinitions"]
    assert [r["policyDefinitionReferenceId"] for r in references] == [
        form.rule.id for form in forms.FORMS
    ]
    groups = {g["name"] for g in document["properties"]["policyDefinitionGroups"]}
    defined = set(document["properties"]["parameters"])
    for form, reference in zip(forms.FORMS, references, strict=True):
        assert set(reference.get("groupNames", [])) == {
            export.group_name(c) for c in form.rule.controls
        }
        assert set(reference.get("groupNames", [])) <= groups
        assert reference["policyDefinitionId"] == export.definition_id(SCOPE, form)
        for value in reference["parameters"].values():
            assert value["value"].removeprefix("[parameters('").removesuffix("')]") in defined


def test_a_broken_definition_fails_the_schema() -> None:
    """The schema is no formality: an unknown effect detail or a missing rule is refused."""
    form = forms.FORMS[0]
    document = export.definition(form)
    del document["properties"]["policyRule"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, DEFINITION_SCHEMA)
    document = export.definition(form)
    document["properties"]["policyRule"]["if"]["allOf"][0]["equalz"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, DEFINITION_SCHEMA)


def test_the_policies_page_lists_every_form_every_reason_and_every_alias() -> None:
    """docs/policies.md's Azure Policy section names each exported rule, each rule it cannot
    express with the same reason, and each recorded alias with its source."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "policies.md").read_text()
    section = page.split("## Enforced by Azure", 1)[1].split("\n## ", 1)[0]
    for form in forms.FORMS:
        assert f"| {form.rule.id} |" in section
    for item in forms.NOT_EXPRESSIBLE:
        assert f"| {item.rule.id} | {item.reason} |" in section
    for alias in aliases.ALIASES.values():
        assert f"`{alias.name}`" in section
        assert alias.source in section


def test_the_nets_beside_an_account_are_listed_with_the_resource_they_need() -> None:
    """The lock, logging and backup rules are not exported: each reason names the resource
    outside the account it judges, and the backup one the built-in to assign instead."""
    reasons = {item.rule.id: item.reason for item in forms.NOT_EXPRESSIBLE}
    assert "Microsoft.Authorization/locks" in reasons["SN-DELETE-LOCK"]
    assert "Microsoft.Insights" in reasons["SN-BLOB-LOGGING"]
    assert "Azure Backup should be enabled for Blobs" in reasons["SN-BACKUP-PROTECTED"]
    assert not {"SN-DELETE-LOCK", "SN-BLOB-LOGGING", "SN-BACKUP-PROTECTED"} & {
        form.rule.id for form in forms.FORMS
    }
