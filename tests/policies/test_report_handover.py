"""What an auditor is handed: who approved each suppression, which files the verdicts rest on
(their SHA-256, and when they were captured where the file says), history by run date, a
Markdown summary that leads with what was found, and SARIF that points at the committed file
and the line of the account's resource."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.reports.markdown import render_markdown
from blob_safetynet.policies.reports.view import ReportContext
from blob_safetynet.policies.rules import RULES, Finding, Outcome
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, Scope
from tests.conftest import RunCli
from tests.policies.test_offline_audit import account_of, cli_files, template_export

DATA = Path(__file__).resolve().parent / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
APPROVER = "Jane Doe <jane@example.com>"
FORMATS = ("json", "sarif", "junit", "markdown", "html", "table", "csv")
SOON = (dt.date.today() + dt.timedelta(days=30)).isoformat()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout holding one broken account's template export under arm/, the working
    folder, as a pipeline runs the audit from its checkout."""
    (tmp_path / "arm").mkdir()
    template_export(account_of("acctexport", True), tmp_path / "arm" / "export.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def suppressions_file(path: Path, **extra: object) -> Path:
    entry = {
        "rule": "SN-NO-PUBLIC-ACCESS",
        "resource": "acctexport",
        "justification": "public site assets, ticket OPS-7",
        "expires": SOON,
        **extra,
    }
    path.write_text(json.dumps({"suppressions": [entry]}), encoding="utf-8")
    return path


def audit(run_cli: RunCli, *args: str) -> tuple[int, dict[str, str]]:
    """The audit of arm/export.json with every format written; each format's text."""
    outputs = [f"--output={name}=out/report.{name}" for name in FORMATS]
    Path("out").mkdir(exist_ok=True)
    code, _, err = run_cli("audit", "--from-file", "arm/export.json", *args, *outputs)
    assert "Traceback" not in err
    return code, {name: Path(f"out/report.{name}").read_text(encoding="utf-8") for name in FORMATS}


def test_an_approver_is_shown_wherever_the_suppression_is(workspace: Path, run_cli: RunCli) -> None:
    """A suppression's approver is in the JSON suppression, the CSV column, the SARIF
    justification, the JUnit skip reason, the HTML card and the Markdown row."""
    suppressions_file(workspace / "s.json", approver=APPROVER)
    _, texts = audit(run_cli, "--suppressions", "s.json")
    [finding] = [f for f in json.loads(texts["json"])["findings"] if f["state"] == "SUPPRESSED"]
    assert finding["suppression"]["approver"] == APPROVER
    rows = list(csv.DictReader(io.StringIO(texts["csv"])))
    assert [row["approver"] for row in rows if row["state"] == "SUPPRESSED"] == [APPROVER]
    results = json.loads(texts["sarif"])["runs"][0]["results"]
    justified = [s["justification"] for r in results for s in r.get("suppressions", [])]
    assert justified == [f"public site assets, ticket OPS-7 (until {SOON}, approved by {APPROVER})"]
    junit = ET.fromstring(texts["junit"])  # noqa: S314 (our own output)
    assert f"approved by {APPROVER}" in junit.findall(".//skipped")[0].get("message", "")
    assert '<dd class="approver">Jane Doe &lt;jane@example.com&gt;</dd>' in texts["html"]
    assert "approved by Jane Doe \\<jane\\@example\\.com\\>" in texts["markdown"]


@pytest.mark.parametrize(
    "approver",
    ["", "   ", 7, "two\nlines", "x" * 201, ["a list"]],
    ids=["empty", "blank", "number", "two-lines", "too-long", "list"],
)
def test_an_approver_that_names_nobody_is_bad_usage(
    workspace: Path, run_cli: RunCli, approver: object
) -> None:
    """An approver that is not one line of printable text (1-200 characters) exits 2 naming the
    entry's approver, before anything is judged."""
    suppressions_file(workspace / "s.json", approver=approver)
    code, out, err = run_cli("audit", "--from-file", "arm/export.json", "--suppressions", "s.json")
    assert code == ExitCode.USAGE
    assert "suppressions[0].approver must name who accepted the risk" in err
    assert out == ""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_format_with_a_header_names_each_input_by_its_digest(
    workspace: Path, run_cli: RunCli
) -> None:
    """The saved file and the suppressions file are named, with the SHA-256 of the bytes read,
    in the JSON, the SARIF artifacts, the JUnit properties, the Markdown, the HTML header and
    the table; the CSV, one row per finding, has no header to hold them."""
    suppressions_file(workspace / "s.json")
    _, texts = audit(run_cli, "--suppressions", "s.json")
    export, rules = sha256(workspace / "arm" / "export.json"), sha256(workspace / "s.json")
    inputs = json.loads(texts["json"])["inputs"]
    assert [(i["option"], i["file"], i["sha256"]) for i in inputs] == [
        ("--from-file", "arm/export.json", export),
        ("--suppressions", "s.json", rules),
    ]
    artifacts = json.loads(texts["sarif"])["runs"][0]["artifacts"]
    assert [(a["location"]["uri"], a["hashes"]["sha-256"]) for a in artifacts] == [
        ("arm/export.json", export),
        ("s.json", rules),
    ]
    junit = ET.fromstring(texts["junit"])  # noqa: S314 (our own output)
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert export in properties["input.1"]
    assert rules in properties["input.2"]
    for name in ("markdown", "html", "table"):
        assert export in texts[name], name
        assert rules in texts[name], name
    assert export not in texts["csv"]


def earlier_report(path: Path, generated: str | None) -> Path:
    """A JSON report of an earlier run, generated at `generated` (None: written before reports
    said when)."""
    findings = [
        {"rule": "SN-NO-PUBLIC-ACCESS", "account": "acctexport", "outcome": "FAIL", "state": "FAIL"}
    ]
    document: dict[str, Any] = {"tool": "safetynet", "findings": findings}
    if generated is not None:
        document["generated"] = generated
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_history_columns_are_labelled_by_when_each_run_was_made(
    workspace: Path, run_cli: RunCli
) -> None:
    """--history's columns are headed by each earlier report's generation time (the file name
    only for a report that does not say it), then this run's; the baseline's generation time is
    shown as when it was captured."""
    earlier_report(workspace / "monday.json", "2026-11-30T06:00:00+00:00")
    earlier_report(workspace / "undated.json", None)
    earlier_report(workspace / "base.json", "2026-11-29T06:00:00+00:00")
    _, texts = audit(run_cli, "--history", "monday.json", "undated.json", "--baseline", "base.json")
    header = re.search(r'<table class="history">\s*<thead><tr>(.*?)</tr>', texts["html"])
    assert header
    labels = re.findall(r"<th>(.*?)</th>", header.group(1))
    assert labels[:3] == ["rule", "2026-11-30 06:00 UTC", "undated.json"]
    assert labels[3].endswith("UTC (this run)")
    baseline = [i for i in json.loads(texts["json"])["inputs"] if i["option"] == "--baseline"]
    assert baseline[0]["captured"] == "2026-11-29T06:00:00+00:00"
    assert "captured 2026-11-29 06:00 UTC" in texts["html"]


def test_markdown_leads_with_the_finding_and_keeps_the_rules_code_spans() -> None:
    """A row says what was found first, escaped (its backticks stay text: the fact quotes
    values from outside), then the rule's ideal and fix with their code spans as code spans."""
    rule = next(rule for rule in RULES if rule.id == "SN-NO-PUBLIC-ACCESS")
    finding = Finding(
        rule, "acct", None, Outcome.FAIL, "", "anonymous access is `allowed` by a <b>tag</b>"
    )
    report = AuditReport(Scope("s"), Thresholds(), [AccountResult(Account("acct"), [finding])])
    [row] = [
        line for line in render_markdown(report, ReportContext()).splitlines() if "acct |" in line
    ]
    cell = row.split(" | ")[-1]
    assert cell.startswith("Anonymous access is \\`allowed\\` by a \\<b\\>tag\\<\\/b\\>.")
    assert "Expected: Anonymous blob access is disallowed on the account." in cell
    assert "`allowBlobPublicAccess: false`" in cell
    assert "\\`allowBlobPublicAccess" not in cell


def account_line(path: Path) -> int:
    """The line of the export's account resource: the `{` before its storageAccounts type."""
    lines = path.read_text().splitlines()
    typed = lines.index('            "type": "Microsoft.Storage/storageAccounts",')
    assert lines[typed - 1].strip() == "{"
    return typed


def test_sarif_points_at_the_saved_file_and_the_line_of_the_account(
    workspace: Path, run_cli: RunCli
) -> None:
    """Each result of an audit of files lies in the file as named (relative to the checkout)
    and starts on the line of the account's resource, its artifact indexed; the log validates
    against the SARIF 2.1.0 schema."""
    _, texts = audit(run_cli)
    document = json.loads(texts["sarif"])
    jsonschema.validate(document, SARIF_SCHEMA)
    results = document["runs"][0]["results"]
    assert results
    line = account_line(workspace / "arm" / "export.json")
    for result in results:
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": "arm/export.json", "index": 0}
        assert physical["region"] == {"startLine": line}


def test_cli_outputs_point_at_the_account_document(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several `az` outputs of one account: its results point at the account document's first
    line, not at the blob service's or the policy's file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "arm").mkdir()
    paths = cli_files(account_of("acctcli", True), tmp_path / "arm")
    names = [str(path.relative_to(tmp_path)) for path in sorted(paths, reverse=True)]
    code, _, _ = run_cli("audit", "--from-file", *names, "--output", "sarif=out.sarif")
    assert code == ExitCode.FINDINGS
    results = json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"]
    where = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in results
    }
    assert where == {("arm/acctcli-account.json", 1)}
