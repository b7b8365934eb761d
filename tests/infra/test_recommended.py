"""The recommended configuration (examples/Pulumi.recommended.yaml, docs/deployment.md
"Recommended configuration"): the program built from it passes every rule of the policy pack on
the data account, judged through the Pulumi adapter as `safetynet config check` judges a stack."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from blob_safetynet.infra import stackfile
from blob_safetynet.infra.config import DATABASE_URL_KEY, DEFAULTS, KEYS
from blob_safetynet.policies.adapters.pulumi_props import StackResource
from blob_safetynet.policies.pack.crossguard import judge_stack
from blob_safetynet.policies.rules import RULES, Finding, Outcome
from blob_safetynet.policies.rules.model import Thresholds
from tests.infra.harness import RAW_DEFAULTS, TEST_DATABASE_URL, StackRun, run_stack

ROOT = Path(__file__).resolve().parents[2]
RECOMMENDED = ROOT / "examples" / "Pulumi.recommended.yaml"
NOT_PASS: Final[dict[str, str]] = {}
"""Rules the data account does not PASS with the recommended configuration, and why: none. The
Backup vault's role on the account (Storage Account Backup Contributor) is one the role rules
know (BUILT_IN_ROLES), so they judge it rather than answer UNKNOWN."""


def recommended_raw() -> dict[str, object]:
    """The file's keys, its secret database URL standing in as a test URL and the sweeper's
    package as the harness's throwaway zip (both are the deployer's, not the file's)."""
    stack = stackfile.read(RECOMMENDED)
    unknown = set(stack.raw) - set(KEYS)
    assert not unknown, f"unknown keys in {RECOMMENDED.name}: {sorted(unknown)}"
    raw = dict(stack.raw)
    assert stack.secrets == {DATABASE_URL_KEY}
    assert "containerName" not in raw, "data_account_findings judges the default container"
    raw[DATABASE_URL_KEY] = TEST_DATABASE_URL
    raw["sweeperPackagePath"] = RAW_DEFAULTS["sweeperPackagePath"]
    return raw


@pytest.fixture(scope="module")
def recommended() -> StackRun:
    return run_stack(recommended_raw())


def data_account_findings(
    run: StackRun, container: str = str(DEFAULTS["containerName"])
) -> list[Finding]:
    """Every rule's findings on the data account, as the pack's stack policies judge outputs,
    the protocol's container being the configured one (not what the program named)."""
    resources = [
        StackResource(res.type, res.name, res.state, res.parent_urn or None, res.id)
        for res in run.resources
        if res.custom
    ]
    account = str(run.outputs["accountName"])
    limits = Thresholds(container=container)
    findings = [finding for rule in RULES for finding in judge_stack(rule, resources, limits)]
    return [finding for finding in findings if finding.account == account]


def test_every_rule_passes_on_the_data_account(recommended: StackRun) -> None:
    """Each rule in RULES judges the data account PASS, but for the listed NOT_PASS rules."""
    not_passed = {
        finding.rule.id: f"{finding.outcome.value}: {finding.message}"
        for finding in data_account_findings(recommended)
        if finding.outcome is not Outcome.PASS
    }
    assert not_passed == NOT_PASS


def test_every_rule_judges_the_data_account(recommended: StackRun) -> None:
    """No rule of RULES skips the data account: a new rule that does not apply to it would pass
    silently otherwise."""
    judged = {finding.rule.id for finding in data_account_findings(recommended)}
    assert judged == {rule.id for rule in RULES}


def test_the_recommended_file_turns_every_net_on(recommended: StackRun) -> None:
    """The run has the backup instance, the Defender setting, the blob private endpoint, and a
    zone- and geo-redundant data account encrypted with the customer-managed key."""
    account = recommended.one("azure-native:storage:StorageAccount", "safetynet")
    assert account.inputs["sku"]["name"] in ("Standard_GZRS", "Standard_RAGZRS")
    assert account.inputs["publicNetworkAccess"] == "Disabled"
    assert account.inputs["encryption"]["keySource"] == "Microsoft.Keyvault"
    assert recommended.one("azure-native:dataprotection:BackupInstance")
    assert recommended.one("azure-native:security:DefenderForStorage")
    assert recommended.one("azure-native:network:PrivateEndpoint", "safetynet-blob-endpoint")
