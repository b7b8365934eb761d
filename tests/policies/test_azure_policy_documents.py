"""The exported Azure Policy documents hold to Microsoft's own schema and limits, and the pages
that tell how to deploy them give a deployment that evaluates what the definitions say.

Microsoft's policy rule schema (tests/policies/data/policyDefinition-2020-10-01.json, copied
unchanged) types `equals` as number or string; Microsoft's built-ins compare a boolean property
with the strings "true"/"false" (`"equals": "false"` on supportsHttpsTrafficOnly, built-in
404c3081, Azure/azure-policy `Storage_AuditForHTTPSEnabled_Audit.json`), which the agreement
test in test_azure_policy.py holds to the rules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from blob_safetynet.policies.governance import export, forms
from tests.conftest import RunCli

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
SCOPE = "/providers/Microsoft.Management/managementGroups/landing-zones"


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DATA / name).read_text())
    return document


def rule_validator() -> jsonschema.Draft4Validator:
    """Microsoft's 2020-10-01 policy rule schema, its `expression` reference served locally."""
    rule, common = _load("policyDefinition-2020-10-01.json"), _load("common-definitions.json")
    registry: Registry[Any] = Registry().with_resources(
        (str(document["id"]).rstrip("#"), Resource.from_contents(document, DRAFT4))
        for document in (rule, common)
    )
    return jsonschema.Draft4Validator(rule, registry=registry)


@pytest.mark.parametrize("form", forms.FORMS, ids=lambda form: form.rule.id)
def test_each_policy_rule_validates_against_microsofts_schema(form: forms.PolicyForm) -> None:
    """Every generated `policyRule` is valid by Microsoft's 2020-10-01 schema: no condition
    compares with a JSON boolean, where the schema takes a number or a string."""
    errors = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in rule_validator().iter_errors(
            export.definition(form)["properties"]["policyRule"]
        )
    ]
    assert errors == []


def test_microsofts_schema_refuses_a_boolean_in_equals() -> None:
    """The schema check is not blind: `"equals": true` is refused."""
    condition = {"field": "type", "equals": True}
    rule = {"if": condition, "then": {"effect": "audit"}}
    assert not rule_validator().is_valid(rule)


SOFT_DELETE_DAYS = list(range(1, 366))
"""`deleteRetentionPolicy.days`: "The minimum specified value can be 1 and the maximum value
can be 365" (https://learn.microsoft.com/javascript/api/@azure/arm-storage/deleteretentionpolicy)."""


def test_min_blob_soft_delete_days_takes_only_what_azure_takes() -> None:
    """The parameter, in the definition and in the initiative, allows exactly 1-365 (an
    Integer parameter is bounded by `allowedValues`; `schema` is for Object parameters only:
    https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-parameters)."""
    form = next(f for f in forms.FORMS if f.rule.id == "SN-BLOB-SOFT-DELETE")
    in_definition = export.definition(form)["properties"]["parameters"]["minBlobSoftDeleteDays"]
    in_initiative = export.initiative(SCOPE)["properties"]["parameters"]["minBlobSoftDeleteDays"]
    for spec in (in_definition, in_initiative):
        assert spec["allowedValues"] == SOFT_DELETE_DAYS
        assert spec["defaultValue"] in SOFT_DELETE_DAYS


@pytest.mark.parametrize(("days", "refused"), [("0", True), ("365", False), ("366", True)])
def test_the_audit_takes_the_soft_delete_days_azure_takes(
    run_cli: RunCli, days: str, refused: bool
) -> None:
    """`--min-blob-soft-delete-days` outside 1-365 is bad usage (exit 2): no account could
    ever meet a minimum above what Azure keeps."""
    saved = str(DATA / "az-storage-account-show.json")
    code, _, err = run_cli("audit", "--from-file", saved, "--min-blob-soft-delete-days", days)
    assert (code == 2) is refused, err
    if refused:
        assert "between 1 and 365" in err


def _section(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _commands(section: str, verb: str) -> list[str]:
    """Every `az <verb>` command of the section's shell blocks, continuation lines joined."""
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    lines = " ".join(blocks).replace("\\\n", " ")
    return [line for line in lines.splitlines() if f"az {verb} " in line]


def test_the_cli_page_deploys_every_property_a_definition_needs() -> None:
    """docs/cli.md's deploy commands pass each definition's mode (Resource Manager's default,
    Indexed, never evaluates the blob service definitions), parameters and rule, and the
    initiative's parameters, groups and references, at a management group or a subscription."""
    section = _section("cli.md", "## `safetynet policy export`")
    [create] = _commands(section, "policy definition create")
    for flag, key in (("--mode", "mode"), ("--params", "parameters"), ("--rules", "policyRule")):
        assert f"{flag} " in create, flag
        assert f".properties.{key}" in create, flag
    [initiative] = _commands(section, "policy set-definition create")
    for flag, key in (
        ("--params", "parameters"),
        ("--definition-groups", "policyDefinitionGroups"),
        ("--definitions", "policyDefinitions"),
    ):
        assert f"{flag} " in initiative, flag
        assert f".properties.{key}" in initiative, flag
    for command in (create, initiative):
        assert "--management-group" in command
    assert "--subscription" in section
    modes = {export.definition(form)["properties"]["mode"] for form in forms.FORMS}
    assert modes == {"All", "Indexed"}, "the page's point: the modes differ"


def test_the_cli_page_names_the_files_as_the_export_writes_them() -> None:
    """Every `definitions/<name>.json` docs/cli.md names is a file the export writes."""
    section = _section("cli.md", "## `safetynet policy export`")
    named = set(re.findall(r"definitions/([^`/ ]+)\.json", section))
    written = {export.definition_name(form) for form in forms.FORMS}
    assert named
    assert named - {"*"} <= written, named - written


def test_the_remediation_commands_cover_both_scopes_and_modify_says_what_it_skips() -> None:
    """docs/policies.md gives a remediation task at a subscription and at a management group
    (the assignment named by its full id there), and says blob soft delete's Modify acts
    through remediation tasks: a request without `deleteRetentionPolicy` is not modified."""
    section = _section("policies.md", "## Enforced by Azure")
    remediations = re.findall(r"`(az policy remediation create[^`]*)`", section)
    at_group = [c for c in remediations if "--management-group" in c]
    at_subscription = [c for c in remediations if "--management-group" not in c]
    assert at_group
    assert at_subscription
    for command in remediations:
        assert "--name " in command
        assert "--definition-reference-id " in command
    assert "/providers/Microsoft.Authorization/policyAssignments/" in at_group[0]
    assert "effect-modify#skipped-modification" in section
    assert "on create and update" not in section
