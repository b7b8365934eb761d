"""`safetynet verify` as a pipeline runs it: formats, exit codes, usage errors, settings beside."""

from __future__ import annotations

import csv
import io
import json
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.commands.common import UsageError
from blob_safetynet.cli.commands.verify import exit_code, second_credential
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import AZURITE_BIN_ENV, DEV_KEY, Azurite, dev_connection_string
from blob_safetynet.policies.probes import PROBES, ProbeOutcome, ProbeResult
from blob_safetynet.policies.probes.runner import VerificationRun
from blob_safetynet.policies.probes.writes import CREATE_ONLY
from blob_safetynet.policies.reports.formats import RENDERERS, VERIFY_RENDERERS
from testkit.arm_fake import SUBSCRIPTION, TOKEN, FakeArm, compliant_account

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "policies" / "data" / "sarif-schema-2.1.0.json").read_text()
)
Verify = Callable[..., tuple[int, str, str]]


@pytest.fixture
def container(azurite: Azurite) -> Iterator[str]:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    name = "documents"  # the container the fake ARM account declares
    service.create_container(name)
    yield name
    service.delete_container(name)


@pytest.fixture
def verify(
    azurite: Azurite, container: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Verify:
    """Runs `safetynet verify` on the session Azurite; returns (exit code, output file, stderr)."""

    def run(*args: str, connection_string: str | None = None) -> tuple[int, str, str]:
        output = tmp_path / "verify.out"
        output.unlink(missing_ok=True)
        target = ["--connection-string", connection_string or azurite.connection_string]
        code = main(["verify", *target, "--container", container, *args, "--output", str(output)])
        _, err = capsys.readouterr()
        return code, output.read_text() if output.exists() else "", err

    return run


def test_sarif_is_valid_and_lists_what_is_not_shown(verify: Verify) -> None:
    """SARIF 2.1.0 validates; NOT_VERIFIABLE probes are one `unknown` notification each, not
    results; PASS ones are omitted."""
    code, text, _ = verify("--format", "sarif")
    document = json.loads(text)
    jsonschema.validate(document, SCHEMA)
    run = document["runs"][0]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    unknown = {n["associatedRule"]["id"] for n in notes if n["descriptor"]["id"] == "unknown"}
    assert code == ExitCode.OK
    assert run["results"] == []
    assert unknown
    assert "SNV-CREATE-ONLY" not in unknown


def test_junit_skips_what_is_not_verifiable(verify: Verify) -> None:
    """JUnit: one testcase per probe; NOT_VERIFIABLE is a skipped case carrying the reason."""
    code, text, _ = verify("--format", "junit")
    suites = ET.fromstring(text)  # noqa: S314 (our own output, not untrusted input)
    cases = suites.findall(".//testcase")
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert code == ExitCode.OK
    assert len(cases) == len(PROBES)
    assert suites.get("failures") == "0"
    suite_skipped = sum(int(s.get("skipped", "0")) for s in suites.iter("testsuite"))
    assert len(skipped) == suite_skipped == 10
    assert all(c.find("skipped").get("message") for c in skipped)  # type: ignore[union-attr]


def test_a_failing_probe_exits_1(verify: Verify, azurite: Azurite, container: str) -> None:
    """A public container: the private-container probe fails and the run exits 1."""
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    service.get_container_client(container).set_container_access_policy(
        signed_identifiers={}, public_access="blob"
    )
    code, text, _ = verify("--format", "json")
    outcomes = {c["check"]: c["outcome"] for c in json.loads(text)["checks"]}
    assert code == ExitCode.FINDINGS
    assert outcomes["SNV-PRIVATE-CONTAINER"] == "FAIL"


def test_a_refused_identity_exits_3_without_echoing_the_key(
    verify: Verify, azurite: Azurite
) -> None:
    """A wrong account key cannot create probe blobs: exit 3 (could not act), never a PASS, and
    neither key is printed."""
    wrong_key = "d3Jvbmcga2V5IGZvciB0ZXN0cw=="
    wrong = azurite.connection_string.replace(DEV_KEY, wrong_key)
    code, text, err = verify("--format", "json", connection_string=wrong)
    document = json.loads(text)
    assert code == ExitCode.INCOMPLETE
    assert document["incomplete"]
    assert {c["outcome"] for c in document["checks"]} == {"NOT_VERIFIABLE"}
    assert wrong_key not in text + err
    assert DEV_KEY not in text + err


def test_a_rejected_key_is_named_as_the_likely_cause(verify: Verify, azurite: Azurite) -> None:
    """The emulator's 403 to a wrong AccountKey is reported once as a rejected shared key, and no
    probe runs (one request, not one per probe); still exit 3."""
    wrong = azurite.connection_string.replace(DEV_KEY, "d3Jvbmcga2V5IGZvciB0ZXN0cw==")
    code, text, _ = verify("--format", "json", connection_string=wrong)
    document = json.loads(text)
    assert code == ExitCode.INCOMPLETE
    [reason] = document["incomplete"]
    assert "rejected the shared key" in reason
    assert "AccountKey" in reason
    assert document["summary"]["requests"] <= 3
    assert all(c["detail"] == f"not run: {reason}" for c in document["checks"])


def test_an_unreachable_endpoint_fails_fast_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A closed port: one connection check (with its retries) instead of every probe's, exit 3
    as before, every probe NOT_VERIFIABLE saying the endpoint did not answer."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    output = tmp_path / "verify.json"
    started = time.monotonic()
    code = main(
        [
            "verify",
            "--connection-string",
            dev_connection_string(port),
            "--format",
            "json",
            "--output",
            str(output),
        ]
    )
    elapsed = time.monotonic() - started
    capsys.readouterr()
    document = json.loads(output.read_text())
    assert code == ExitCode.INCOMPLETE
    assert document["summary"]["requests"] <= 3
    assert elapsed < 60
    assert {c["outcome"] for c in document["checks"]} == {"NOT_VERIFIABLE"}
    assert all("did not answer" in c["detail"] for c in document["checks"])


def test_missing_container_is_a_usage_error(verify: Verify, azurite: Azurite) -> None:
    """A container that does not exist: exit 2 naming it."""
    code = main(["verify", "--connection-string", azurite.connection_string, "--container", "nope"])
    assert code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweeper-period", "soon"], "--sweeper-period"),
        (["--second-credential", "SECOND"], "needs --account-url"),
        (["--resource-group", "rg"], "needs --account"),
        (["--max-pending-days", "0"], "--max-pending-days"),
    ],
)
def test_bad_options_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad options are refused before anything starts, with a message naming the option."""
    code = main(["verify", *args])
    assert code == ExitCode.USAGE
    assert message in capsys.readouterr().err


def test_second_credential_names_the_missing_variable(capsys: pytest.CaptureFixture[str]) -> None:
    """--second-credential PREFIX without PREFIX_CLIENT_ID says which variable is missing."""
    code = main(
        [
            "verify",
            "--account-url",
            "https://acct.blob.core.windows.net",
            "--second-credential",
            "NOPE_X",
        ]
    )
    assert code == ExitCode.USAGE
    assert "NOPE_X_CLIENT_ID" in capsys.readouterr().err


def test_settings_verdict_beside_behaviour(verify: Verify, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --resource-group/--account the audit's settings verdict stands beside each probe's:
    soft delete reads PASS in ARM while Azurite cannot show it."""
    with FakeArm() as arm:
        arm.add(compliant_account("docs", "rg-docs"))
        monkeypatch.setenv("SAFETYNET_ARM_TOKEN", TOKEN)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", arm.ca_file)
        code, text, _ = verify(
            "--subscription",
            SUBSCRIPTION,
            "--resource-group",
            "rg-docs",
            "--account",
            "docs",
            "--arm-endpoint",
            arm.endpoint,
            "--format",
            "json",
        )
    rules = {r["rule"]: r for r in json.loads(text)["rules"]}
    assert code == ExitCode.OK
    assert rules["SN-BLOB-SOFT-DELETE"]["settings"] == "PASS"
    assert rules["SN-BLOB-SOFT-DELETE"]["behaviour"] == "NOT_VERIFIABLE"
    assert rules["SN-BLOB-SOFT-DELETE"]["checks"] == ["SNV-SOFT-DELETE", "SNV-RECOVERY-DRILL"]
    assert rules["SN-FLAT-NAMESPACE"]["behaviour"] is None


@pytest.mark.parametrize(
    ("variables", "kind"),
    [
        ({"CLIENT_ID": "c", "TENANT_ID": "t", "CLIENT_SECRET": "s"}, "ClientSecretCredential"),
        (
            {"CLIENT_ID": "c", "TENANT_ID": "t", "FEDERATED_TOKEN_FILE": "/f"},
            "WorkloadIdentityCredential",
        ),
        ({"CLIENT_ID": "c"}, "ManagedIdentityCredential"),
    ],
)
def test_second_credential_kinds(variables: dict[str, str], kind: str) -> None:
    """The second identity is a service principal (secret or federated token) or a managed identity."""
    environ = {f"SECOND_{key}": value for key, value in variables.items()}
    assert type(second_credential("SECOND", environ)).__name__ == kind


def test_second_credential_with_a_secret_needs_a_tenant() -> None:
    """A secret without a tenant names the missing variable."""
    with pytest.raises(UsageError, match="SECOND_TENANT_ID"):
        second_credential("SECOND", {"SECOND_CLIENT_ID": "c", "SECOND_CLIENT_SECRET": "s"})


def test_leftovers_reach_every_pipeline_format() -> None:
    """Probe blobs the clean-up could not delete make the run exit 3; JUnit and SARIF, which a
    pipeline publishes instead of the table, name them too."""
    run = VerificationRun(target="https://acct.blob.core.windows.net/documents", run_id="r1")
    run.results.append(ProbeResult(CREATE_ONLY, ProbeOutcome.PASS, "refused", 7))
    run.leftovers.append(".safetynet/verify/r1/create-only (403 AuthorizationPermissionMismatch)")
    junit = ET.fromstring(VERIFY_RENDERERS["junit"](run))  # noqa: S314 (our own output)
    sarif = json.loads(VERIFY_RENDERERS["sarif"](run))["runs"][0]["invocations"][0]
    assert exit_code(run) == ExitCode.INCOMPLETE
    assert junit.get("errors") == "1"
    assert "create-only" in (junit.find(".//error").get("message") or "")  # type: ignore[union-attr]
    assert sarif["executionSuccessful"] is False
    notification = sarif["toolExecutionNotifications"][0]["message"]["text"]
    assert "create-only" in notification


def embedded_sarif(tmp_path: Path, name: str) -> dict[str, Any]:
    """`safetynet verify --format sarif` on an embedded Azurite of its own (a random port)."""
    output = tmp_path / name
    assert main(["verify", "--format", "sarif", "--output", str(output)]) == ExitCode.OK
    document: dict[str, Any] = json.loads(output.read_text())
    jsonschema.validate(document, SCHEMA)
    return document


def test_verify_sarif_is_stable_across_runs(tmp_path: Path) -> None:
    """Two runs on two emulators (two random ports) give the same locations, fingerprints and
    automation id: code scanning sees the same alerts, not new ones each run."""

    def identity(document: dict[str, Any]) -> tuple[object, ...]:
        run = document["runs"][0]
        results = [(r["ruleId"], r["locations"], r["partialFingerprints"]) for r in run["results"]]
        notes = run["invocations"][0]["toolExecutionNotifications"]
        return run["automationDetails"]["id"], results, [n["associatedRule"] for n in notes]

    first, second = embedded_sarif(tmp_path, "1.sarif"), embedded_sarif(tmp_path, "2.sarif")
    assert identity(first) == identity(second)
    assert first["runs"][0]["invocations"][0]["toolExecutionNotifications"]


def test_verify_sarif_rules_have_help_and_security_severity(verify: Verify) -> None:
    """Every rule of verify's SARIF has help text and a numeric `security-severity`."""
    _, text, _ = verify("--format", "sarif")
    rules = json.loads(text)["runs"][0]["tool"]["driver"]["rules"]
    assert all(rule["help"]["text"] for rule in rules)
    assert all(0 < float(rule["properties"]["security-severity"]) <= 10 for rule in rules)


def test_unusable_output_stops_verify_before_any_probe(
    azurite: Azurite, container: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output under a file exits 2 before acting: no probe blob, no canary is planted."""
    (tmp_path / "afile").write_text("x")
    target = ["--connection-string", azurite.connection_string, "--container", container]
    code = main(["verify", *target, "--output", str(tmp_path / "afile" / "r.json")])
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    names = [b.name for b in service.get_container_client(container).list_blobs()]
    assert code == ExitCode.USAGE
    assert "--output" in capsys.readouterr().err
    assert names == []


def test_verify_writes_several_formats_from_one_run(verify: Verify, tmp_path: Path) -> None:
    """--output json=... --output junit=... write both files from the same run (same run id)."""
    json_path, junit_path = tmp_path / "v.json", tmp_path / "v.xml"
    verify("--output", f"json={json_path}", "--output", f"junit={junit_path}")
    run_id = json.loads(json_path.read_text())["run_id"]
    assert run_id in junit_path.read_text()


JUNIT_SCHEMA = xmlschema.XMLSchema10(
    Path(__file__).parents[1] / "policies" / "data" / "junit-10.xsd"
)


def test_verify_has_every_format_audit_has(verify: Verify, tmp_path: Path) -> None:
    """verify writes csv, markdown and html beside table/json/sarif/junit, as audit does, from
    one run: the CSV has a row per probe, the Markdown names the target, the HTML the run id."""
    assert set(VERIFY_RENDERERS) == set(RENDERERS)
    paths = {name: tmp_path / f"v.{name}" for name in ("csv", "markdown", "html", "json")}
    verify(*(arg for name, path in paths.items() for arg in ("--output", f"{name}={path}")))
    run = json.loads(paths["json"].read_text())
    rows = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    behaviour = {r["id"]: r["outcome"] for r in rows if r["kind"] == "behaviour"}
    assert behaviour == {c["check"]: c["outcome"] for c in run["checks"]}
    assert paths["markdown"].read_text().startswith("## safetynet verify: ")
    assert run["run_id"] in paths["html"].read_text()


def failed_run_reports(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """`verify ARGS` with SARIF and JUnit files: (exit code, the SARIF, the JUnit text)."""
    sarif, junit = tmp_path / "v.sarif", tmp_path / "v.xml"
    code = main(["verify", *args, "--output", f"sarif={sarif}", "--output", f"junit={junit}"])
    return code, json.loads(sarif.read_text()), junit.read_text()


def test_a_missing_container_still_writes_sarif_and_junit_that_say_why(
    azurite: Azurite, tmp_path: Path
) -> None:
    """A run stopped by a missing container exits 2 as before, and its SARIF and JUnit files
    are valid against their schemas, not empty, and name the container as the reason."""
    code, sarif, junit = failed_run_reports(
        tmp_path, "--connection-string", azurite.connection_string, "--container", "nope"
    )
    jsonschema.validate(sarif, SCHEMA)
    JUNIT_SCHEMA.validate(junit)
    invocation = sarif["runs"][0]["invocations"][0]
    error = ET.fromstring(junit).find(".//error")  # noqa: S314 (our own output)
    assert code == ExitCode.USAGE
    assert invocation["executionSuccessful"] is False
    reason = invocation["toolExecutionNotifications"][0]["message"]["text"]
    assert "nope" in reason
    assert "does not exist" in reason
    assert error is not None
    assert "'nope' does not exist" in (error.get("message") or "")


def test_an_emulator_that_cannot_start_still_writes_sarif_and_junit_that_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a target and with an emulator that cannot start, the SARIF and JUnit files are
    valid and carry Azurite's refusal."""
    monkeypatch.setenv(AZURITE_BIN_ENV, str(tmp_path / "no-such-azurite"))
    code, sarif, junit = failed_run_reports(tmp_path)
    jsonschema.validate(sarif, SCHEMA)
    JUNIT_SCHEMA.validate(junit)
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert code == ExitCode.USAGE
    assert "does not name a file" in notes[0]["message"]["text"]
    assert "does not name a file" in junit
