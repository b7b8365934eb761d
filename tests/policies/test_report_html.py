"""The HTML report: self-contained, and checked in a real headless Chromium (Debian package
`chromium`): it loads with no console message, its script runs under its own Content Security
Policy, and the counts it shows equal the JSON's. A screenshot is kept under build/.

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

from blob_safetynet.cli.main import main
from blob_safetynet.policies.report_html import frameworks
from blob_safetynet.policies.rules import RULES_BY_ID
from testkit.arm_fake import Failure, FakeArm, compliant_account, set_path
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
    assert shown_counts(loaded.stdout) == summary
    assert re.search(r'id="shown">\d+ verdict', loaded.stdout), "the page's script did not run"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    headless(
        browser,
        reports["folder"] / "profile",
        f"--screenshot={SCREENSHOT}",
        "--window-size=1400,1000",
        url,
    )
    assert SCREENSHOT.stat().st_size > 0


def test_the_framework_filter_groups_each_rules_controls() -> None:
    """Each rule's CIS and MCSB control ids are grouped under the framework's short name, the
    names the page's framework filter offers."""
    soft_delete = frameworks(RULES_BY_ID["SN-BLOB-SOFT-DELETE"])
    assert set(soft_delete) <= {"CIS 3.0.0", "MCSB v1"}
    assert soft_delete
    assert {name for rule in RULES_BY_ID.values() for name in frameworks(rule)} == {
        "CIS 3.0.0",
        "MCSB v1",
    }
