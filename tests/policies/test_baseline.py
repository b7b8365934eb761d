"""`audit --baseline`: the FAILs an earlier JSON report held are accepted, new ones fail the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli

DATA = Path(__file__).resolve().parent / "data"
SAVED = [
    str(DATA / name)
    for name in (
        "az-storage-account-show.json",
        "BlobServicesGet.json",
        "StorageAccountGetManagementPolicy.json",
    )
]
"""Saved ARM bodies the offline audit judges: 11 FAILs on two accounts, many UNKNOWN."""


def report(run_cli: RunCli, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run_cli("audit", "--from-file", *SAVED, "--format", "json", *extra)
    return code, json.loads(out)


def failing(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in document["findings"] if f["outcome"] == "FAIL"]


@pytest.fixture
def baseline(tmp_path: Path, run_cli: RunCli) -> Path:
    """Today's report, written as a pipeline writes its baseline (`--output json=FILE`)."""
    path = tmp_path / "baseline.json"
    code, _, _ = run_cli("audit", "--from-file", *SAVED, "--output", f"json={path}")
    assert code == 1
    return path


def test_failures_the_baseline_holds_do_not_fail_the_run(run_cli: RunCli, baseline: Path) -> None:
    """Every FAIL of the baseline is BASELINED, naming the baseline, and counted as such, not
    as SUPPRESSED; the exit is 3 (UNKNOWN remain), not 1."""
    code, document = report(run_cli, "--baseline", str(baseline))
    assert code == 3
    fails = failing(document)
    assert len(fails) == 11
    assert {f["state"] for f in fails} == {"BASELINED"}
    assert {f["baseline"] for f in fails} == {"baseline.json"}
    assert not [f for f in fails if "suppression" in f]
    assert (document["summary"]["BASELINED"], document["summary"]["SUPPRESSED"]) == (11, 0)


def test_a_failure_the_baseline_does_not_hold_fails_the_run(
    run_cli: RunCli, baseline: Path
) -> None:
    """A FAIL missing from the baseline (new since) stays FAIL and the run exits 1."""
    document = json.loads(baseline.read_text())
    new = next(f for f in document["findings"] if f["rule"] == "SN-SHARED-KEY-OFF")
    document["findings"].remove(new)
    baseline.write_text(json.dumps(document))
    code, now = report(run_cli, "--baseline", str(baseline))
    assert code == 1
    states = {(f["rule"], f["account"]): f["state"] for f in failing(now)}
    assert states.pop(("SN-SHARED-KEY-OFF", "acctcli")) == "FAIL"
    assert set(states.values()) == {"BASELINED"}


def test_the_same_rule_on_another_resource_is_a_new_failure(
    run_cli: RunCli, baseline: Path
) -> None:
    """The baseline accepts a rule for the resource it failed on, not for every resource."""
    document = json.loads(baseline.read_text())
    for finding in document["findings"]:
        if finding["rule"] == "SN-CONTAINER-SOFT-DELETE" and finding["outcome"] == "FAIL":
            finding["account"], finding["resource_id"] = "othername", "/subscriptions/x/other"
    baseline.write_text(json.dumps(document))
    code, now = report(run_cli, "--baseline", str(baseline))
    assert code == 1
    [failed] = [f for f in failing(now) if f["state"] == "FAIL"]
    assert (failed["rule"], failed["account"]) == ("SN-CONTAINER-SOFT-DELETE", "sto8607")


def test_a_baseline_failure_no_longer_failing_is_reported(run_cli: RunCli, baseline: Path) -> None:
    """A FAIL of the baseline this run does not see (fixed, or gone) is listed in every report,
    so the baseline is refreshed instead of kept."""
    document = json.loads(baseline.read_text())
    fixed = {**failing(document)[0], "rule": "SN-NO-PUBLIC-ACCESS"}
    document["findings"].append(fixed)
    baseline.write_text(json.dumps(document))
    code, out, err = run_cli("audit", "--from-file", *SAVED, "--baseline", str(baseline))
    assert code == 3
    assert "baseline FAIL no longer failing: SN-NO-PUBLIC-ACCESS" in out + err
    _, now = report(run_cli, "--baseline", str(baseline))
    [entry] = now["suppressions"]["baseline_no_longer_failing"]
    assert entry["rule"] == "SN-NO-PUBLIC-ACCESS"


def test_unknown_is_never_accepted_by_a_baseline(run_cli: RunCli, baseline: Path) -> None:
    """An UNKNOWN in the baseline does not make today's UNKNOWN anything else."""
    document = json.loads(baseline.read_text())
    for finding in document["findings"]:
        finding["outcome"] = "FAIL"
    baseline.write_text(json.dumps(document))
    _, now = report(run_cli, "--baseline", str(baseline))
    assert {f["state"] for f in now["findings"] if f["outcome"] == "UNKNOWN"} == {"UNKNOWN"}


@pytest.mark.parametrize(
    ("output", "shown", "not_shown"),
    [
        ("table", "  BASELINED  ", "  SUPPRESSED  "),
        ("markdown", "**BASELINED**", "**SUPPRESSED**"),
        ("sarif", '"baselineState": "unchanged"', '"baselineState": "new"'),
        ("junit", "baselined: failing already in the baseline baseline.json", "suppressed "),
        ("csv", ",BASELINED,FAIL,", ",SUPPRESSED,"),
        ("html", 'data-state="BASELINED"', 'data-state="SUPPRESSED"'),
    ],
)
def test_every_format_shows_a_baselined_failure(
    tmp_path: Path, run_cli: RunCli, baseline: Path, output: str, shown: str, not_shown: str
) -> None:
    """Each format shows the accepted failures as BASELINED (or SARIF's baselineState
    unchanged), never as SUPPRESSED, naming the baseline where it says why."""
    path = tmp_path / f"report.{output}"
    code, _, err = run_cli(
        "audit", "--from-file", *SAVED, "--baseline", str(baseline), "--output", f"{output}={path}"
    )
    assert code == 3, err
    text = path.read_text(encoding="utf-8").replace("\\", "")
    assert shown in text
    assert not_shown not in text


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "cannot read it"),
        (b"{not json", "not valid JSON"),
        (b"[" * 100, "nests deeper than 32"),
        (b'{"findings": 3}', "no 'findings' list"),
        (b'{"findings": [{"rule": "SN-X", "outcome": "FAIL"}]}', "no account name"),
        (b'{"findings": [{"rule": 7, "outcome": "FAIL"}]}', "no rule id"),
    ],
)
def test_a_baseline_that_is_not_an_audit_report_is_bad_usage(
    tmp_path: Path, run_cli: RunCli, content: bytes | None, words: str
) -> None:
    """Exit 2 naming --baseline and the file, before anything is judged; no traceback."""
    path = tmp_path / "earlier.json"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run_cli("audit", "--from-file", *SAVED, "--baseline", str(path))
    assert code == 2
    assert "--baseline" in err
    assert "earlier.json" in err
    assert words in err
    assert out == ""


def test_the_baseline_cannot_be_overwritten_by_the_report(run_cli: RunCli, baseline: Path) -> None:
    """`--output json=<the baseline>` is refused before the audit, and the baseline is kept."""
    before = baseline.read_bytes()
    code, _, err = run_cli(
        "audit", "--from-file", *SAVED, "--baseline", str(baseline), "--output", f"json={baseline}"
    )
    assert code == 2
    assert "baseline.json" in err
    assert baseline.read_bytes() == before
