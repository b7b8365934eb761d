"""`safetynet audit --from-file`: saved ARM JSON judged by the live audit's adapter and rules.

The files are shaped like the outputs they stand for. The Azure CLI prints the SDK's models
flattened (`properties` merged into the top, the SDK's names `enableHttpsTrafficOnly` and
`networkRuleSet` for REST's `supportsHttpsTrafficOnly` and `networkAcls`): compare the
`az storage account show` sample in Microsoft's docs
(https://learn.microsoft.com/cli/azure/storage/account#az-storage-account-show). A template
export holds REST-shaped resources named by `parameters()` expressions
(https://learn.microsoft.com/azure/azure-resource-manager/templates/export-template-cli).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.cli.main import build_parser
from blob_safetynet.policies.reports.formats import RENDERERS
from blob_safetynet.policies.reports.view import ReportContext
from blob_safetynet.policies.rules import RULES, Finding
from blob_safetynet.policies.rules.model import Facet, Thresholds
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.files import MAX_FILE_BYTES, run_offline_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import Scope
from testkit.arm_fake import (
    SUBSCRIPTION,
    TOKEN,
    FakeAccount,
    FakeArm,
    compliant_account,
    set_path,
)
from tests.conftest import RunCli

GROUP = "rg-docs"
LOCAL_USER_TYPE = "Microsoft.Storage/storageAccounts/localUsers"
FROM_FILES = "judged from files, not read from Azure"
ONLY_LIVE = {Facet.ROLES, Facet.DEFENDER}
"""What no file holds: the rules reading them are NOT_IN_FILES offline."""
ROLE_RULES = {"SN-TAG-WRITE-ROLE", "SN-NO-BROAD-APP-ROLES", "SN-NEVER-GRANTED"}
NET_RULES = {"SN-DELETE-LOCK", "SN-BLOB-LOGGING", "SN-BACKUP-PROTECTED"}
NOT_IN_AN_EXPORT = {
    *ROLE_RULES,
    *NET_RULES,
    "SN-DEFENDER-FOR-STORAGE",
    "SN-PRIVATE-ENDPOINT",
    "SN-SHARED-KEY-OFF",
    "SN-PROTOCOL-CONTAINER-MUTABLE",
}
"""What a template export as the portal writes it cannot show: roles and Defender (other
providers), the account's private endpoint connections (not in its resource), the blob
service's shared key switch (an api-version before it), a container's read-only legal hold
and retention policy flags, and the nets beside the account (its locks, diagnostic settings
and backup instances, when the export holds none)."""
EXPORT_API_VERSION = "2025-01-01"
"""An export's apiVersion, older than the audit's pinned 2026-09-01."""
BROKEN = {
    "properties.allowBlobPublicAccess": True,
    "properties.minimumTlsVersion": "TLS1_0",
    "properties.networkAcls.defaultAction": "Allow",
    "blob.properties.deleteRetentionPolicy.days": 1,
    "blob.properties.containerDeleteRetentionPolicy.enabled": False,
}


def account_of(name: str, broken: bool) -> FakeAccount:
    account = compliant_account(name, GROUP)
    for path, value in (BROKEN if broken else {}).items():
        target = account.blob_service_properties if path.startswith("blob.") else account.body
        set_path(target, path.removeprefix("blob."), value)
    # A storage account's GET carries its private endpoint connections in its properties.
    account.body["properties"]["privateEndpointConnections"] = account.private_endpoint_connections
    return account


def cli_output(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the Azure CLI prints it: properties at the top, the SDK's names."""
    flat = {key: value for key, value in body.items() if key != "properties"}
    props = copy.deepcopy(body["properties"])
    renamed = {
        "supportsHttpsTrafficOnly": "enableHttpsTrafficOnly",
        "networkAcls": "networkRuleSet",
    }
    for key, value in props.items():
        flat[renamed.get(key, key)] = value
    if "privateEndpointConnections" in props:
        flat["privateEndpointConnections"] = [
            cli_output(c) for c in props["privateEndpointConnections"]
        ]
    flat["resourceGroup"] = GROUP
    return flat


def cli_files(account: FakeAccount, directory: Path) -> list[Path]:
    """The four `az` outputs of one account, saved as a compliance team would."""
    outputs = {
        "account.json": cli_output(account.body),
        "blob-service.json": cli_output(account.blob_service_properties),
        "policy.json": cli_output(account.management_policy or {}),
        "containers.json": [cli_output(c) for c in account.containers],
        "locks.json": [cli_output(lock) for lock in account.locks],
        "diagnostics.json": [cli_output(s) for s in account.diagnostic_settings],
        "backup-instances.json": account.backup_instances,
    }
    paths = []
    for name, document in outputs.items():
        path = directory / f"{account.name}-{name}"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        paths.append(path)
    return paths


def template_export(
    account: FakeAccount, path: Path, api_version: str = "2026-09-01", *, nets: bool = True
) -> Path:
    """An ARM template export of the account (`az group export`): names by parameter; with
    `nets`, its locks (extension form, `scope`), blob diagnostic settings (nested name form)
    and backup instances (data source by `resourceId`) too."""
    parameter = f"storageAccounts_{account.name}_name"
    name = f"[parameters('{parameter}')]"

    def child(kind: str, suffix: str, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": f"Microsoft.Storage/storageAccounts/{kind}",
            "apiVersion": api_version,
            "name": f"[concat(parameters('{parameter}'), '{suffix}')]",
            "dependsOn": [f"[resourceId('Microsoft.Storage/storageAccounts', {name[1:-1]})]"],
            "properties": body["properties"],
        }

    resources = [
        {
            "type": "Microsoft.Storage/storageAccounts",
            "apiVersion": api_version,
            "name": name,
            "location": "westeurope",
            "sku": account.body["sku"],
            "kind": account.body["kind"],
            "properties": account.body["properties"],
        },
        child("blobServices", "/default", account.blob_service_properties),
        child("managementPolicies", "/default", account.management_policy or {}),
        *(child("blobServices/containers", f"/default/{c['name']}", c) for c in account.containers),
        {"type": "Microsoft.Storage/storageAccounts/fileServices", "name": "ignored"},
    ]
    if nets:
        resources += net_resources(account, parameter)
    document = {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {parameter: {"defaultValue": account.name, "type": "String"}},
        "variables": {},
        "resources": resources,
    }
    path.write_text(json.dumps(document, indent=4), encoding="utf-8")
    return path


def net_resources(account: FakeAccount, parameter: str) -> list[dict[str, Any]]:
    """The account's locks, blob diagnostic settings and backup instances as template
    resources naming the account through `parameter`."""
    found: list[dict[str, Any]] = [
        {
            "type": "Microsoft.Authorization/locks",
            "apiVersion": "2020-05-01",
            "name": lock["name"],
            "scope": f"[concat('Microsoft.Storage/storageAccounts/', parameters('{parameter}'))]",
            "properties": lock["properties"],
        }
        for lock in account.locks
    ]
    found += [
        {
            "type": "Microsoft.Storage/storageAccounts/blobServices/providers/diagnosticSettings",
            "apiVersion": "2021-05-01-preview",
            "name": f"[concat(parameters('{parameter}'), '/default/Microsoft.Insights/"
            f"{setting['name']}')]",
            "properties": setting["properties"],
        }
        for setting in account.diagnostic_settings
    ]
    for instance in account.backup_instances:
        body = copy.deepcopy(instance)
        body["properties"]["dataSourceInfo"]["resourceID"] = (
            f"[resourceId('Microsoft.Storage/storageAccounts', parameters('{parameter}'))]"
        )
        found.append(
            {
                "type": "Microsoft.DataProtection/backupVaults/backupInstances",
                "apiVersion": "2024-04-01",
                "name": f"vault/{instance['name']}",
                "properties": body["properties"],
            }
        )
    return found


def portal_export(account: FakeAccount, path: Path) -> Path:
    """The export as the portal writes it for this account: at an older apiVersion, with no
    private endpoint connections in the account resource, no local users, no container's
    read-only flags and none of the nets beside the account."""
    exported = copy.deepcopy(account)
    exported.body["properties"].pop("privateEndpointConnections", None)
    for container in exported.containers:
        container["properties"].pop("hasLegalHold", None)
        container["properties"].pop("hasImmutabilityPolicy", None)
    return template_export(exported, path, EXPORT_API_VERSION, nets=False)


@pytest.fixture
def fake() -> Iterator[FakeArm]:
    with FakeArm() as server:
        yield server


def live_findings(fake: FakeArm, account: FakeAccount) -> list[Finding]:
    fake.add(account)
    report = run_audit(
        Scope(SUBSCRIPTION, GROUP, account.name),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
    )
    return report.findings


def judged(findings: list[Finding]) -> dict[str, tuple[str, str]]:
    """rule id -> (outcome, message), for the rules whose facets files can hold."""
    return {
        f.rule.id: (f.outcome.value, f.message) for f in findings if not f.rule.facets & ONLY_LIVE
    }


@pytest.mark.parametrize("broken", [False, True], ids=["compliant", "broken"])
@pytest.mark.parametrize("shape", ["cli", "template"])
def test_files_give_the_live_audits_findings(
    fake: FakeArm, tmp_path: Path, shape: str, broken: bool
) -> None:
    """For every rule the files can feed, the offline verdict and message are the live ones."""
    account = account_of("acctdocs", broken)
    live = live_findings(fake, account)
    if shape == "cli":
        report = run_offline_audit(cli_files(account, tmp_path), Thresholds(), "2026-09-01")
    else:
        report = run_offline_audit([template_export(account, tmp_path / "t.json")], Thresholds())
    offline = report.findings
    assert judged(offline) == judged(live)
    assert {f.rule.id for f in offline} == {rule.id for rule in RULES}
    for finding in offline:
        if finding.rule.facets & ONLY_LIVE:
            assert finding.outcome.value == "NOT_IN_FILES", finding.rule.id
    assert any("FAIL" in outcome for outcome, _ in judged(offline).values()) is broken


def test_cli_outputs_without_an_api_version_cannot_show_the_shared_key_switch(
    tmp_path: Path,
) -> None:
    """The blob service's shared key switch is NOT_IN_FILES unless the files' api-version
    shows it."""
    paths = cli_files(account_of("acctdocs", False), tmp_path)
    report = run_offline_audit(paths, Thresholds())
    shared_key = [f for f in report.findings if "shared key" in f.rule.title.lower()]
    assert shared_key
    assert all(f.outcome.value == "NOT_IN_FILES" for f in shared_key)
    assert "allowSharedKeyAccessForServices" in shared_key[0].message


@pytest.mark.parametrize("broken", [False, True], ids=["compliant", "broken"])
def test_a_portal_export_is_judged_on_what_it_shows(tmp_path: Path, broken: bool) -> None:
    """A template export as the portal writes it: the rules it cannot show are NOT_IN_FILES
    (never UNKNOWN, never PASS), every other rule is judged, SN-NO-LOCAL-USERS from the two
    switches the export holds."""
    report = run_offline_audit(
        [portal_export(account_of("acctdocs", broken), tmp_path / "t.json")], Thresholds()
    )
    outcomes = {f.rule.id: f.outcome.value for f in report.findings}
    assert {rule for rule, outcome in outcomes.items() if outcome == "NOT_IN_FILES"} == (
        NOT_IN_AN_EXPORT
    )
    assert "UNKNOWN" not in outcomes.values()
    assert outcomes["SN-NO-LOCAL-USERS"] == "PASS"
    assert ("FAIL" in outcomes.values()) is broken


def test_what_an_export_shows_decides_the_exit_code(tmp_path: Path, run_cli: RunCli) -> None:
    """A compliant export exits 0, even with --fail-on none and NOT_IN_FILES verdicts, which
    stderr counts; a broken one exits 1."""
    good = portal_export(account_of("acctgood", False), tmp_path / "good.json")
    code, out, err = run_cli("audit", "--from-file", str(good))
    assert code == 0, out + err
    assert f"{len(NOT_IN_AN_EXPORT)} verdict(s) NOT_IN_FILES" in err
    assert run_cli("audit", "--from-file", str(good), "--fail-on", "none")[0] == 0
    bad = portal_export(account_of("acctbad", True), tmp_path / "bad.json")
    assert run_cli("audit", "--from-file", str(bad))[0] == 1


def test_a_value_the_file_holds_but_cannot_be_read_stays_unknown(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A setting the file does hold, as an expression that cannot be judged offline, is
    UNKNOWN, not NOT_IN_FILES: the run exits 3."""
    account = account_of("acctexpr", False)
    account.body["properties"]["allowBlobPublicAccess"] = "[parameters('publicAccess')]"
    path = portal_export(account, tmp_path / "t.json")
    code, out, _ = run_cli("audit", "--from-file", str(path), "--format", "json")
    outcomes = {f["rule"]: f["outcome"] for f in json.loads(out)["findings"]}
    assert outcomes["SN-NO-PUBLIC-ACCESS"] == "UNKNOWN"
    assert code == 3


@pytest.mark.parametrize(
    ("switches", "users", "outcome"),
    [
        ({"isSftpEnabled": False, "isLocalUserEnabled": False}, None, "PASS"),
        ({"isSftpEnabled": True, "isLocalUserEnabled": False}, None, "FAIL"),
        ({"isSftpEnabled": False, "isLocalUserEnabled": True}, None, "NOT_IN_FILES"),
        ({"isSftpEnabled": False}, None, "NOT_IN_FILES"),
        ({"isSftpEnabled": False, "isLocalUserEnabled": True}, ["sftpuser"], "FAIL"),
    ],
)
def test_local_users_are_decided_by_the_switches_where_they_suffice(
    tmp_path: Path, switches: dict[str, bool], users: list[str] | None, outcome: str
) -> None:
    """Both switches off pass without a local users file; SFTP on fails; local users not
    switched off need the `az storage account local-user list` output, and without it the
    rule is NOT_IN_FILES."""
    account = account_of("acctusers", False)
    for key in ("isSftpEnabled", "isLocalUserEnabled"):
        account.body["properties"].pop(key, None)
    account.body["properties"].update(switches)
    paths = cli_files(account, tmp_path)
    if users is not None:
        listed = [
            {"id": f"{account.id}/localUsers/{name}", "name": name, "type": LOCAL_USER_TYPE}
            for name in users
        ]
        (tmp_path / "users.json").write_text(json.dumps(listed), encoding="utf-8")
        paths.append(tmp_path / "users.json")
    report = run_offline_audit(paths, Thresholds(), "2026-09-01")
    (finding,) = [f for f in report.findings if f.rule.id == "SN-NO-LOCAL-USERS"]
    assert finding.outcome.value == outcome, finding.message


def test_every_format_shows_not_in_files_as_its_own_state(tmp_path: Path) -> None:
    """JSON counts and states, the table and CSV state, Markdown rows, HTML cells, JUnit
    skipped cases and SARIF notes (descriptor not-in-files, no result) all carry it."""
    report = run_offline_audit(
        [portal_export(account_of("acctdocs", False), tmp_path / "t.json")], Thresholds()
    )
    context = ReportContext()
    texts = {name: render(report, context) for name, render in RENDERERS.items()}
    document = json.loads(texts["json"])
    assert document["summary"]["NOT_IN_FILES"] == len(NOT_IN_AN_EXPORT)
    assert document["summary"]["UNKNOWN"] == 0
    assert {f["rule"] for f in document["findings"] if f["state"] == "NOT_IN_FILES"} == (
        NOT_IN_AN_EXPORT
    )
    for name in ("table", "csv", "markdown", "html"):
        assert texts[name].count("NOT_IN_FILES") >= len(NOT_IN_AN_EXPORT), name
    assert texts["junit"].count("not in the files") >= len(NOT_IN_AN_EXPORT)
    run = json.loads(texts["sarif"])["runs"][0]
    notes = [
        n
        for n in run["invocations"][0]["toolExecutionNotifications"]
        if n["descriptor"]["id"] == "not-in-files"
    ]
    assert {n["associatedRule"]["id"] for n in notes} == NOT_IN_AN_EXPORT
    assert {n["level"] for n in notes} == {"note"}
    assert run["results"] == []


def test_a_facet_no_file_holds_is_unknown_and_says_so(tmp_path: Path) -> None:
    """Only the account file: the lifecycle rules are UNKNOWN 'not in the files', never a FAIL."""
    account = account_of("acctdocs", False)
    path = tmp_path / "account.json"
    path.write_text(json.dumps(cli_output(account.body)), encoding="utf-8")
    report = run_offline_audit([path], Thresholds(), "2026-09-01")
    lifecycle = [f for f in report.findings if Facet.LIFECYCLE in f.rule.facets]
    assert lifecycle
    for finding in lifecycle:
        assert finding.outcome.value == "UNKNOWN"
        assert "not in the files" in finding.message


def test_every_format_says_it_was_judged_from_files(tmp_path: Path) -> None:
    """Table, JSON, SARIF, JUnit, Markdown and HTML all name the files, not a live scope."""
    paths = cli_files(account_of("acctdocs", False), tmp_path)
    report = run_offline_audit(paths, Thresholds(), "2026-09-01")
    context = ReportContext()
    for name, render in RENDERERS.items():
        text = render(report, context).replace("\\", "")  # Markdown's escapes
        assert FROM_FILES in text, name
        assert "account.json" in text, name


def test_the_cli_judges_files_without_a_credential(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No subscription and no token: the files are judged, what they cannot show is
    NOT_IN_FILES (said in the table), and the compliant account exits 0; a broken one 1."""
    for name in ("AZURE_SUBSCRIPTION_ID", "SAFETYNET_ARM_TOKEN", "SAFETYNET_ARM_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    paths = cli_files(account_of("acctdocs", False), tmp_path)
    code, out, err = run_cli(
        "audit", "--from-file", *map(str, paths), "--storage-api-version", "2026-09-01"
    )
    assert code == 0, err
    assert out.startswith(FROM_FILES)
    assert "role assignments are read only from Azure" in out
    assert "NOT_IN_FILES" in out
    code, out, _ = run_cli("audit", "--from-file", *map(str, paths), "--format", "json")
    assert json.loads(out)["scope"].startswith(FROM_FILES)
    broken = cli_files(account_of("acctbad", True), tmp_path)
    assert run_cli("audit", "--from-file", *map(str, broken))[0] == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\x00\xfe", "not UTF-8 or UTF-16 text"),
        (b"[]", "an empty list: nothing to judge"),
        (b'{"name": "x"}', "not a storage account, blob service properties"),
        (b'{"type": "Microsoft.Compute/virtualMachines", "name": "vm"}', "type 'Microsoft.Compute"),
        (b'{"type": "Microsoft.Storage/storageAccounts"}', "neither a resource id nor a name"),
        (
            b'{"resources": [{"type": "Microsoft.Storage/storageAccounts", '
            b'"name": "[variables(\'n\')]", "properties": {}}]}',
            "cannot resolve the name",
        ),
        (b'{"resources": []}', "holds no Microsoft.Storage account resource"),
        (b"[" * 100_000, "nests deeper than 64 levels"),
    ],
)
def test_an_unreadable_or_unknown_file_is_bad_usage(
    tmp_path: Path, run_cli: RunCli, content: bytes, words: str
) -> None:
    """A file that is not JSON or none of the known shapes exits 2, naming the file."""
    path = tmp_path / "saved.json"
    path.write_bytes(content)
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert code == 2
    assert "saved.json" in err
    assert words in err


def test_reading_is_bounded_and_duplicates_are_refused(tmp_path: Path, run_cli: RunCli) -> None:
    """A file over the size bound, a missing file and two account documents are refused."""
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    assert f"larger than {MAX_FILE_BYTES} bytes" in run_cli("audit", "--from-file", str(big))[2]
    assert "No such file" in run_cli("audit", "--from-file", str(tmp_path / "none.json"))[2]
    account = tmp_path / "a.json"
    account.write_text(json.dumps(cli_output(account_of("acctdocs", False).body)))
    code, _, err = run_cli("audit", "--from-file", str(account), str(account))
    assert code == 2
    assert "a second storageaccounts document for account 'acctdocs'" in err


def test_a_powershell_saved_file_is_read(tmp_path: Path) -> None:
    """UTF-16 with a BOM (PowerShell's `>`) is read like UTF-8."""
    path = tmp_path / "account.json"
    body = cli_output(account_of("acctdocs", False).body)
    path.write_bytes(json.dumps(body).encode("utf-16"))
    report = run_offline_audit([path], Thresholds(), "2026-09-01")
    assert [result.account.name for result in report.results] == ["acctdocs"]


def test_a_saved_az_storage_account_show_is_judged(tmp_path: Path) -> None:
    """The CLI's own output, nulls and all: flattened names read, nulls take the REST
    defaults, no private endpoint a FAIL, and facets it does not hold UNKNOWN."""
    saved = Path(__file__).parent / "data" / "az-storage-account-show.json"
    report = run_offline_audit([saved], Thresholds(), "2024-01-01")
    outcomes = {f.rule.id: f.outcome.value for f in report.findings}
    assert [result.account.name for result in report.results] == ["acctcli"]
    assert outcomes["SN-HTTPS-TLS"] == "PASS"
    assert outcomes["SN-NO-PUBLIC-ACCESS"] == "PASS"
    assert outcomes["SN-NETWORK-DEFAULT-DENY"] == "FAIL"
    assert outcomes["SN-PUBLIC-NETWORK-ACCESS"] == "FAIL"
    assert outcomes["SN-INFRA-ENCRYPTION"] == "FAIL"
    assert outcomes["SN-PRIVATE-ENDPOINT"] == "FAIL"
    assert outcomes["SN-BLOB-SOFT-DELETE"] == "UNKNOWN"
    assert outcomes["SN-TAG-WRITE-ROLE"] == "NOT_IN_FILES"


def test_the_docs_table_of_what_files_cannot_show_names_the_rules_that_say_so(
    tmp_path: Path,
) -> None:
    """docs/policies.md's NOT_IN_FILES table lists exactly the rules a portal export leaves
    NOT_IN_FILES, and SN-NO-LOCAL-USERS (NOT_IN_FILES when its switches do not settle it)."""
    text = (Path(__file__).parents[2] / "docs" / "policies.md").read_text(encoding="utf-8")
    table = text[text.index("| fact | why files cannot show it | rules |") :].split("\n\n")[0]
    listed = set(re.findall(r"`(SN-[A-Z-]+)`", table))
    assert listed == {*NOT_IN_AN_EXPORT, "SN-NO-LOCAL-USERS"}


def test_storage_api_version_does_not_apply_to_a_template_export(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """An export written at an api-version without the shared key switch stays NOT_IN_FILES
    for it whatever --storage-api-version says, as the option's help and docs/policies.md
    say: a template's resources name their own apiVersion."""
    path = portal_export(account_of("acctapi", False), tmp_path / "t.json")
    code, out, _ = run_cli(
        "audit", "--from-file", str(path), "--storage-api-version", "2026-09-01", "--format", "json"
    )
    outcomes = {f["rule"]: f["outcome"] for f in json.loads(out)["findings"]}
    assert (code, outcomes["SN-SHARED-KEY-OFF"]) == (0, "NOT_IN_FILES")
    audit = build_parser()._subparsers._group_actions[0].choices["audit"]  # type: ignore[union-attr]
    (option,) = [a for a in audit._actions if "--storage-api-version" in a.option_strings]
    docs = (Path(__file__).parents[2] / "docs" / "policies.md").read_text(encoding="utf-8")
    for text in (str(option.help), docs):
        assert "does not apply to a template export" in text


@pytest.mark.parametrize(
    ("key", "value", "rule", "outcome"),
    [
        ("enableHttpsTrafficOnly", False, "SN-HTTPS-TLS", "FAIL"),
        ("networkRuleSet", {"bypass": "None", "defaultAction": "Deny"}, "SN-TRUSTED-SERVICES", "FAIL"),
        ("networkRuleSet", {"bypass": "AzureServices", "defaultAction": "Deny"}, "SN-NETWORK-DEFAULT-DENY", "PASS"),
    ],
)  # fmt: skip
def test_the_cli_names_of_az_storage_account_show_are_read(
    tmp_path: Path, key: str, value: object, rule: str, outcome: str
) -> None:
    """`az storage account show` names the HTTPS switch `enableHttpsTrafficOnly` and the
    firewall `networkRuleSet` (the SDK's names): each is read as REST's property, so
    `enableHttpsTrafficOnly: false` fails SN-HTTPS-TLS and the firewall it gives is judged,
    where an unread name would leave the permissive defaults (HTTPS only, no firewall)."""
    saved = json.loads(
        (Path(__file__).parent / "data" / "az-storage-account-show.json").read_text()
    )
    saved[key] = value
    path = tmp_path / "account.json"
    path.write_text(json.dumps(saved), encoding="utf-8")
    report = run_offline_audit([path], Thresholds(), "2024-01-01")
    outcomes = {f.rule.id: f.outcome.value for f in report.findings}
    assert outcomes[rule] == outcome
