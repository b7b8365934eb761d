"""Resources a template deploys through a nested deployment are judged, never skipped.

A `Microsoft.Resources/deployments` resource with an inline `properties.template` deploys that
template's resources as the main template deploys its own; its expressions are evaluated in the
parent's scope (`expressionEvaluationOptions.scope` absent or `outer`) or in its own, with its
own parameters given by the deployment's `parameters` (`inner`)
(https://learn.microsoft.com/azure/azure-resource-manager/templates/linked-templates). A
linked template (`templateLink`) or parameters file (`parametersLink`) lives elsewhere and is
refused with exit 2, naming where it sits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tests.policies.test_arm_reading import NAME, bodies, judge, resource, template

DEPLOYMENTS = "Microsoft.Resources/deployments"
CONTAINER = "Microsoft.Storage/storageAccounts/blobServices/containers"


def deployment(resources: list[Any], **properties: Any) -> dict[str, Any]:
    """A nested deployment of an inline template holding `resources`."""
    inline: dict[str, Any] = {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": resources,
    }
    inline.update(properties.pop("template_extra", {}))
    return {
        "type": DEPLOYMENTS,
        "apiVersion": "2022-09-01",
        "name": "nested",
        "properties": {"mode": "Incremental", "template": inline, **properties},
    }


def public_container(name: str = f"{NAME}/default/public") -> dict[str, Any]:
    return {
        "type": CONTAINER,
        "apiVersion": "2026-09-01",
        "name": name,
        "properties": {"publicAccess": "Container"},
    }


def containers_verdict(document: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    verdicts: dict[str, tuple[str, str]] = judge(document, tmp_path)[1]
    return verdicts["SN-CONTAINERS-PRIVATE"]


def test_a_public_container_in_a_nested_deployment_fails(tmp_path: Path) -> None:
    """A public container declared inside a nested deployment's inline template fails
    SN-CONTAINERS-PRIVATE beside the main template's private one."""
    document = template(bodies(False))
    document["resources"].append(deployment([public_container()]))
    outcome, message = containers_verdict(document, tmp_path)
    assert outcome == "FAIL"
    assert "public" in message


def test_an_account_deployed_only_through_a_nested_deployment_is_judged(tmp_path: Path) -> None:
    """A template whose every resource sits in a nested deployment is read like the same
    resources at the top: the insecure account's verdicts are the top-level file's."""
    flat = template(bodies(True))
    nested = {"resources": [deployment(flat["resources"])]}
    assert judge(nested, tmp_path, "nested.json") == judge(flat, tmp_path, "flat.json")


def test_a_deployment_nested_in_a_nested_deployment_is_read(tmp_path: Path) -> None:
    """Nesting goes down every level: a public container two deployments deep fails."""
    document = template(bodies(False))
    document["resources"].append(deployment([deployment([public_container()])]))
    assert containers_verdict(document, tmp_path)[0] == "FAIL"


def test_an_insecure_redeploy_of_the_account_in_a_nested_deployment_is_refused(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """The same account declared again (insecure) in a nested deployment exits 2: which of
    the two documents ARM leaves in place cannot be told from the file."""
    document = template(bodies(False))
    again = json.loads(json.dumps(resource(document, "storageAccounts")))
    again["properties"]["allowBlobPublicAccess"] = True
    again.pop("resources", None)
    document["resources"].append(deployment([again]))
    path = tmp_path / "redeploy.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert code == 2
    assert "a second storageaccounts document" in err


def test_outer_scope_names_come_from_the_parent_parameters(tmp_path: Path) -> None:
    """Without `expressionEvaluationOptions` (outer scope) a nested name's `parameters()`
    reads the parent template's parameter."""
    document = template(bodies(False))
    document["parameters"] = {"acct": {"type": "string", "defaultValue": NAME}}
    named = public_container("[concat(parameters('acct'), '/default/public')]")
    document["resources"].append(
        deployment([named], expressionEvaluationOptions={"scope": "Outer"})
    )
    assert containers_verdict(document, tmp_path)[0] == "FAIL"


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({"value": NAME}, id="literal"),
        pytest.param({"value": "[parameters('outerName')]"}, id="outer-expression"),
        pytest.param(None, id="nested-default"),
    ],
)
def test_inner_scope_names_come_from_the_deployment_parameters(
    tmp_path: Path, given: dict[str, Any] | None
) -> None:
    """With `scope: inner` a nested name's `parameters()` reads the nested template's own
    parameter: the value the deployment passes (a literal, or an expression of the parent's
    parameters), else the nested template's default."""
    document = template(bodies(False))
    document["parameters"] = {"outerName": {"type": "string", "defaultValue": NAME}}
    inner = {"innerName": {"type": "string", "defaultValue": NAME if given is None else "other"}}
    named = public_container("[concat(parameters('innerName'), '/default/public')]")
    extra: dict[str, Any] = {"parameters": {"innerName": given}} if given is not None else {}
    document["resources"].append(
        deployment(
            [named],
            expressionEvaluationOptions={"scope": "inner"},
            template_extra={"parameters": inner},
            **extra,
        )
    )
    assert containers_verdict(document, tmp_path)[0] == "FAIL"


def test_inner_scope_does_not_see_the_parent_parameters(tmp_path: Path, run_cli: RunCli) -> None:
    """With `scope: inner` a parameter only the parent declares is no parameter of the nested
    template: the name cannot be resolved, exit 2."""
    document = template(bodies(False))
    document["parameters"] = {"acct": {"type": "string", "defaultValue": NAME}}
    named = public_container("[concat(parameters('acct'), '/default/public')]")
    document["resources"].append(
        deployment([named], expressionEvaluationOptions={"scope": "Inner"})
    )
    path = tmp_path / "inner.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert (code, "has no string default value" in err) == (2, True)


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        pytest.param(
            {"templateLink": {"uri": "https://example.invalid/t.json"}},
            ".properties.templateLink",
            id="templateLink",
        ),
        pytest.param(
            {"parametersLink": {"uri": "https://example.invalid/p.json"}},
            ".properties.parametersLink",
            id="parametersLink",
        ),
        pytest.param(
            {"expressionEvaluationOptions": {"scope": "sideways"}},
            ".properties.expressionEvaluationOptions.scope",
            id="unknown-scope",
        ),
    ],
)
def test_what_cannot_be_read_offline_is_refused_naming_its_place(
    tmp_path: Path, run_cli: RunCli, properties: dict[str, Any], named: str
) -> None:
    """A linked template, a linked parameters file or a scope ARM does not know exits 2
    naming the deployment's place in the file."""
    document = template(bodies(False))
    place = f"resources[{len(document['resources'])}]"
    nested = deployment([public_container()])
    nested["properties"].update(properties)
    if "templateLink" in properties:
        del nested["properties"]["template"]
    document["resources"].append(nested)
    path = tmp_path / "linked.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, out, err = run_cli("audit", "--from-file", str(path))
    assert code == 2, out
    assert place + named in err


def test_a_nested_deployment_without_a_template_list_is_refused(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A deployment whose inline template's `resources` is no list (a symbolic-name object,
    or nothing) exits 2: what it deploys is not read, so it is not skipped either."""
    document = template(bodies(False))
    nested = deployment([])
    nested["properties"]["template"]["resources"] = {"c": public_container()}
    document["resources"].append(nested)
    path = tmp_path / "symbolic.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert (code, ".properties.template.resources" in err) == (2, True)
