"""The audit's SARIF as code scanning takes it, over time: a category that stays the same from
another folder or file order, the caller's category when given, plain text beside Markdown,
and "could not be judged" as notifications, not alerts.

`upload` re-implements the checks github/codeql-action applies before and while uploading
(src/upload-lib.ts: validateSarifFileSchema, countResultsInSarif, populateRunAutomationDetails
with getAutomationID, validateUniqueCategory; and the processing error "invalid security
severity value, is not a number" that shouldConsiderInvalidRequest lists)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from tests.conftest import RunCli
from tests.policies.test_offline_audit import account_of, cli_files

DATA = Path(__file__).parent / "data"
SARIF_SCHEMA = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())


class UploadRefused(Exception):
    pass


def _sanitize(text: str | None) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", text or "_").upper()


def upload(document: dict[str, Any], category: str | None, job: set[str]) -> list[str]:
    """The categories code scanning files the runs under, or UploadRefused: the schema (URI
    format errors are only warnings there), a `results` array in every run, numeric
    security-severity, the category input applied only to runs without an id (with the `/`
    getAutomationID appends), and one upload per category and tool in a job (`job` holds the
    sentinels earlier uploads left)."""
    validator = jsonschema.Draft7Validator(SARIF_SCHEMA, format_checker=None)
    errors = [e for e in validator.iter_errors(document) if e.validator != "format"]
    if errors:
        raise UploadRefused(f"not valid SARIF: {errors[0].message}")
    for run in document["runs"]:
        if not isinstance(run.get("results"), list):
            raise UploadRefused("Missing 'results' array in run.")
        for rule in run["tool"]["driver"].get("rules", []):
            severity = rule.get("properties", {}).get("security-severity")
            if severity is not None:
                try:
                    float(severity)
                except ValueError:
                    raise UploadRefused(
                        "invalid security severity value, is not a number"
                    ) from None
        if "automationDetails" not in run and category is not None:
            run["automationDetails"] = {
                "id": category if category.endswith("/") else category + "/"
            }
    categories = []
    for run in document["runs"]:
        identifier = run.get("automationDetails", {}).get("id")
        sentinel = f"{_sanitize(identifier)}_{_sanitize(run['tool']['driver']['name'])}"
        if sentinel in job:
            raise UploadRefused("only one run of upload-sarif is allowed per job per tool/category")
        job.add(sentinel)
        categories.append(identifier.rsplit("/", 1)[0] if identifier else "")
    return categories


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    """Saved ARM JSON of a broken account, whose messages carry Markdown punctuation."""
    folder = tmp_path / "arm"
    folder.mkdir()
    return cli_files(account_of("acctbad", True), folder)


def sarif_of(run_cli: RunCli, tmp_path: Path, paths: list[Path], *args: str) -> dict[str, Any]:
    output = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}.sarif"
    code, _, _ = run_cli(
        "audit", "--from-file", *map(str, paths), "--output", f"sarif={output}", *args
    )
    assert code in (ExitCode.FINDINGS, ExitCode.INCOMPLETE)
    document: dict[str, Any] = json.loads(output.read_text())
    return document


def test_the_category_of_files_is_the_same_from_another_folder_and_order(
    run_cli: RunCli, tmp_path: Path, files: list[Path]
) -> None:
    """The same files copied elsewhere and given in reverse order file under the same
    category, so code scanning closes what was fixed instead of opening a second set."""
    elsewhere = tmp_path / "checkout" / "deep"
    elsewhere.mkdir(parents=True)
    moved = [Path(shutil.copy(path, elsewhere / path.name)) for path in files]
    first = upload(sarif_of(run_cli, tmp_path, files), "ignored", set())
    second = upload(sarif_of(run_cli, tmp_path, moved[::-1]), "ignored", set())
    assert first == second == ["safetynet-audit/files"]


def test_the_callers_category_wins(run_cli: RunCli, tmp_path: Path, files: list[Path]) -> None:
    """--sarif-category puts the caller's category in the file, where upload-sarif's own input
    could not reach (an id in the file takes precedence)."""
    document = sarif_of(run_cli, tmp_path, files, "--sarif-category", "nightly/files")
    assert upload(document, "something-else", set()) == ["nightly/files"]


def test_audit_and_verify_categories_upload_in_one_job(
    run_cli: RunCli, tmp_path: Path, files: list[Path]
) -> None:
    """Two uploads in one job need two categories: the action's per-command ones pass, and the
    same category twice is refused, as codeql-action refuses it."""
    job: set[str] = set()
    upload(
        sarif_of(run_cli, tmp_path, files, "--sarif-category", "safetynet-audit-files"), None, job
    )
    upload(sarif_of(run_cli, tmp_path, files, "--sarif-category", "safetynet-audit"), None, job)
    with pytest.raises(UploadRefused, match="one run"):
        upload(sarif_of(run_cli, tmp_path, files, "--sarif-category", "safetynet-audit"), None, job)


def test_message_text_is_plain_and_markdown_is_escaped(
    run_cli: RunCli, tmp_path: Path, files: list[Path]
) -> None:
    """`message.text` reads as the JSON report's message, without Markdown backslashes;
    `message.markdown` carries the escaped form."""
    document = sarif_of(run_cli, tmp_path, files)
    report = tmp_path / "r.json"
    run_cli("audit", "--from-file", *map(str, files), "--output", f"json={report}")
    messages = {
        f["rule"]: f"{f['account']}: {f['message']}"
        for f in json.loads(report.read_text())["findings"]
        if f["outcome"] == "FAIL"
    }
    results = document["runs"][0]["results"]
    assert results
    for result in results:
        assert result["message"]["text"] == messages[result["ruleId"]]
        assert "\\" not in result["message"]["text"]
        assert "\\:" in result["message"]["markdown"]


def test_unknown_verdicts_are_one_notification_each_not_results(
    run_cli: RunCli, tmp_path: Path, files: list[Path]
) -> None:
    """Results are the FAILs; each UNKNOWN verdict of the JSON report (the blob rules, without
    the blob service's file) is one warning notification with descriptor `unknown` naming its
    rule, and it uploads."""
    files = [path for path in files if not path.name.endswith("blob-service.json")]
    document = sarif_of(run_cli, tmp_path, files)
    report = tmp_path / "r.json"
    run_cli("audit", "--from-file", *map(str, files), "--output", f"json={report}")
    findings = json.loads(report.read_text())["findings"]
    unknown = sorted(f["rule"] for f in findings if f["outcome"] == "UNKNOWN")
    run = document["runs"][0]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    rules = run["tool"]["driver"]["rules"]
    noted = sorted(n["associatedRule"]["id"] for n in notes if n["descriptor"]["id"] == "unknown")
    assert unknown
    assert noted == unknown
    assert all(
        rules[n["associatedRule"]["index"]]["id"] == n["associatedRule"]["id"]
        for n in notes
        if "associatedRule" in n
    )
    assert {n["level"] for n in notes if n["descriptor"]["id"] == "unknown"} == {"warning"}
    assert {r["kind"] for r in run["results"]} == {"fail"}
    assert upload(document, None, set())


@pytest.mark.parametrize("category", ["", "///", "a\x1bb", "x" * 201])
def test_an_unusable_category_is_bad_usage(
    run_cli: RunCli, tmp_path: Path, files: list[Path], category: str
) -> None:
    """A blank, slash-only, control-character or overlong --sarif-category exits 2 with the
    option named, before anything is read."""
    code, _, err = run_cli("audit", "--from-file", *map(str, files), "--sarif-category", category)
    assert code == ExitCode.USAGE
    assert "--sarif-category" in err
