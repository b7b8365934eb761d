"""The nets beside an account in saved files (sources/files_nets.py): what a file shows is
judged, what it cannot show is NOT_IN_FILES, never a PASS."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.policies.rules import Outcome
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.sources.files import run_offline_audit
from testkit.arm_fake import (
    SUBSCRIPTION,
    FakeAccount,
    backup_instance,
    blob_diagnostic_setting,
    compliant_account,
    management_lock,
)
from tests.policies.test_offline_audit import cli_output, net_resources, template_export

NETS = ("SN-DELETE-LOCK", "SN-BLOB-LOGGING", "SN-BACKUP-PROTECTED")


def account() -> FakeAccount:
    return compliant_account("acctnets", "rg-files")


def write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def outcomes(paths: list[Path]) -> dict[str, tuple[Outcome, str]]:
    report = run_offline_audit(paths, Thresholds(), "2026-09-01")
    return {f.rule.id: (f.outcome, f.message) for f in report.findings if f.rule.id in NETS}


def test_a_template_with_the_nets_passes_them(tmp_path: Path) -> None:
    """A template's lock (extension form), blob diagnostic setting (nested name form) and
    backup instance (data source by resourceId) pass the three rules."""
    judged = outcomes([template_export(account(), tmp_path / "t.json")])
    assert {rule: outcome for rule, (outcome, _) in judged.items()} == dict.fromkeys(
        NETS, Outcome.PASS
    )
    assert "lock 'keep' at the account" in judged["SN-DELETE-LOCK"][1]


def test_a_template_without_them_is_not_in_files(tmp_path: Path) -> None:
    """No lock, setting or instance in the template: each rule is NOT_IN_FILES with the
    reason, since one may exist outside the file."""
    judged = outcomes([template_export(account(), tmp_path / "t.json", nets=False)])
    assert {rule: outcome for rule, (outcome, _) in judged.items()} == dict.fromkeys(
        NETS, Outcome.NOT_IN_FILES
    )
    assert "resource group or subscription lies outside" in judged["SN-DELETE-LOCK"][1]


def test_the_nested_lock_form_and_any_case_of_the_types_are_read(tmp_path: Path) -> None:
    """`Microsoft.Storage/storageAccounts/providers/locks` named `acct/Microsoft.Authorization/x`
    counts as the account's lock, and resource types are matched ignoring ASCII case."""
    source = account()
    path = template_export(source, tmp_path / "t.json", nets=False)
    document = json.loads(path.read_text(encoding="utf-8"))
    parameter = next(iter(document["parameters"]))
    nets = net_resources(source, parameter)[1:]
    for resource in nets:
        resource["type"] = resource["type"].upper()
    nets.append(
        {
            "type": "microsoft.storage/STORAGEACCOUNTS/providers/LOCKS",
            "apiVersion": "2020-05-01",
            "name": f"[concat(parameters('{parameter}'), '/Microsoft.Authorization/nested')]",
            "properties": {"level": "CanNotDelete"},
        }
    )
    document["resources"] += nets
    judged = outcomes([write(path, document)])
    assert judged["SN-DELETE-LOCK"][0] is Outcome.PASS
    assert "lock 'nested' at the account" in judged["SN-DELETE-LOCK"][1]
    assert judged["SN-BLOB-LOGGING"][0] is Outcome.PASS


def cli_files(tmp_path: Path, source: FakeAccount, **extra: Any) -> list[Path]:
    paths = [write(tmp_path / "account.json", cli_output(source.body))]
    for name, document in extra.items():
        paths.append(write(tmp_path / f"{name}.json", document))
    return paths


def test_a_saved_group_lock_protects_the_saved_accounts_under_it(tmp_path: Path) -> None:
    """`az lock list` output with the group's lock, beside a saved account of that group:
    PASS, named as the group's; a lock of another group protects nothing here."""
    source = account()
    group_id = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-files"
    other = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-other"
    locks = [cli_output(management_lock(group_id, "rg-keep"))]
    judged = outcomes(cli_files(tmp_path, source, locks=locks))
    assert judged["SN-DELETE-LOCK"][0] is Outcome.PASS
    assert "lock 'rg-keep' at the resource group" in judged["SN-DELETE-LOCK"][1]
    elsewhere = [cli_output(management_lock(other, "theirs"))]
    judged = outcomes(cli_files(tmp_path, source, locks=elsewhere))
    assert judged["SN-DELETE-LOCK"][0] is Outcome.NOT_IN_FILES


def test_a_saved_setting_short_of_a_category_fails(tmp_path: Path) -> None:
    """A saved diagnostic setting of the blob service without StorageRead fails, naming it; a
    setting of the account itself (not its blob service) is not the blob service's."""
    source = account()
    short = blob_diagnostic_setting(source.id, ("StorageWrite", "StorageDelete"))
    judged = outcomes(cli_files(tmp_path, source, diagnostics=[cli_output(short)]))
    assert judged["SN-BLOB-LOGGING"][0] is Outcome.FAIL
    assert "StorageRead" in judged["SN-BLOB-LOGGING"][1]
    own = copy.deepcopy(blob_diagnostic_setting(source.id))
    own["id"] = own["id"].replace("/blobServices/default", "")
    judged = outcomes(cli_files(tmp_path, source, diagnostics=[own]))
    assert judged["SN-BLOB-LOGGING"][0] is Outcome.NOT_IN_FILES


@pytest.mark.parametrize(
    ("state", "outcome"),
    [("ProtectionConfigured", Outcome.PASS), ("ProtectionStopped", Outcome.FAIL)],
)
def test_a_saved_backup_instance_is_judged_by_its_state(
    tmp_path: Path, state: str, outcome: Outcome
) -> None:
    """A saved backup instance of the account passes while protection is configured and fails
    once stopped; it is matched to the account by its data source, whatever its vault."""
    source = account()
    instance = backup_instance(source.id)
    instance["properties"]["currentProtectionState"] = state
    judged = outcomes(cli_files(tmp_path, source, backups=[instance]))
    assert judged["SN-BACKUP-PROTECTED"][0] is outcome
