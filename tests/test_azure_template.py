"""The Azure Pipelines step template (`templates/safetynet.yml`) as the agent runs it: the
parameters substituted, its bash steps executed in order with the variables the earlier steps
set, its tasks given the report paths (JUnit to PublishTestResults@2, SARIF to the
CodeAnalysisLogs artifact)."""

from __future__ import annotations

import json
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from blob_safetynet.cli.exitcodes import ExitCode
from tests.ci_steps import ROOT, TemplateRun, expand_template, run_template
from tests.policies.test_offline_audit import (
    NOT_IN_AN_EXPORT,
    account_of,
    cli_files,
    portal_export,
)
from tests.test_action import GIT_REF, fake_python, pip_calls

TEMPLATE = ROOT / "templates" / "safetynet.yml"
DOC = ROOT / "docs" / "ci-azure-pipelines.md"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    (root / "arm").mkdir(parents=True)
    for name, broken in (("acctgood", False), ("acctbad", True)):
        cli_files(account_of(name, broken), root / "arm")
    return root


def doc_parameters() -> dict[str, Any]:
    """The parameters of the template reference in docs/ci-azure-pipelines.md's pipeline."""
    match = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert match, "docs/ci-azure-pipelines.md shows no pipeline"
    pipeline = yaml.safe_load(match.group(1))
    (reference,) = [
        s
        for s in pipeline["steps"]
        if str(s.get("template", "")).startswith("templates/safetynet.yml@")
    ]
    parameters: dict[str, Any] = reference["parameters"]
    return parameters


def run(parameters: dict[str, Any], workspace: Path) -> TemplateRun:
    temp = workspace.parent / "agent-temp"
    temp.mkdir(exist_ok=True)
    return run_template(TEMPLATE, {**parameters, "python": sys.executable}, workspace, temp)


def tasks(result: TemplateRun, name: str) -> list[dict[str, str]]:
    return [inputs for task, inputs in result.tasks if task == name]


def test_the_documented_step_publishes_junit_sarif_and_fails_on_findings(workspace: Path) -> None:
    """The docs' template step on saved ARM JSON: the outputs hold the JSON report's counts,
    the summary file uploaded holds the Markdown table, JUnit goes to PublishTestResults@2,
    SARIF to the CodeAnalysisLogs artifact, and the last step exits 1 (a high rule fails)."""
    result = run(doc_parameters(), workspace)
    summary = json.loads(Path(result.outputs["json"]).read_text())["summary"]
    assert result.outputs["exit_code"] == str(int(ExitCode.FINDINGS))
    assert result.codes[-1] == ExitCode.FINDINGS
    assert result.codes[:-1] == [0, 0]  # install, run: reports before the verdict
    assert int(result.outputs["fail"]) == summary["FAIL"] > 0
    assert int(result.outputs["unknown"]) == summary["UNKNOWN"]
    uploaded = re.search(r"##vso\[task\.uploadsummary\](.+)", result.stdout)
    assert uploaded
    assert "| Account | Rule | Severity | State | Finding |" in Path(uploaded.group(1)).read_text()
    (junit,) = tasks(result, "PublishTestResults@2")
    assert junit["testResultsFormat"] == "JUnit"
    assert Path(junit["testResultsFiles"]).is_file()
    (artifact,) = tasks(result, "PublishBuildArtifacts@1")
    assert artifact["ArtifactName"] == "CodeAnalysisLogs"
    sarif = json.loads(Path(artifact["PathtoPublish"]).read_text())
    assert sarif["runs"][0]["automationDetails"]["id"] == "safetynet-audit-files/"


@pytest.mark.parametrize(
    ("compliant", "code"), [(True, ExitCode.OK), (False, ExitCode.FINDINGS)], ids=["green", "red"]
)
def test_the_documented_step_judges_what_a_template_export_shows(
    tmp_path: Path, compliant: bool, code: ExitCode
) -> None:
    """The docs' step on one account's template export as the portal writes it: a compliant
    account's passes (what the export cannot show is NOT_IN_FILES, counted as neither failed
    nor unknown), a non-compliant one's fails the last step with exit 1."""
    root = tmp_path / "s"
    (root / "arm").mkdir(parents=True)
    portal_export(account_of("acctexport", not compliant), root / "arm" / "export.json")
    result = run(doc_parameters(), root)
    summary = json.loads(Path(result.outputs["json"]).read_text())["summary"]
    assert result.outputs["exit_code"] == str(int(code)), result.stdout
    assert result.codes[-1] == code
    assert result.outputs["unknown"] == "0"
    assert summary["NOT_IN_FILES"] == len(NOT_IN_AN_EXPORT)
    assert (result.outputs["fail"] == "0") is compliant


def test_could_not_look_fails_the_last_step(workspace: Path) -> None:
    """failOn none: no FAIL counts, but without the blob service's files the blob rules are
    UNKNOWN, exit 3, the step fails."""
    for path in (workspace / "arm").glob("*-blob-service.json"):
        path.unlink()
    result = run({**doc_parameters(), "failOn": "none"}, workspace)
    assert result.outputs["exit_code"] == str(int(ExitCode.INCOMPLETE))
    assert result.codes[-1] == ExitCode.INCOMPLETE


def test_a_service_connection_runs_the_same_script_inside_azure_cli(workspace: Path) -> None:
    """With azureSubscription the step is AzureCLI@2 (signed in for DefaultAzureCredential)
    running the very script of the plain bash step, under the same step name."""
    plain = {s.get("name"): s for s in expand_template(TEMPLATE, {"command": "audit"})}
    signed = {
        s.get("name"): s
        for s in expand_template(TEMPLATE, {"command": "audit", "azureSubscription": "azure-prod"})
    }
    assert signed["safetynet"]["task"] == "AzureCLI@2"
    assert signed["safetynet"]["inputs"]["azureSubscription"] == "azure-prod"
    assert signed["safetynet"]["inputs"]["inlineScript"] == plain["safetynet"]["bash"]
    assert signed["safetynet"]["env"] == plain["safetynet"]["env"]


def test_a_step_that_never_reported_fails_closed(workspace: Path) -> None:
    """With a service connection the run happens inside AzureCLI@2, which this runner does not
    execute: no exit code was set, and the last step fails rather than passing."""
    result = run({"command": "audit", "azureSubscription": "azure-prod"}, workspace)
    assert "AzureCLI@2" in [task for task, _ in result.tasks]
    assert "exit_code" not in result.outputs
    assert result.codes[-1] != 0


def test_bad_input_is_exit_2_in_the_summary(workspace: Path) -> None:
    """files given to verify: refused before anything runs, exit 2, said as a logged issue."""
    result = run({"command": "verify", "files": "arm/*.json"}, workspace)
    assert result.outputs["exit_code"] == str(int(ExitCode.USAGE))
    assert (
        "##vso[task.logissue type=error]input files is read only by command audit-files"
        in result.stdout
    )
    assert result.codes[-1] == ExitCode.USAGE
    assert not tasks(result, "PublishBuildArtifacts@1")


@pytest.mark.parametrize(
    ("parameters", "installed"),
    [
        ({}, GIT_REF),
        (
            {"package": "dist/blob_safetynet-0.1.0-py3-none-any.whl"},
            "dist/blob_safetynet-0.1.0-py3-none-any.whl",
        ),
        ({"package": "blob-safetynet==0.1.0"}, "blob-safetynet==0.1.0"),
    ],
    ids=["tag", "wheel", "index"],
)
def test_the_install_step_takes_the_tag_a_wheel_or_the_index(
    tmp_path: Path, parameters: dict[str, str], installed: str
) -> None:
    """By default the template installs its own version's tag from the repository (no index
    serves blob-safetynet); `package` takes a wheel, a folder or any requirement instead."""
    workspace = tmp_path / "s"
    workspace.mkdir()
    temp = tmp_path / "agent-temp"
    temp.mkdir()
    env = fake_python(tmp_path / "bin")
    run_template(TEMPLATE, {"command": "audit", **parameters}, workspace, temp, env)
    assert pip_calls(env) == [["install", installed]]


def test_the_default_tag_is_this_packages_version_in_its_own_repository() -> None:
    """The template's `version` default is pyproject.toml's version and its git URL the
    project's Source URL, so the tag a pipeline references installs that tag's code."""
    template = yaml.safe_load(TEMPLATE.read_text())
    declared = {p["name"]: p for p in template["parameters"]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert declared["version"]["default"] == project["version"]
    assert f"git+{project['urls']['Source']}@v$INPUT_VERSION" in TEMPLATE.read_text()
    assert GIT_REF.endswith(f"@v{project['version']}")


def test_a_committed_summary_link_is_replaced_not_written_through(workspace: Path) -> None:
    """`<reports>/audit-files.summary.md` committed as a link to a file elsewhere: the summary
    replaces the link with a file of its own (mode 0600), the file it pointed to is unchanged,
    and the uploaded summary is that new file."""
    victim = workspace.parent / "victim.md"
    victim.write_text("keep")
    (workspace / "safetynet-reports").mkdir()
    (workspace / "safetynet-reports" / "audit-files.summary.md").symlink_to(victim)
    result = run(doc_parameters(), workspace)
    uploaded = re.search(r"##vso\[task\.uploadsummary\](.+)", result.stdout)
    assert uploaded
    summary = Path(uploaded.group(1))
    assert victim.read_text() == "keep"
    assert not summary.is_symlink()
    assert "| Account | Rule | Severity | State | Finding |" in summary.read_text()
    assert stat.S_IMODE(summary.stat().st_mode) & 0o077 == 0


def test_a_reports_folder_that_is_a_committed_link_is_bad_usage(workspace: Path) -> None:
    """reportsDir a link to a folder outside the workspace: exit 2 naming the input, and the
    earlier reports in the folder it points to are neither removed nor rewritten."""
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "audit-files.json").write_text("keep")
    (workspace / "safetynet-reports").symlink_to(outside, target_is_directory=True)
    result = run(doc_parameters(), workspace)
    assert result.outputs["exit_code"] == str(int(ExitCode.USAGE))
    assert "input reports-dir" in result.stdout
    assert result.codes[-1] == ExitCode.USAGE
    assert sorted(p.name for p in outside.iterdir()) == ["audit-files.json"]
    assert (outside / "audit-files.json").read_text() == "keep"


def test_the_logged_issue_and_summary_say_what_this_step_saw(workspace: Path) -> None:
    """The template's error names the rules that failed and where, the uploaded summary leads
    with the same sentence and keeps the rules' code spans, and neither it nor the JUnit report
    carries the agent's absolute paths."""
    result = run(doc_parameters(), workspace)
    [issue] = [c.data for c in result.commands if c.name == "task.logissue"]
    assert issue.startswith("safetynet audit-files exited 1: ")
    assert " rules failed at or above high: " in issue
    assert "SN-NO-PUBLIC-ACCESS on acctbad" in issue
    assert "a row could not be swept" not in issue
    uploaded = re.search(r"##vso\[task\.uploadsummary\](.+)", result.stdout)
    assert uploaded
    summary = Path(uploaded.group(1)).read_text()
    assert "account `allowBlobPublicAccess: false`" in summary
    (junit,) = tasks(result, "PublishTestResults@2")
    for text in (summary, Path(junit["testResultsFiles"]).read_text()):
        assert str(workspace) not in text
        assert "arm/acctbad-account.json" in text.replace("\\", "")


def test_exit_3_from_files_never_says_authentication(workspace: Path) -> None:
    """Without the blob service files, exit 3 names what the files did not let it judge."""
    for path in (workspace / "arm").glob("*-blob-service.json"):
        path.unlink()
    result = run({**doc_parameters(), "failOn": "none"}, workspace)
    [issue] = [c.data for c in result.commands if c.name == "task.logissue"]
    assert "could not be judged from the files" in issue
    assert "authentication" not in issue


def test_sarif_of_saved_files_points_at_the_committed_file(workspace: Path) -> None:
    """The CodeAnalysisLogs SARIF locates results in the committed file, relative to the
    sources folder, at the line of the account's resource."""
    result = run(doc_parameters(), workspace)
    (artifact,) = tasks(result, "PublishBuildArtifacts@1")
    results = json.loads(Path(artifact["PathtoPublish"]).read_text())["runs"][0]["results"]
    where = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert where == {"arm/acctbad-account.json"}
