"""`safetynet audit` end to end: the real azure-mgmt clients against a fake ARM on loopback HTTPS.

The fake checks the bearer token from SAFETYNET_ARM_TOKEN; the clients trust its throwaway CA
through REQUESTS_CA_BUNDLE. Every output format is parsed back.
"""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.rules import RULES, Outcome
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.live import STORAGE_API_VERSION, ArmReader
from blob_safetynet.policies.sources.results import ErrorKind
from testkit.arm_fake import (
    BLOB_OWNER,
    MALFORMED,
    STORAGE_ACCOUNT_CONTRIBUTOR,
    SUBSCRIPTION,
    TOKEN,
    Failure,
    FakeAccount,
    FakeArm,
    assignment,
    compliant_account,
    defender_setting,
    file_storage_account,
    local_user,
    set_path,
)

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
GROUP = "rg-docs"

Audit = Callable[..., tuple[int, str]]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A running fake ARM with one compliant account, and the environment pointing at it."""
    with FakeArm(page_size=2) as server:
        server.add(compliant_account("good", GROUP))
        monkeypatch.setenv("SAFETYNET_ARM_TOKEN", TOKEN)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", server.ca_file)
        monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
        monkeypatch.setenv("SAFETYNET_ARM_ENDPOINT", server.endpoint)
        yield server


@pytest.fixture
def audit(tmp_path: Path, fake: FakeArm) -> Audit:
    """Runs `safetynet audit ARGS --output FILE` and returns (exit code, file text)."""

    def run(*args: str) -> tuple[int, str]:
        output = tmp_path / "report.out"
        output.unlink(missing_ok=True)
        code = main(["audit", *args, "--output", str(output)])
        return code, output.read_text() if output.exists() else ""

    return run


def broken(fake: FakeArm, name: str, path: str, value: object) -> FakeAccount:
    account = fake.add(compliant_account(name, GROUP))
    target = account.blob_service_properties if path.startswith("blob.") else account.body
    set_path(target, path.removeprefix("blob."), value)
    return account


def findings(text: str) -> dict[tuple[str, str], str]:
    document = json.loads(text)
    return {(f["account"], f["rule"]): f["outcome"] for f in document["findings"]}


def test_compliant_account_passes(audit: Audit) -> None:
    """A compliant account gives only PASS findings and exit 0."""
    code, text = audit("--format", "json")
    assert code == ExitCode.OK
    assert set(findings(text).values()) == {Outcome.PASS.value}
    assert len(findings(text)) == len(RULES)


def test_json_findings_have_the_documented_fields(audit: Audit) -> None:
    """Each JSON finding has rule, account, outcome, severity and message."""
    _, text = audit("--format", "json")
    document = json.loads(text)
    assert {"rule", "account", "outcome", "severity", "message"} <= set(document["findings"][0])


def test_broken_variant_fails_and_exits_one(audit: Audit, fake: FakeArm) -> None:
    """Shared key access allowed fails its rule and, at --fail-on high, exits 1."""
    broken(fake, "keys", "properties.allowSharedKeyAccess", True)
    code, text = audit("--format", "json", "--resource-group", GROUP)
    assert code == ExitCode.FINDINGS
    assert findings(text)[("keys", "SN-SHARED-KEY-OFF")] == Outcome.FAIL.value
    assert findings(text)[("good", "SN-SHARED-KEY-OFF")] == Outcome.PASS.value


def test_fail_on_threshold_ignores_lower_severities(audit: Audit, fake: FakeArm) -> None:
    """A high-severity failure does not fail the run at --fail-on critical."""
    broken(fake, "keys", "properties.allowSharedKeyAccess", True)
    code, _ = audit("--format", "json", "--fail-on", "critical")
    assert code == ExitCode.OK


def test_accounts_are_read_through_paged_lists(audit: Audit, fake: FakeArm) -> None:
    """Five accounts across pages of two are all audited."""
    for number in range(4):
        fake.add(compliant_account(f"paged{number}", GROUP))
    _, text = audit("--format", "json")
    assert json.loads(text)["summary"]["accounts"] == 5


def test_single_account_by_resource_id(audit: Audit, fake: FakeArm) -> None:
    """--account with a full resource id audits exactly that account."""
    other = broken(fake, "other", "properties.minimumTlsVersion", "TLS1_0")
    code, text = audit("--format", "json", "--account", other.id)
    assert code == ExitCode.FINDINGS
    assert {account for account, _ in findings(text)} == {"other"}


def test_missing_management_policy_fails_the_backstop(audit: Audit, fake: FakeArm) -> None:
    """An account whose management policy answers 404 fails the pending lifecycle rule."""
    account = fake.add(compliant_account("nolifecycle", GROUP))
    account.management_policy = None
    code, text = audit("--format", "json")
    assert code == ExitCode.FINDINGS
    assert findings(text)[("nolifecycle", "SN-PENDING-LIFECYCLE")] == Outcome.FAIL.value


def test_forbidden_read_is_a_permission_error_not_a_failure(audit: Audit, fake: FakeArm) -> None:
    """A 403 on role assignments is reported as a permission error; its rules are UNKNOWN."""
    account = fake.add(compliant_account("locked", GROUP))
    account.failures["roleAssignments"] = Failure(403)
    code, text = audit("--format", "json")
    document = json.loads(text)
    assert code == ExitCode.INCOMPLETE
    assert [e["kind"] for e in document["errors"]] == [ErrorKind.PERMISSION.value]
    assert findings(text)[("locked", "SN-TAG-WRITE-ROLE")] == Outcome.UNKNOWN.value
    assert Outcome.FAIL.value not in set(findings(text).values())


def test_malformed_body_is_reported_as_such(audit: Audit, fake: FakeArm) -> None:
    """A body that is not JSON is a malformed-response error; the facet's rules are UNKNOWN."""
    account = fake.add(compliant_account("garbled", GROUP))
    account.failures["blobServices"] = Failure(200, MALFORMED)
    code, text = audit("--format", "json")
    document = json.loads(text)
    assert code == ExitCode.INCOMPLETE
    assert [e["kind"] for e in document["errors"]] == [ErrorKind.MALFORMED.value]
    assert findings(text)[("garbled", "SN-BLOB-SOFT-DELETE")] == Outcome.UNKNOWN.value


def test_wrong_token_is_an_authentication_error(
    audit: Audit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token ARM refuses is reported as an authentication error, with no findings."""
    monkeypatch.setenv("SAFETYNET_ARM_TOKEN", "not-the-token")
    code, text = audit("--format", "json")
    document = json.loads(text)
    assert code == ExitCode.INCOMPLETE
    assert document["findings"] == []
    assert [e["kind"] for e in document["errors"]] == [ErrorKind.AUTH.value]


def test_token_never_appears_in_output(
    audit: Audit, fake: FakeArm, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bearer token is in no report format and not on stdout or stderr."""
    fake.add(compliant_account("locked", GROUP)).failures["containers"] = Failure(403)
    texts = [audit("--format", fmt)[1] for fmt in ("table", "json", "sarif", "junit")]
    captured = capsys.readouterr()
    assert all(TOKEN not in text for text in [*texts, captured.out, captured.err])


def test_sarif_validates_against_the_schema(audit: Audit, fake: FakeArm) -> None:
    """SARIF output is valid 2.1.0 and reports the failing rule as a result of kind fail; a rule
    that could not be judged is a notification naming the rule, not a result."""
    broken(fake, "public", "properties.allowBlobPublicAccess", True)
    fake.add(compliant_account("locked", GROUP)).failures["roleAssignments"] = Failure(403)
    _, text = audit("--format", "sarif")
    document: dict[str, Any] = json.loads(text)
    jsonschema.validate(document, SCHEMA)
    run = document["runs"][0]
    failed = {(r["ruleId"], r["kind"]) for r in run["results"]}
    assert ("SN-NO-PUBLIC-ACCESS", "fail") in failed
    assert {kind for _, kind in failed} == {"fail"}
    unknown = [
        n["associatedRule"]["id"]
        for n in run["invocations"][0]["toolExecutionNotifications"]
        if n["descriptor"]["id"] == "unknown"
    ]
    assert "SN-TAG-WRITE-ROLE" in unknown
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {r.id for r in RULES}
    assert run["invocations"][0]["executionSuccessful"] is False


def test_junit_parses_with_failures_per_account(audit: Audit, fake: FakeArm) -> None:
    """JUnit output is XML with a testsuite per account and a failure for the broken rule (and
    for point-in-time restore, which needs blob soft delete)."""
    broken(fake, "nosoft", "blob.properties.deleteRetentionPolicy.enabled", False)
    _, text = audit("--format", "junit")
    root = ET.fromstring(text)  # noqa: S314 (our own output, not untrusted input)
    assert root.tag == "testsuites"
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {"good", "nosoft"}
    failed = [
        case.get("name", "").split()[0]
        for case in suites["nosoft"].iter("testcase")
        if case.find("failure") is not None
    ]
    assert failed == ["SN-BLOB-SOFT-DELETE", "SN-POINT-IN-TIME-RESTORE"]
    assert suites["good"].get("failures") == "0"
    assert root.get("tests") == str(sum(1 for _ in root.iter("testcase")))


def test_table_lists_every_finding(audit: Audit) -> None:
    """The table has a header and one line per finding."""
    _, text = audit("--format", "table")
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["ACCOUNT", "RULE", "SEVERITY", "OUTCOME"]
    assert sum(line.startswith("good ") for line in lines) == len(RULES)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--account", "good"], id="account-without-group"),
        pytest.param(["--account", "/not/an/id"], id="bad-resource-id"),
        pytest.param(["--arm-endpoint", "http://127.0.0.1:1"], id="plain-http-endpoint"),
        pytest.param(["--concurrency", "0"], id="zero-concurrency"),
        pytest.param(["--max-pending-days", "0"], id="zero-days"),
    ],
)
def test_bad_usage_exits_two(
    audit: Audit, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Options that name no valid audit exit 2 with a message on stderr."""
    code, _ = audit(*args)
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("safetynet audit: ")


def test_missing_subscription_exits_two(audit: Audit, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --subscription or AZURE_SUBSCRIPTION_ID the command is bad usage."""
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID")
    assert audit()[0] == ExitCode.USAGE


def test_unknown_format_is_rejected_by_argparse(audit: Audit) -> None:
    """An unknown --format exits 2 (argparse's usage error), without a SystemExit."""
    assert audit("--format", "xlsx")[0] == ExitCode.USAGE


def test_reads_use_the_pinned_storage_api_version(audit: Audit, fake: FakeArm) -> None:
    """Every Microsoft.Storage read carries the pinned api-version, not whatever the SDK defaults to."""
    audit("--format", "json")
    assert fake.storage_api_versions_seen == {STORAGE_API_VERSION}


def test_lagging_cloud_needs_an_older_api_version_and_says_what_it_cannot_see(
    audit: Audit, fake: FakeArm
) -> None:
    """A cloud without the pinned version refuses it (exit 3); with an older one the
    per-service shared key switch is unseen, so SN-SHARED-KEY-OFF is UNKNOWN, not PASS."""
    fake.storage_api_versions = frozenset({"2024-01-01", "2023-05-01"})
    code, text = audit("--format", "json")
    assert code == ExitCode.INCOMPLETE
    assert "NoRegisteredProviderFound" in json.loads(text)["errors"][0]["message"]
    code, text = audit("--format", "json", "--storage-api-version", "2024-01-01")
    # A rule that could not be judged makes the audit incomplete, never a pass (issue 11).
    assert code == ExitCode.INCOMPLETE
    assert findings(text)[("good", "SN-SHARED-KEY-OFF")] == Outcome.UNKNOWN.value
    assert findings(text)[("good", "SN-BLOB-SOFT-DELETE")] == Outcome.PASS.value


def test_shared_key_enabled_for_the_blob_service_fails(audit: Audit, fake: FakeArm) -> None:
    """allowSharedKeyAccessForServices.blob.enabled=true fails even with allowSharedKeyAccess false."""
    broken(
        fake, "blobkeys", "properties.allowSharedKeyAccessForServices", {"blob": {"enabled": True}}
    )
    code, text = audit("--format", "json")
    assert code == ExitCode.FINDINGS
    assert findings(text)[("blobkeys", "SN-SHARED-KEY-OFF")] == Outcome.FAIL.value
    assert findings(text)[("good", "SN-SHARED-KEY-OFF")] == Outcome.PASS.value


def test_storage_account_contributor_on_an_app_is_broad_unless_it_deploys(
    audit: Audit, fake: FakeArm
) -> None:
    """An app identity with Storage Account Contributor fails both role rules; naming it with
    --deployment-principal exempts it."""
    account = fake.add(compliant_account("wide", GROUP))
    account.role_assignments.append(
        assignment(
            account.id, "22222222-0000-0000-0000-000000000001", STORAGE_ACCOUNT_CONTRIBUTOR, 2
        )
    )
    code, text = audit("--format", "json")
    assert code == ExitCode.FINDINGS
    assert findings(text)[("wide", "SN-NO-BROAD-APP-ROLES")] == Outcome.FAIL.value
    assert findings(text)[("wide", "SN-NEVER-GRANTED")] == Outcome.FAIL.value
    code, text = audit(
        "--format", "json", "--deployment-principal", "22222222-0000-0000-0000-000000000001"
    )
    assert code == ExitCode.OK
    assert findings(text)[("wide", "SN-NEVER-GRANTED")] == Outcome.PASS.value


def test_conditioned_assignments_are_read_and_judged(audit: Audit, fake: FakeArm) -> None:
    """Blob Data Owner fenced by an ABAC condition to .safetynet/ passes; an unparsed condition is UNKNOWN."""
    fenced = (
        "((!(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/"
        "permanentDelete/action'})) OR (@Resource[Microsoft.Storage/storageAccounts/"
        "blobServices/containers/blobs:path] StringStartsWith '.safetynet/verify/'))"
    )
    ok = fake.add(compliant_account("fenced", GROUP))
    ok.role_assignments.append(
        assignment(ok.id, "33333333-0000-0000-0000-000000000001", BLOB_OWNER, 2, condition=fenced)
    )
    odd = fake.add(compliant_account("odd", GROUP))
    odd.role_assignments.append(
        assignment(
            odd.id,
            "33333333-0000-0000-0000-000000000002",
            BLOB_OWNER,
            2,
            condition="@Request[x] StringEquals 'y'",
        )
    )
    _, text = audit("--format", "json")
    assert findings(text)[("fenced", "SN-NEVER-GRANTED")] == Outcome.PASS.value
    assert findings(text)[("odd", "SN-NEVER-GRANTED")] == Outcome.UNKNOWN.value

    """An unknown --format exits 2 (argparse's usage error), without a SystemExit."""
    assert audit("--format", "xlsx")[0] == ExitCode.USAGE


# Hostile input and careless operators (issue 11)


def test_token_with_a_windows_line_ending_is_used_not_echoed(
    audit: Audit, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token read from a CRLF file works, and no traceback prints it or exits 1."""
    monkeypatch.setenv("SAFETYNET_ARM_TOKEN", TOKEN + "\r\n")
    code, text = audit("--format", "json")
    captured = capsys.readouterr()
    assert code == ExitCode.OK
    assert all(TOKEN not in t for t in (text, captured.out, captured.err))


def test_token_with_inner_garbage_is_refused_unseen(
    audit: Audit, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token with a control character inside is a usage error that does not show it."""
    monkeypatch.setenv("SAFETYNET_ARM_TOKEN", f"{TOKEN}\x1bsecond-half")
    code, _ = audit("--format", "json")
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE
    assert json.loads(captured.out)["error"]["kind"] == "usage"
    assert TOKEN not in captured.out + captured.err


def test_arm_error_that_echoes_the_token_reaches_no_report(
    audit: Audit, fake: FakeArm, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ARM error body quoting the bearer token is scrubbed from every format and stream."""
    body = {"error": {"code": "AuthorizationFailed", "message": f"Bearer {TOKEN} may not read"}}
    fake.add(compliant_account("echo", GROUP)).failures["containers"] = Failure(403, body)
    texts = [audit("--format", fmt)[1] for fmt in ("table", "json", "sarif", "junit")]
    captured = capsys.readouterr()
    assert all("AuthorizationFailed" in text for text in texts)
    assert all(TOKEN not in text for text in [*texts, captured.out, captured.err])


@pytest.mark.parametrize("where", ["directory", "under-a-file", "proc"])
def test_unusable_output_is_a_usage_error(
    fake: FakeArm, tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output naming a directory or an unwritable path exits 2 with a message, no traceback."""
    (tmp_path / "afile").write_text("x")
    output = {
        "directory": tmp_path,
        "under-a-file": tmp_path / "afile" / "report.json",
        "proc": Path("/proc/safetynet-report.json"),
    }[where]
    code = main(["audit", "--output", str(output)])
    assert code == ExitCode.USAGE
    assert "--output" in capsys.readouterr().err


def test_unknown_outcomes_without_read_errors_are_incomplete(audit: Audit, fake: FakeArm) -> None:
    """Rules that could not be judged (an unreadable account body) exit 3, never 0."""
    broken(fake, "odd", "properties", "not an object")
    code, text = audit("--format", "json", "--fail-on", "none")
    assert json.loads(text)["errors"] == []
    assert Outcome.UNKNOWN.value in set(findings(text).values())
    assert code == ExitCode.INCOMPLETE


def test_no_account_found_is_incomplete(audit: Audit) -> None:
    """An audit that finds zero accounts exits 3: it looked at nothing."""
    code, text = audit("--format", "json", "--resource-group", "rg-empty")
    assert json.loads(text)["summary"]["accounts"] == 0
    assert code == ExitCode.INCOMPLETE


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--arm-endpoint", "https://arm.example.com"], "--allow-custom-endpoint"),
        (["--arm-endpoint", "https://127.0.0.1:1/?sig=x"], "query string"),
        (["--subscription", "not-a-guid"], "subscription"),
        (["--resource-group", "rg/../x"], "resource group"),
        (["--account", "Bad_Name", "--resource-group", GROUP], "account"),
        (["--container", "../x"], "--container"),
        (["--concurrency", "100000000"], "--concurrency"),
        (["--max-pending-days", "\u0663"], "--max-pending-days"),
    ],
)
def test_hostile_options_are_usage_errors_with_json(
    audit: Audit, args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Names, endpoints and numbers Azure would not accept exit 2 and still print JSON."""
    code, _ = audit("--format", "json", *args)
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE
    assert named in captured.err
    assert json.loads(captured.out.splitlines()[-1])["error"]["exit_code"] == ExitCode.USAGE


def test_table_escapes_names_from_arm(audit: Audit, fake: FakeArm) -> None:
    """An account name with a newline from ARM stays on its row, escaped, in the table."""
    fake.add(compliant_account("evil\nforged", GROUP))
    _, text = audit("--format", "table")
    assert not any(line.startswith("forged") for line in text.splitlines())
    assert "evil\\nforged" in text


def test_unreadable_container_list_makes_protocol_rules_unknown_and_exits_three(
    audit: Audit, fake: FakeArm
) -> None:
    """A 403 on the container list leaves the protocol rules UNKNOWN with the reason, not a
    critical FAIL, and the audit exits 3."""
    locked = compliant_account("locked", GROUP)
    locked.body["kind"] = "Storage"
    locked.failures["containers"] = Failure(403)
    locked.management_policy = None
    fake.add(locked)
    code, text = audit("--resource-group", GROUP, "--format", "json")
    judged = findings(text)
    assert code == ExitCode.INCOMPLETE
    assert judged[("locked", "SN-ACCOUNT-KIND")] == Outcome.UNKNOWN.value
    assert judged[("locked", "SN-PENDING-LIFECYCLE")] == Outcome.UNKNOWN.value
    message = next(
        f["message"]
        for f in json.loads(text)["findings"]
        if (f["account"], f["rule"]) == ("locked", "SN-ACCOUNT-KIND")
    )
    assert "permission: blobContainers/list" in message


def test_file_storage_account_is_not_applicable_and_the_audit_can_pass(
    audit: Audit, fake: FakeArm
) -> None:
    """A FileStorage account's blob rules are NOT_APPLICABLE (no blob read, no error), its
    account rules are judged, and a subscription holding it exits 0."""
    fake.add(file_storage_account("files", GROUP))
    code, text = audit("--format", "json")
    assert code == ExitCode.OK
    judged = findings(text)
    assert judged[("files", "SN-ACCOUNT-KIND")] == Outcome.NOT_APPLICABLE.value
    assert judged[("files", "SN-BLOB-SOFT-DELETE")] == Outcome.NOT_APPLICABLE.value
    assert judged[("files", "SN-SHARED-KEY-OFF")] == Outcome.PASS.value
    assert judged[("files", "SN-PUBLIC-NETWORK-ACCESS")] == Outcome.PASS.value
    assert json.loads(text)["errors"] == []


def test_baseline_rules_judge_accounts_without_the_protocol_container(
    audit: Audit, fake: FakeArm
) -> None:
    """An account without the protocol's container still gets soft delete and the other
    baseline verdicts in a subscription audit; protocol rules skip it."""
    other = compliant_account("logs", GROUP)
    other.containers = [{**other.containers[0], "name": "logs"}]
    other.management_policy = None
    set_path(other.blob_service_properties, "properties.deleteRetentionPolicy.enabled", False)
    fake.add(other)
    code, text = audit("--format", "json")
    judged = findings(text)
    assert judged[("logs", "SN-BLOB-SOFT-DELETE")] == Outcome.FAIL.value
    assert judged[("logs", "SN-CONTAINER-SOFT-DELETE")] == Outcome.PASS.value
    assert ("logs", "SN-PENDING-LIFECYCLE") not in judged
    assert code == ExitCode.FINDINGS


@pytest.mark.parametrize(
    ("rule_id", "operation", "kind"),
    [
        ("SN-PRIVATE-ENDPOINT", "privateEndpointConnections", "permission"),
        ("SN-NO-LOCAL-USERS", "localUsers", "permission"),
        ("SN-DEFENDER-FOR-STORAGE", "defender", "permission"),
    ],
)
def test_new_reads_that_fail_leave_their_rule_unknown(
    audit: Audit, fake: FakeArm, rule_id: str, operation: str, kind: str
) -> None:
    """A forbidden read of private endpoints, local users (on an account whose local users are
    not disabled) or Defender makes only its rule UNKNOWN, named as a permission error, and the
    audit exits 3."""
    fake.accounts["good"].failures[operation] = Failure(403)
    fake.accounts["good"].body["properties"]["isLocalUserEnabled"] = True
    code, text = audit("--format", "json")
    assert findings(text)[("good", rule_id)] == Outcome.UNKNOWN.value
    assert [e["kind"] for e in json.loads(text)["errors"]] == [kind]
    assert code == ExitCode.INCOMPLETE


def test_switches_off_settle_local_users_but_a_failed_read_still_exits_3(
    audit: Audit, fake: FakeArm
) -> None:
    """With SFTP and local users switched off the rule passes without the local users' list,
    as its own check says; the forbidden read is still reported and the audit exits 3."""
    fake.accounts["good"].failures["localUsers"] = Failure(403)
    code, text = audit("--format", "json")
    assert findings(text)[("good", "SN-NO-LOCAL-USERS")] == Outcome.PASS.value
    assert [e["kind"] for e in json.loads(text)["errors"]] == ["permission"]
    assert code == ExitCode.INCOMPLETE


@pytest.mark.parametrize(
    ("rule_id", "change"),
    [
        ("SN-PRIVATE-ENDPOINT", lambda a: setattr(a, "private_endpoint_connections", [])),
        ("SN-NO-LOCAL-USERS", lambda a: a.local_users.append(local_user(a.id))),
        (
            "SN-DEFENDER-FOR-STORAGE",
            lambda a: setattr(a, "defender", defender_setting(a.id, enabled=False)),
        ),
    ],
)
def test_new_reads_are_served_and_judged(
    audit: Audit, fake: FakeArm, rule_id: str, change: Callable[[FakeAccount], None]
) -> None:
    """The fake ARM serves private endpoint connections, local users and Defender settings,
    and a broken one fails its rule through the real clients."""
    account = fake.accounts["good"]
    account.body["properties"]["isLocalUserEnabled"] = None
    change(account)
    _, text = audit("--format", "json")
    assert findings(text)[("good", rule_id)] == Outcome.FAIL.value


@pytest.mark.parametrize(
    ("tier", "outcome"), [("Standard", Outcome.PASS), ("Free", Outcome.FAIL), (None, Outcome.FAIL)]
)
def test_without_an_account_setting_the_subscription_plan_decides_defender(
    audit: Audit, fake: FakeArm, tier: str | None, outcome: Outcome
) -> None:
    """An account with no Defender setting of its own (404) is judged by the subscription's
    StorageAccounts plan: Standard passes, Free or no plan fails."""
    fake.accounts["good"].defender = None
    fake.defender_plan = tier
    _, text = audit("--format", "json")
    assert findings(text)[("good", "SN-DEFENDER-FOR-STORAGE")] == outcome.value


def test_the_plan_is_read_once_per_run(audit: Audit, fake: FakeArm) -> None:
    """Accounts without a setting of their own share one read of the subscription's plan."""
    for name in ("one", "two", "three"):
        fake.add(compliant_account(name, GROUP)).defender = None
    fake.accounts["good"].defender = None
    fake.defender_plan = "Standard"
    before = fake.requests
    audit("--format", "json", "--concurrency", "1")
    # 7 of the account's own, and 3 for the nets beside it: its lock list (which holds its
    # lock, so the group's and subscription's are not read), diagnostic settings, backups.
    reads_per_account, listing_pages, role_definition, plan = 10, 2, 1, 1
    expected = 4 * reads_per_account + listing_pages + role_definition + plan
    assert fake.requests - before == expected


def test_an_unreadable_plan_leaves_defender_unknown(audit: Audit, fake: FakeArm) -> None:
    """A 403 on the subscription's plan is a permission error and leaves Defender UNKNOWN."""
    fake.accounts["good"].defender = None
    fake.plan_failure = Failure(403)
    code, text = audit("--format", "json")
    assert findings(text)[("good", "SN-DEFENDER-FOR-STORAGE")] == Outcome.UNKNOWN.value
    assert [e["operation"] for e in json.loads(text)["errors"]] == ["pricings/get"]
    assert code == ExitCode.INCOMPLETE


def test_what_every_account_shares_is_read_once_however_many_workers_ask() -> None:
    """A role definition (or a subscription's Defender plan) asked for by eight workers at once is
    fetched by one of them; the others wait for it instead of reading it again."""
    reader = ArmReader(StaticTokenCredential("unused"), "00000000-0000-0000-0000-000000000000")
    fetched: list[int] = []
    started = threading.Barrier(8)

    def fetch() -> dict[str, Any]:
        fetched.append(1)
        time.sleep(0.05)
        return {"id": "owner"}

    def ask() -> dict[str, Any] | None:
        started.wait()
        return reader._definitions.get("owner", fetch)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: ask(), range(8)))
    assert answers == [{"id": "owner"}] * 8
    assert len(fetched) == 1
