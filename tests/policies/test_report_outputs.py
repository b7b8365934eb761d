"""`safetynet audit` outputs as pipelines consume them: JUnit against junit-10.xsd, SARIF
categories, several formats from one audit, output paths checked first, suppressions."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.reports.markdown import MARKDOWN_BUDGET, render_markdown
from blob_safetynet.policies.reports.view import ReportContext
from blob_safetynet.policies.rules import RULES, Finding, Outcome
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, Scope
from testkit.arm_fake import SUBSCRIPTION, Failure, FakeArm, compliant_account, set_path
from tests.policies.arm_env import use_fake_arm

IN_A_MONTH = (dt.date.today() + dt.timedelta(days=30)).isoformat()
"""A suppression expiry inside the default one-year horizon."""

DATA = Path(__file__).parent / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
JUNIT_SCHEMA = xmlschema.XMLSchema10(DATA / "junit-10.xsd")
GROUP = "rg-a"

Run = Callable[..., int]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A fake ARM with a compliant account, one that fails a rule and one whose containers
    cannot be read (UNKNOWN), in two resource groups."""
    with FakeArm() as server:
        server.add(compliant_account("good", GROUP))
        keys = server.add(compliant_account("keys", GROUP))
        set_path(keys.body, "properties.allowSharedKeyAccess", True)
        server.add(compliant_account("other", "rg-b"))
        use_fake_arm(server, monkeypatch)
        yield server


@pytest.fixture
def run(fake: FakeArm) -> Run:
    def audit(*args: str) -> int:
        return main(["audit", *args])

    return audit


def junit_of(run: Run, tmp_path: Path, *args: str) -> str:
    path = tmp_path / "audit.xml"
    run("--format", "junit", "--output", str(path), *args)
    return path.read_text()


def test_junit_validates_against_junit_10_xsd(run: Run, fake: FakeArm, tmp_path: Path) -> None:
    """JUnit with failures, skipped (UNKNOWN) and error cases validates against junit-10.xsd,
    which allows no `skipped` attribute on <testsuites>."""
    fake.add(compliant_account("locked", GROUP)).failures["roleAssignments"] = Failure(403)
    text = junit_of(run, tmp_path)
    JUNIT_SCHEMA.validate(text)
    assert "skipped" in text


def test_junit_carries_times(run: Run, tmp_path: Path) -> None:
    """<testsuites>, every <testsuite> and every <testcase> has a `time` attribute."""
    root = ET.fromstring(junit_of(run, tmp_path))  # noqa: S314 (our own output)
    elements = [root, *root.iter("testsuite"), *root.iter("testcase")]
    assert all(element.get("time") is not None for element in elements)
    assert float(root.get("time", "-1")) > 0


def sarif_id(run: Run, tmp_path: Path, group: str) -> str:
    path = tmp_path / f"{group}.sarif"
    run("--resource-group", group, "--output", f"sarif={path}")
    document = json.loads(path.read_text())
    jsonschema.validate(document, SARIF_SCHEMA)
    return str(document["runs"][0]["automationDetails"]["id"])


def test_sarif_categories_of_two_resource_groups_differ(run: Run, tmp_path: Path) -> None:
    """GitHub's category is the id up to its last `/`: the id ends with `/`, and audits of two
    resource groups get two categories, so neither replaces the other's alerts."""
    first, second = sarif_id(run, tmp_path, "rg-a"), sarif_id(run, tmp_path, "rg-b")
    assert first.endswith("/")
    assert second.endswith("/")
    assert first.rsplit("/", 1)[0] != second.rsplit("/", 1)[0]


def test_one_audit_writes_every_format(run: Run, fake: FakeArm, tmp_path: Path) -> None:
    """Seven --output FORMAT=PATH write seven files from one audit: ARM is read once, not seven
    times."""
    run("--resource-group", GROUP, "--output", f"json={tmp_path / 'single.json'}")
    single = fake.requests
    formats = ["table", "json", "sarif", "junit", "csv", "markdown", "html"]
    specs = [arg for fmt in formats for arg in ("--output", f"{fmt}={tmp_path / fmt}")]
    code = run("--resource-group", GROUP, *specs)
    assert code == ExitCode.FINDINGS
    assert fake.requests - single == single  # one audit's reads, not seven
    assert all((tmp_path / fmt).stat().st_size > 0 for fmt in formats)
    failures = json.loads((tmp_path / "json").read_text())["summary"]["FAIL"]
    assert failures == 1


def test_bare_output_keeps_the_format_option(run: Run, tmp_path: Path) -> None:
    """`--format json --output PATH` still writes JSON to PATH."""
    run("--format", "json", "--output", str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["tool"] == "safetynet"


@pytest.mark.parametrize(
    "spec",
    ["junit={tmp}/missing/x.xml", "sarif={tmp}", "xlsx={tmp}/x", "json={tmp}/same"],
    ids=["missing-folder", "a-folder", "unknown-format", "twice"],
)
def test_every_output_is_checked_before_arm_is_read(
    run: Run, fake: FakeArm, tmp_path: Path, spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One unusable --output among good ones exits 2 with its reason and reads nothing."""
    good = ["--output", f"json={tmp_path}/same"]
    code = run(*good, "--output", spec.format(tmp=tmp_path))
    assert code == ExitCode.USAGE
    assert fake.requests == 0
    assert "--output" in capsys.readouterr().err
    assert not (tmp_path / "same").exists()


def write_suppressions(path: Path, *entries: dict[str, str]) -> Path:
    path.write_text(json.dumps({"suppressions": list(entries)}))
    return path


def keys_entry(expires: str = IN_A_MONTH, resource: str = "keys") -> dict[str, str]:
    return {
        "rule": "SN-SHARED-KEY-OFF",
        "resource": resource,
        "justification": "legacy client, ticket OPS-12",
        "expires": expires,
    }


def audit_json(run: Run, tmp_path: Path, *args: str) -> tuple[int, dict[str, object]]:
    path = tmp_path / "out.json"
    code = run("--resource-group", GROUP, "--output", f"json={path}", *args)
    return code, json.loads(path.read_text())


def test_suppressed_fail_is_shown_and_does_not_fail_the_run(run: Run, tmp_path: Path) -> None:
    """A live suppression turns the FAIL into SUPPRESSED (still listed) and the run exits 0."""
    file = write_suppressions(tmp_path / "s.json", keys_entry())
    code, document = audit_json(run, tmp_path, "--suppressions", str(file))
    states = {(f["account"], f["rule"]): f["state"] for f in document["findings"]}  # type: ignore[attr-defined]
    assert code == ExitCode.OK
    assert states[("keys", "SN-SHARED-KEY-OFF")] == "SUPPRESSED"
    summary = document["summary"]
    assert isinstance(summary, dict)
    assert summary.pop("requests") > 0
    assert summary.pop("requests_per_account") > 0
    assert summary == {
        "accounts": 2,
        "PASS": 2 * len(RULES) - 1,
        "FAIL": 0,
        "UNKNOWN": 0,
        "NOT_APPLICABLE": 0,
        "NOT_IN_FILES": 0,
        "SUPPRESSED": 1,
        "BASELINED": 0,
        "errors": 0,
        "deleted": 0,
    }


def test_expired_suppression_no_longer_applies_and_is_reported(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A suppression past its expiry leaves the FAIL counted (exit 1) and is reported."""
    file = write_suppressions(tmp_path / "s.json", keys_entry(expires="2000-01-01"))
    code, document = audit_json(run, tmp_path, "--suppressions", str(file))
    assert code == ExitCode.FINDINGS
    assert document["suppressions"]["expired"][0]["rule"] == "SN-SHARED-KEY-OFF"  # type: ignore[index]
    assert "suppression expired" in capsys.readouterr().err


def test_unused_suppression_is_reported(run: Run, tmp_path: Path) -> None:
    """A suppression that matched no FAIL is listed as unused."""
    file = write_suppressions(tmp_path / "s.json", keys_entry(), keys_entry(resource="nobody*"))
    _, document = audit_json(run, tmp_path, "--suppressions", str(file))
    unused = document["suppressions"]["unused"]  # type: ignore[index]
    assert [entry["resource"] for entry in unused] == ["nobody*"]


def test_unknown_is_never_suppressed(run: Run, fake: FakeArm, tmp_path: Path) -> None:
    """A suppression for a rule that is UNKNOWN leaves it UNKNOWN and the run exits 3."""
    fake.add(compliant_account("locked", GROUP)).failures["roleAssignments"] = Failure(403)
    entries = [
        {**keys_entry(), "rule": rule.id, "resource": "locked"}
        for rule in RULES
        if rule.id != "SN-SHARED-KEY-OFF"
    ]
    file = write_suppressions(tmp_path / "s.json", keys_entry(), *entries)
    code, document = audit_json(run, tmp_path, "--suppressions", str(file))
    states = [f["state"] for f in document["findings"] if f["account"] == "locked"]  # type: ignore[attr-defined]
    assert code == ExitCode.INCOMPLETE
    assert Outcome.UNKNOWN.value in states
    assert "SUPPRESSED" not in states


def test_sarif_and_junit_show_the_suppression(run: Run, tmp_path: Path) -> None:
    """SARIF gives the result a `suppressions` entry; JUnit skips the case with the reason."""
    file = write_suppressions(tmp_path / "s.json", keys_entry())
    sarif, junit = tmp_path / "a.sarif", tmp_path / "a.xml"
    args = ["--suppressions", str(file), "--output", f"sarif={sarif}", "--output", f"junit={junit}"]
    run("--resource-group", GROUP, *args)
    document = json.loads(sarif.read_text())
    jsonschema.validate(document, SARIF_SCHEMA)
    (result,) = document["runs"][0]["results"]
    assert result["suppressions"][0]["kind"] == "external"
    JUNIT_SCHEMA.validate(junit.read_text())
    assert f"suppressed until {IN_A_MONTH}" in junit.read_text()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("suppressions: [{rule: SN-SHARED-KEY-OFF}]", "missing resource"),
        (
            "suppressions:\n  - {rule: SN-NOPE, resource: x, justification: long enough"
            " text, expires: 2999-01-01}",
            "is no rule",
        ),
        (
            "suppressions:\n  - {rule: SN-SHARED-KEY-OFF, resource: x, justification: why,"
            " expires: 2999-01-01}",
            "justification",
        ),
        (
            "suppressions:\n  - {rule: SN-SHARED-KEY-OFF, resource: x, justification: long"
            " enough text, expires: soon}",
            "expires must be a date",
        ),
        ("[" * 100_000, "not YAML or JSON"),
        ("other: 1", "one key"),
    ],
    ids=["missing-field", "unknown-rule", "short-justification", "bad-date", "deep", "shape"],
)
def test_bad_suppressions_file_is_a_usage_error(
    run: Run,
    fake: FakeArm,
    tmp_path: Path,
    content: str,
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A suppressions file that breaks the schema exits 2 with the reason, before ARM is read."""
    file = tmp_path / "s.yaml"
    file.write_text(content)
    code = run("--suppressions", str(file))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE
    assert reason in err
    assert "Traceback" not in err
    assert fake.requests == 0


def test_output_onto_the_suppressions_file_is_refused(run: Run, tmp_path: Path) -> None:
    """An --output that is the suppressions file is refused, and the file is left intact."""
    file = write_suppressions(tmp_path / "s.json", keys_entry())
    before = file.read_text()
    assert run("--suppressions", str(file), "--output", f"json={file}") == ExitCode.USAGE
    assert file.read_text() == before


def test_markdown_is_cut_to_fit_a_comment_with_a_note() -> None:
    """A report too long for a PR comment is cut to MARKDOWN_BUDGET, and a note says how many
    rows were left out."""
    rule = RULES[0]
    results = [
        AccountResult(
            Account(f"acct{n}"), [Finding(rule, f"acct{n}", None, Outcome.FAIL, "x" * 300)]
        )
        for n in range(1000)
    ]
    report = AuditReport(Scope(SUBSCRIPTION), Thresholds(), results)
    text = render_markdown(report, ReportContext())
    kept = sum(line.startswith("| acct") for line in text.splitlines())
    assert len(text) <= MARKDOWN_BUDGET
    assert 0 < kept < 1000
    assert f"_{1000 - kept} more line(s) left out" in text


def test_history_that_is_not_a_json_report_is_a_usage_error(
    run: Run, fake: FakeArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--history with a file that is not an audit JSON report exits 2 naming it, before ARM."""
    (tmp_path / "h.json").write_text('{"findings": 3}')
    code = run("--history", str(tmp_path / "h.json"), "--output", f"html={tmp_path / 'r.html'}")
    assert code == ExitCode.USAGE
    assert "no 'findings' list" in capsys.readouterr().err
    assert fake.requests == 0
