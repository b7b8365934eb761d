"""The installable pack (`policies/`) loaded the way the Pulumi CLI loads it.

Its `__main__.py` runs in a fresh process through `python -m pulumi.policy <engine> .`, as the
CLI's Python shim runs it; the tests speak the Analyzer gRPC protocol to it: GetAnalyzerInfo,
Configure with the config the CLI builds from a `--policy-pack-config` file, and AnalyzeStack
with what the engine sends a stack policy: each resource's *outputs* (no `accountName` on a
child, a `name` instead; `id` present or not) and its parent's URN.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime.proto import analyzer_pb2

from blob_safetynet.policies.adapters.pulumi_props import UNKNOWN_SENTINELS
from blob_safetynet.policies.pack.config import pack_config
from blob_safetynet.policies.pack.crossguard import is_resource_rule
from blob_safetynet.policies.rules import RULES, RULES_BY_ID
from blob_safetynet.policies.rules.model import Thresholds
from tests.infra.harness import StackRun, run_stack
from tests.policies.pulumi_cli import RunningPack, StackResource, start_pack
from tests.policies.stack_view import stack_outputs
from tests.policies.test_pack import INFRA_UNKNOWN, infra_gap

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "policies"
UPLOADER = "11111111-2222-3333-4444-555555555555"
STRING_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def violations(diagnostics: list[analyzer_pb2.AnalyzeDiagnostic]) -> dict[str, list[str]]:
    """Policy name -> messages, for diagnostics that are violations (not preview notes), but
    the infra gaps test_pack.py lists."""
    found: dict[str, list[str]] = {}
    for diagnostic in diagnostics:
        gap = infra_gap(diagnostic.policyName, diagnostic.message)
        if "during preview" not in diagnostic.message and not gap:
            found.setdefault(diagnostic.policyName, []).append(diagnostic.message)
    return found


def preview_notes(diagnostics: list[analyzer_pb2.AnalyzeDiagnostic]) -> dict[str, str]:
    """Policy name -> preview note, but the notes test_pack.py expects from the program."""
    return {
        d.policyName: d.message
        for d in diagnostics
        if "during preview" in d.message and d.policyName not in INFRA_UNKNOWN
    }


@pytest.fixture(scope="module")
def pack() -> Iterator[RunningPack]:
    with start_pack(PACK) as running:
        yield running


@pytest.fixture(scope="module")
def run() -> StackRun:
    return run_stack({"uploaderPrincipalIds": [UPLOADER]})


def test_pack_registers_one_policy_per_rule(pack: RunningPack) -> None:
    """GetAnalyzerInfo names every rule once, with its kind, enforcement and config schema."""
    info = pack.info()
    assert info.name == "blob-safetynet"
    assert [p.name for p in info.policies] == [rule.id for rule in RULES]
    for policy in info.policies:
        rule = RULES_BY_ID[policy.name]
        resource = analyzer_pb2.PolicyType.POLICY_TYPE_RESOURCE
        assert (policy.policy_type == resource) == is_resource_rule(rule)
        expected = (
            analyzer_pb2.MANDATORY if rule.enforcement == "mandatory" else analyzer_pb2.ADVISORY
        )
        assert policy.enforcementLevel == expected
        assert set(policy.configSchema.properties) == {
            "minBlobSoftDeleteDays",
            "minContainerSoftDeleteDays",
            "maxPendingDays",
            "containerName",
            "deploymentPrincipalIds",
            "suppressionsFile",
            "suppressionHorizonDays",
            "maxSasExpirationSeconds",
            "maxKeyExpirationDays",
        }


@pytest.mark.parametrize("with_ids", [True, False], ids=["with-ids", "parent-fallback"])
def test_program_outputs_pass_every_stack_policy(
    pack: RunningPack, run: StackRun, with_ids: bool
) -> None:
    """The program's outputs (no accountName on children), with or without ids, raise nothing."""
    pack.configure()
    diagnostics = pack.analyze_stack(stack_outputs(run, with_ids=with_ids))
    assert violations(diagnostics) == {}
    assert preview_notes(diagnostics) == {}


def test_thresholds_under_all_never_reach_a_policy(pack: RunningPack, run: StackRun) -> None:
    """Pulumi drops every key but enforcementLevel from "all": only the per-policy copy applies."""
    outputs = stack_outputs(run, with_ids=False)
    pack.configure(json.dumps({"all": {"minBlobSoftDeleteDays": 30}}))
    assert violations(pack.analyze_stack(outputs)) == {}
    pack.configure(json.dumps(pack_config(Thresholds(min_blob_soft_delete_days=30))))
    assert set(violations(pack.analyze_stack(outputs))) == {"SN-BLOB-SOFT-DELETE"}


def test_a_container_name_no_account_holds_is_reported(pack: RunningPack, run: StackRun) -> None:
    """With containerName matching no container, every protocol policy says so."""
    pack.configure(json.dumps(pack_config(Thresholds(container="docs"))))
    found = violations(pack.analyze_stack(stack_outputs(run, with_ids=True)))
    assert set(found) == {rule.id for rule in RULES if rule.protocol}
    assert all("container named 'docs'" in messages[0] for messages in found.values())


def test_a_container_name_unknown_in_preview_is_a_note_not_a_skip(
    pack: RunningPack, run: StackRun
) -> None:
    """A container whose name is not known yet gives preview notes on the protocol policies."""
    assert STRING_UNKNOWN in UNKNOWN_SENTINELS
    outputs = [
        StackResource(r.urn, r.type, r.name, {**r.properties, "name": STRING_UNKNOWN}, r.parent)
        if r.type == "azure-native:storage:BlobContainer"
        else r
        for r in stack_outputs(run, with_ids=False)
    ]
    pack.configure()
    diagnostics = pack.analyze_stack(outputs)
    assert violations(diagnostics) == {}
    assert "SN-PENDING-LIFECYCLE" in preview_notes(diagnostics)


def test_requirements_pin_what_the_repository_tests() -> None:
    """requirements.txt pins the library at this version and the policy SDK versions installed here."""
    pins = dict(
        re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip()).groups()  # type: ignore[union-attr]
        for line in (PACK / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "--"))
    )
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert pins == {
        project["name"]: project["version"],
        "pulumi-policy": metadata.version("pulumi-policy"),
        "pulumi": metadata.version("pulumi"),
    }
    assert "virtualenv: venv" in (PACK / "PulumiPolicy.yaml").read_text()
    assert "--find-links ./wheels" in (PACK / "requirements.txt").read_text().splitlines()
