"""The HTML report: self-contained, and checked in a real headless Chromium (Debian package
`chromium`): it loads with no console message, its script runs under its own Content Security
Policy, the counts it shows equal the JSON's, and the matrix header's labels and badges do not
overlap (element boxes read over DevTools). A full-page screenshot is kept under build/.

Without Chromium the browser test is skipped with the reason, unless
SAFETYNET_REQUIRE_CHROMIUM=1 (CI), where its absence fails.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from blob_safetynet import package_version
from blob_safetynet.cli.main import main
from blob_safetynet.policies.probes import PROBES, ProbeOutcome, ProbeResult
from blob_safetynet.policies.probes.runner import VerificationRun
from blob_safetynet.policies.reports.formats import VERIFY_RENDERERS
from blob_safetynet.policies.reports.html import frameworks
from blob_safetynet.policies.rules import RULES_BY_ID, ruleset_version
from testkit.arm_fake import Failure, FakeArm, compliant_account, set_path
from testkit.devtools import Browser
from tests.policies.arm_env import use_fake_arm

IN_A_MONTH = (dt.date.today() + dt.timedelta(days=30)).isoformat()
"""A suppression expiry inside the default one-year horizon."""

ROOT = Path(__file__).parents[2]
SCREENSHOT = ROOT / "build" / "test-artefacts" / "html-report.png"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CONSOLE = re.compile(r":CONSOLE[:(]")
NETWORK_REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|@import|url\(""")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An HTML and a JSON report of one audit (PASS, FAIL, UNKNOWN, SUPPRESSED and a read
    error), with an earlier JSON report as history."""
    folder = tmp_path_factory.mktemp("html")
    suppressions = folder / "suppressions.yaml"
    suppressions.write_text(
        "suppressions:\n  - rule: SN-NO-PUBLIC-ACCESS\n    resource: public\n"
        f"    justification: static website, reviewed in OPS-7\n    expires: {IN_A_MONTH}\n"
    )
    with FakeArm() as fake, pytest.MonkeyPatch.context() as patch:
        fake.add(compliant_account("good", "rg"))
        keys = fake.add(compliant_account("keys", "rg"))
        set_path(keys.body, "properties.allowSharedKeyAccess", True)
        public = fake.add(compliant_account("public", "rg"))
        set_path(public.body, "properties.allowBlobPublicAccess", True)
        fake.add(compliant_account("locked", "rg")).failures["roleAssignments"] = Failure(403)
        use_fake_arm(fake, patch)
        main(["audit", "--output", f"json={folder / 'earlier.json'}"])
        main(
            [
                "audit",
                "--suppressions",
                str(suppressions),
                "--history",
                str(folder / "earlier.json"),
                "--output",
                f"html={folder / 'report.html'}",
                "--output",
                f"json={folder / 'report.json'}",
            ]
        )
    return {"html": folder / "report.html", "json": folder / "report.json", "folder": folder}


def chromium() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    reason = "Chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("SAFETYNET_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{reason}, and SAFETYNET_REQUIRE_CHROMIUM=1")
    pytest.skip(reason)


def headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def shown_counts(dom: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r'id="count-(\w+)"[^>]*>(\d+)<', dom)}


def test_report_is_self_contained(reports: dict[str, Path]) -> None:
    """No tag or style references anything outside the file (no CDN, no font, no image URL)."""
    html = reports["html"].read_text()
    assert NETWORK_REFERENCE.search(html) is None
    assert "Content-Security-Policy" in html


def test_report_shows_suppression_and_history(reports: dict[str, Path]) -> None:
    """The suppressed finding carries its justification, and the history table names the
    earlier run."""
    html = reports["html"].read_text()
    assert "static website, reviewed in OPS-7" in html
    assert "History per rule" in html
    assert "earlier.json" in html


def test_report_loads_in_chromium_and_shows_the_json_counts(reports: dict[str, Path]) -> None:
    """Headless Chromium loads the page with no console message (no script error, no refused
    script or style), the script runs, and each count it shows equals the JSON summary."""
    browser = chromium()
    url = reports["html"].as_uri()
    loaded = headless(browser, reports["folder"] / "profile", "--dump-dom", url)
    console = [line for line in loaded.stderr.splitlines() if CONSOLE.search(line)]
    assert console == []
    summary = json.loads(reports["json"].read_text())["summary"]
    costs = ("requests", "requests_per_account", "deleted")
    assert shown_counts(loaded.stdout) == {k: v for k, v in summary.items() if k not in costs}
    assert re.search(r'id="shown">\d+ verdict', loaded.stdout), "the page's script did not run"


def test_the_framework_filter_groups_each_rules_controls() -> None:
    """Each rule's CIS and MCSB control ids are grouped under the framework's short name, the
    names the page's framework filter offers (CIS 4.0.0 for what 3.0.0 has no control of)."""
    soft_delete = frameworks(RULES_BY_ID["SN-BLOB-SOFT-DELETE"])
    assert set(soft_delete) <= {"CIS 3.0.0", "MCSB v1"}
    assert soft_delete
    assert {name for rule in RULES_BY_ID.values() for name in frameworks(rule)} == {
        "CIS 3.0.0",
        "CIS 4.0.0",
        "MCSB v1",
    }


OVERLAPS = """(() => {
  const boxes = (selector) => Array.from(document.querySelectorAll(selector)).map((e) => {
    const r = e.getBoundingClientRect();
    return {text: e.textContent.trim(), left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  });
  const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const labels = boxes("th.rule-name .label");
  const badges = boxes("th.rule-sev .sev");
  const all = labels.concat(badges);
  const pairs = [];
  all.forEach((a, i) => all.slice(i + 1).forEach((b) => { if (meets(a, b)) pairs.push([a.text, b.text]); }));
  return {labels: labels.length, badges: badges.length, overlaps: pairs};
})()"""
"""Every rule label and severity badge of the matrix header as laid out, and each pair of them
whose boxes intersect."""


def test_matrix_header_labels_and_badges_do_not_overlap(reports: dict[str, Path]) -> None:
    """In Chromium, no rule name and no severity badge of the matrix header overlaps another
    (element geometry through DevTools), one of each per rule; a screenshot is kept."""
    with Browser(chromium(), reports["folder"] / "devtools") as browser:
        browser.open(reports["html"].as_uri())
        geometry = browser.evaluate(OVERLAPS)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        browser.screenshot(SCREENSHOT)
    assert geometry["labels"] == geometry["badges"] == len(RULES_BY_ID)
    assert geometry["overlaps"] == []
    assert SCREENSHOT.stat().st_size > 0


def visible_text(html: str) -> str:
    """The page's text without tags, script and style."""
    body = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.DOTALL)
    return re.sub(r"<[^>]+>", " ", body)


def test_report_says_when_by_what_and_of_what(reports: dict[str, Path]) -> None:
    """The header gives the generation time in UTC (within the test's minute), the tool's
    version, the rule set's version and the audit's scope."""
    html = reports["html"].read_text()
    stamp = re.search(r'<time id="generated" datetime="([^"]+)"', html)
    assert stamp is not None
    generated = dt.datetime.fromisoformat(stamp.group(1))
    assert generated.utcoffset() == dt.timedelta(0)
    assert abs(dt.datetime.now(dt.UTC) - generated) < dt.timedelta(minutes=10)
    assert f"safetynet {package_version()}" in html
    assert ruleset_version() in html
    assert json.loads(reports["json"].read_text())["scope"] in html


def card_texts(card: str) -> list[str]:
    """The heading's evidence and each definition of a finding card, as shown."""
    evidence = re.findall(r'<span class="evidence">(.*?)</span> <span class="sev', card, re.DOTALL)
    details = re.findall(r"<dd>(.*?)</dd>", card, re.DOTALL)
    return [" ".join(visible_text(part).split()) for part in [*evidence, *details]]


def test_cards_show_no_raw_markdown_and_say_each_thing_once(reports: dict[str, Path]) -> None:
    """No backtick shows in the page's text (code spans become <code>); within a card no text
    (evidence, why, remediation) holds another, so the Fix is given once; a FAIL card's
    heading is what was found, not the rule's title."""
    html = reports["html"].read_text()
    assert "`" not in visible_text(html)
    cards = re.findall(r'<article class="finding state-.*?</article>', html, re.DOTALL)
    fails = [card for card in cards if 'class="finding state-FAIL"' in card]
    assert fails
    for card in cards:
        texts = card_texts(card)
        assert len(texts) >= 2
        assert [
            (a, b) for i, a in enumerate(texts) for b in texts[i + 1 :] if a in b or b in a
        ] == []
        assert not any("Fix:" in text for text in texts)
    for card in fails:
        title = re.search(r"expects: (.*?)</p>", card)
        assert title is not None
        assert title.group(1) not in card_texts(card)[0]


def test_verify_html_loads_in_chromium_with_its_counts(tmp_path: Path) -> None:
    """verify's HTML loads in Chromium with no console message (its style is allowed by its
    own policy), says when it was made, and shows each outcome's count of the run."""
    run = VerificationRun(target="http://127.0.0.1:10000/devstoreaccount1/documents", run_id="r1")
    outcomes = list(ProbeOutcome)
    for number, probe in enumerate(PROBES):
        run.results.append(ProbeResult(probe, outcomes[number % 3], f"detail {number}", 1))
    page = tmp_path / "verify.html"
    page.write_text(VERIFY_RENDERERS["html"](run), encoding="utf-8")
    loaded = headless(chromium(), tmp_path / "profile", "--dump-dom", page.as_uri())
    console = [line for line in loaded.stderr.splitlines() if CONSOLE.search(line)]
    assert console == []
    assert '<time id="generated"' in loaded.stdout
    assert shown_counts(loaded.stdout) == {
        "checks": len(PROBES),
        **{o.value: len(run.outcomes(o)) for o in ProbeOutcome},
        "errors": 0,
    }


PRINTED_RULES = """(() => {
  const width = document.documentElement.clientWidth;
  const shown = (e) => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= width + 0.5; };
  const rules = [...document.querySelectorAll('table.pivot th.pivot-rule')];
  const cells = [...document.querySelectorAll('table.pivot td.cell')];
  const screen = [...document.querySelectorAll('.filters, table.matrix')];
  return {rules: rules.filter(shown).map((e) => e.textContent.trim()),
          cells: cells.length, hidden_cells: cells.filter((e) => !shown(e)).length,
          controls_shown: screen.filter((e) => e.checkVisibility()).length};
})()"""
"""In print layout: the rule ids of the pivoted matrix that lie within the page's width, the
verdict cells and how many of them do not, and how many screen controls still show."""


@pytest.mark.e2e
def test_printed_at_a4_every_rule_shows_for_four_accounts_in_three_pages(
    reports: dict[str, Path],
) -> None:
    """Printed to PDF at A4 by Chromium, a four-account report (with a suppression, an
    UNKNOWN, a read error and history) shows every rule's verdict for every account inside
    the page's width, hides the filter controls and the scrolling matrix, and takes at most
    three pages."""
    with Browser(chromium(), reports["folder"] / "devtools-print") as browser:
        browser.open(reports["html"].as_uri())
        browser.emulate_media("print")
        layout = browser.evaluate(PRINTED_RULES)
        pdf = browser.print_pdf(reports["folder"] / "report.pdf")
    accounts = json.loads(reports["json"].read_text())["summary"]["accounts"]
    assert accounts == 4
    assert sorted(layout["rules"]) == sorted(RULES_BY_ID)
    assert layout["cells"] == len(RULES_BY_ID) * accounts
    assert layout["hidden_cells"] == 0
    assert layout["controls_shown"] == 0
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", pdf))
    assert 1 <= pages <= 3, pages
