"""Remediation per target: an account (live or saved) is told the Azure setting, its value and
the `az` command; a Pulumi program the stack config key or resource property."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.infra.config import KEYS
from blob_safetynet.policies.reports.formats import RENDERERS
from blob_safetynet.policies.reports.view import ReportContext
from blob_safetynet.policies.rules import RULES, FixTarget, Outcome
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.sources.files import run_offline_audit

SAVED = Path(__file__).parent / "data" / "az-storage-account-show.json"
PULUMI_WORDS = re.compile(r"Pulumi|blob_safetynet/|StackConfig")
BLOB_SERVICE_NAMES = frozenset({"changeFeed"})
"""Config keys spelt as the blob service property they set (`changeFeed.enabled`), which a saved
account document does not hold but an account's fix names."""


def json_keys(value: Any) -> set[str]:
    """Every property name anywhere in a JSON document."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in json_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in json_keys(v)}
    return set()


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.id)
def test_every_rule_has_a_fix_for_every_target(rule: Any) -> None:
    """Each rule has a non-empty remediation for every target, the two differ, and the
    account's names an `az` command and no Pulumi config or source path."""
    texts = {target: rule.remediation.text(target) for target in FixTarget}
    assert all(texts.values())
    assert texts[FixTarget.ACCOUNT] != texts[FixTarget.PULUMI]
    assert "`az " in texts[FixTarget.ACCOUNT]
    assert PULUMI_WORDS.search(texts[FixTarget.ACCOUNT]) is None


def test_an_audit_of_a_saved_account_names_no_pulumi_config_key() -> None:
    """Every format of an audit of a saved `az storage account show` with failures names no
    Pulumi config key (but names the ARM document or the report's thresholds use themselves)
    and no source path."""
    report = run_offline_audit([SAVED], Thresholds(), "2024-01-01")
    arm_names = json_keys(json.loads(SAVED.read_text()))
    # The report's own thresholds (`containerName`, ...) name what was judged, not a fix.
    own = set(json.loads(RENDERERS["json"](report, ReportContext()))["thresholds"])
    # One-word keys (`location`, `versioning`) are English words too; the camelCase ones are not.
    config_only = {
        key
        for key in KEYS
        if key not in arm_names | own | BLOB_SERVICE_NAMES and key != key.lower()
    }
    assert any(f.outcome is Outcome.FAIL for f in report.findings)
    for name, render in RENDERERS.items():
        text = render(report, ReportContext()).replace("\\", "")  # Markdown's escapes
        assert PULUMI_WORDS.search(text) is None, name
        # A key is named when it stands alone: `defenderForStorage` inside ARM's
        # `defenderForStorageSettings` names the resource type, not the config key.
        named = [key for key in config_only if re.search(rf"(?<![A-Za-z]){key}(?![A-Za-z])", text)]
        assert named == [], name
    assert "az storage account update" in RENDERERS["json"](report, ReportContext())
