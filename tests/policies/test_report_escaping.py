"""Every report format of `audit` and `verify`, fed the same hostile corpus (tests/policies/
hostile.py) through ARM fields, ARM error bodies and probe details: no format can be driven,
forged or broken by it."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from blob_safetynet.cli.main import main
from blob_safetynet.policies.probes import PROBES, ProbeOutcome, ProbeResult
from blob_safetynet.policies.probes.runner import VerificationRun
from blob_safetynet.policies.reports.formats import VERIFY_RENDERERS
from testkit.arm_fake import Failure, FakeArm, compliant_account, set_path
from tests.policies.arm_env import use_fake_arm
from tests.policies.hostile import CORPUS, FORBIDDEN_IN_XML, raw_controls

DATA = Path(__file__).parent / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
JUNIT_SCHEMA = xmlschema.XMLSchema10(DATA / "junit-10.xsd")
GROUP = "rg-hostile"
UNESCAPED_LINK = re.compile(r"(?<!\\)\]\(|(?<!\\)<[a-z/!]", re.IGNORECASE)
CODE_SPAN = re.compile(r"(?<!\\)`[^`]*(?<!\\)`")
"""A code span the report writes (a rule's own text): its content is literal in CommonMark, and
no value from outside can open one (their backticks are escaped)."""


@pytest.fixture(scope="module")
def hostile_arm() -> Iterator[FakeArm]:
    """One account per corpus entry, the entry in its kind and TLS version and in the error
    body ARM sends for its containers."""
    with FakeArm() as fake, pytest.MonkeyPatch.context() as patch:
        for number, text in enumerate(CORPUS):
            account = fake.add(compliant_account(f"hostile{number}", GROUP))
            set_path(account.body, "kind", text)
            set_path(account.body, "properties.minimumTlsVersion", text)
            body = {"error": {"code": "AuthorizationFailed", "message": text}}
            account.failures["containers"] = Failure(403, body)
        use_fake_arm(fake, patch)
        yield fake


def audit_as(fmt: str, tmp_path: Path) -> str:
    output = tmp_path / f"report.{fmt}"
    main(["audit", "--format", fmt, "--output", str(output)])
    return output.read_text(encoding="utf-8")


def hostile_verify_run() -> VerificationRun:
    run = VerificationRun(target="http://127.0.0.1:10000/devstoreaccount1/documents", run_id="r1")
    outcomes = [ProbeOutcome.FAIL, ProbeOutcome.NOT_VERIFIABLE]
    for number, text in enumerate(CORPUS):
        probe = PROBES[number % len(PROBES)]
        run.results.append(ProbeResult(probe, outcomes[number % 2], f"heartbeat {text}", 1))
    run.incomplete.append(f"incomplete {CORPUS[0]}")
    run.leftovers.append(f".safetynet/verify/r1/{CORPUS[1]}")
    return run


def check_table(text: str) -> None:
    assert raw_controls(text) == []
    rows = text.splitlines()
    assert not [row for row in rows if row.startswith("good ")], "a row was forged"


def check_junit(text: str) -> None:
    assert not FORBIDDEN_IN_XML & set(text)
    JUNIT_SCHEMA.validate(text)
    root = ET.fromstring(text)  # noqa: S314 (own output)
    for element in root.iter():
        values = [*element.attrib.values(), *(element.text or "").split("\n")]
        assert [raw_controls(value, allowed="") for value in values if value.strip()] == [
            [] for value in values if value.strip()
        ], element.tag


def check_sarif(text: str) -> None:
    document = json.loads(text)
    jsonschema.validate(document, SARIF_SCHEMA)
    run = document["runs"][0]
    messages = [r["message"] for r in run["results"]] + [
        n["message"] for n in run["invocations"][0]["toolExecutionNotifications"]
    ]
    assert messages
    for message in messages:
        assert raw_controls(message["text"], allowed="") == [], message
        assert raw_controls(message["markdown"], allowed="") == [], message
        assert not UNESCAPED_LINK.search(message["markdown"]), message


def check_csv(text: str) -> None:
    rows = list(csv.reader(io.StringIO(text)))
    cells = [cell for row in rows[1:] for cell in row]
    assert len(rows) > 1
    assert len({len(row) for row in rows}) == 1
    assert [c for c in cells if c[:1] in ("=", "+", "-", "@")] == []
    assert [c for c in cells if raw_controls(c, allowed="")] == []


def check_markdown(text: str) -> None:
    assert raw_controls(text) == []
    assert not UNESCAPED_LINK.search(CODE_SPAN.sub("", text))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows
    assert all(row.endswith("|") for row in rows)


def check_html(text: str, scripts: int) -> None:
    """Only the page's own scripts (`scripts` of them), no injected tag, no raw control."""
    assert text.lower().count("<script") == scripts
    assert "<img" not in text.lower()
    assert "alert(1)</script>" not in text
    assert raw_controls(text) == []


def test_audit_table_shows_hostile_text_escaped(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """The audit table has no raw control character and no forged row."""
    check_table(audit_as("table", tmp_path))


def test_audit_junit_is_valid_xml_despite_hostile_text(
    hostile_arm: FakeArm, tmp_path: Path
) -> None:
    """The audit JUnit has no character XML 1.0 forbids and validates against junit-10.xsd."""
    check_junit(audit_as("junit", tmp_path))


def test_audit_sarif_messages_escape_markdown(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """The audit SARIF validates and no message holds a raw link, tag or control character."""
    check_sarif(audit_as("sarif", tmp_path))


def test_audit_json_keeps_hostile_text_as_data(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """The JSON is valid, ASCII-only, and carries each hostile text exactly (it is data)."""
    text = audit_as("json", tmp_path)
    assert text.isascii()
    messages = " ".join(f["message"] for f in json.loads(text)["findings"])
    assert all(entry in messages for entry in CORPUS)


def test_audit_csv_cells_cannot_run_formulas(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """Every CSV cell parses, holds no control character and none starts a formula."""
    check_csv(audit_as("csv", tmp_path))


def test_audit_markdown_has_no_live_markup(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """The Markdown has no raw control character, link, image or HTML tag from the data, and
    each table row is one line."""
    check_markdown(audit_as("markdown", tmp_path))


def test_audit_html_escapes_every_value(hostile_arm: FakeArm, tmp_path: Path) -> None:
    """The HTML holds exactly one script element (its own), no injected tag and no raw control
    character."""
    check_html(audit_as("html", tmp_path), scripts=1)


def test_verify_table_shows_heartbeat_text_escaped() -> None:
    """Probe details (heartbeat fields) cannot clear the screen or forge a row of the table."""
    check_table(VERIFY_RENDERERS["table"](hostile_verify_run()))


def test_verify_junit_is_valid_xml_despite_heartbeat_text() -> None:
    """Verify's JUnit validates against junit-10.xsd with hostile probe details."""
    check_junit(VERIFY_RENDERERS["junit"](hostile_verify_run()))


def test_verify_sarif_messages_escape_markdown() -> None:
    """Verify's SARIF validates and its messages hold no raw link, tag or control character."""
    check_sarif(VERIFY_RENDERERS["sarif"](hostile_verify_run()))


def test_verify_csv_markdown_and_html_escape_heartbeat_text() -> None:
    """Verify's CSV cells run no formula, its Markdown has no live markup and its HTML no
    injected tag (it has no script at all), with hostile probe details."""
    run = hostile_verify_run()
    check_csv(VERIFY_RENDERERS["csv"](run))
    check_markdown(VERIFY_RENDERERS["markdown"](run))
    check_html(VERIFY_RENDERERS["html"](run), scripts=0)


def test_audit_junit_escapes_names_and_justifications_like_every_format(tmp_path: Path) -> None:
    """An account name and a suppression's justification holding U+202E, a tab, CR and LF
    reach JUnit as visible escapes, never raw."""
    hostile = "rlo\u202e tab\t cr\r lf\n end"
    account = compliant_account(f"acct{hostile}", GROUP)
    account.body["properties"]["allowSharedKeyAccess"] = True
    saved = tmp_path / "account.json"
    saved.write_text(json.dumps(account.body), encoding="utf-8")
    entry = {
        "rule": "SN-SHARED-KEY-OFF",
        "resource": "acct*",
        "justification": f"ticket OPS-12 {hostile}",
        "expires": dt.date.today().isoformat(),
    }
    accepted = tmp_path / "suppressions.json"
    accepted.write_text(json.dumps({"suppressions": [entry]}), encoding="utf-8")
    output = tmp_path / "report.xml"
    main(["audit", "--from-file", str(saved), "--suppressions", str(accepted), "--format",
          "junit", "--output", str(output)])  # fmt: skip
    text = output.read_text(encoding="utf-8")
    check_junit(text)
    assert "rlo\\u202e tab\\t cr\\r lf\\n end" in text
    assert "ticket OPS-12 rlo\\u202e" in text
