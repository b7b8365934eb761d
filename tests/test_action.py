"""The GitHub Action (`action.yml`) as a runner runs it, on the workflow docs/ci-github.md shows:
its metadata against SchemaStore's schema, the workflow through actionlint, and its `run:` steps
executed with the files and variables a runner sets, against saved ARM JSON and the fake ARM."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.reports import escaping
from testkit.arm_fake import SUBSCRIPTION, TOKEN, Failure, FakeArm, compliant_account
from tests.ci_steps import ROOT, ActionRun, run_action
from tests.policies.test_offline_audit import (
    NOT_IN_AN_EXPORT,
    account_of,
    cli_files,
    portal_export,
)

DOC = ROOT / "docs" / "ci-github.md"
BIN = Path(sys.executable).parent
ACTION_REFERENCE = re.compile(r"^blob-safetynet/blob-safetynet@")
VARS = {
    "AZURE_CLIENT_ID": "11111111-1111-1111-1111-111111111111",
    "AZURE_TENANT_ID": "22222222-2222-2222-2222-222222222222",
    "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
}


def doc_workflow() -> str:
    """The first YAML block of docs/ci-github.md: the workflow users copy."""
    match = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert match, "docs/ci-github.md shows no workflow"
    return match.group(1)


def action_steps() -> dict[str, dict[str, Any]]:
    """The workflow's steps that use this action, by id or name."""
    workflow = yaml.safe_load(doc_workflow())
    steps = workflow["jobs"]["safetynet"]["steps"]
    return {
        step.get("id", step["name"]): step
        for step in steps
        if ACTION_REFERENCE.match(step.get("uses", ""))
    }


def with_vars(inputs: dict[str, Any]) -> dict[str, Any]:
    """The step's `with:`, `${{ vars.X }}` read from the repository variables above, and
    `python` set to this checkout's environment (no package index here serves the package)."""
    resolved = {
        name: re.sub(r"\$\{\{\s*vars\.(\w+)\s*\}\}", lambda m: VARS[m.group(1)], str(value))
        if isinstance(value, str)
        else value
        for name, value in inputs.items()
    }
    return {**resolved, "python": sys.executable}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A checkout with saved ARM JSON of a compliant and a broken account under arm/."""
    root = tmp_path / "workspace"
    (root / "arm").mkdir(parents=True)
    for name, broken in (("acctgood", False), ("acctbad", True)):
        cli_files(account_of(name, broken), root / "arm")
    return root


def run(inputs: dict[str, Any], workspace: Path, env: dict[str, str] | None = None) -> ActionRun:
    temp = workspace.parent / "runner-temp"
    temp.mkdir(exist_ok=True)
    return run_action(ROOT, inputs, workspace, temp, env or {})


def json_summary(result: ActionRun) -> dict[str, int]:
    summary: dict[str, int] = json.loads(Path(result.outputs["json"]).read_text())["summary"]
    return summary


def test_action_metadata_validates_against_schemastores_schema() -> None:
    """check-jsonschema's vendored github-action schema accepts action.yml."""
    done = subprocess.run(
        [
            BIN / "check-jsonschema",
            "--builtin-schema",
            "vendor.github-actions",
            ROOT / "action.yml",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


FAKE_PYTHON = """#!{python}
import os
import sys
from pathlib import Path

args = sys.argv[1:]
if args[:2] == ["-m", "venv"]:
    (Path(args[2]) / "bin").mkdir(parents=True, exist_ok=True)
    made = Path(args[2]) / "bin" / "python"
    made.write_text(Path(__file__).read_text())
    made.chmod(0o755)
    sys.exit(0)
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(repr(args) + "\\n")
if "wheel" in args:
    folder = Path(args[args.index("--wheel-dir") + 1])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "blob_safetynet-0.1.0-py3-none-any.whl").write_text("")
if args[:1] == ["-c"]:
    print("blob-safetynet 0.1.0")
"""
"""Stands in for python3 (and the venv's python it makes): records every call after `-m venv`
and leaves what `pip wheel` would, so the install step's choice is seen without an index."""


def fake_python(folder: Path) -> dict[str, str]:
    """PATH with the fake python3 first, and where it records its calls."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "python3"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    return {"PATH": f"{folder}:/usr/bin:/bin", "FAKE_LOG": str(folder / "calls.log")}


def pip_calls(env: dict[str, str]) -> list[list[str]]:
    lines = Path(env["FAKE_LOG"]).read_text().splitlines()
    quiet = {"--quiet", "--disable-pip-version-check"}
    return [
        [word for word in call[2:] if word not in quiet]
        for call in map(ast.literal_eval, lines)
        if call[:2] == ["-m", "pip"]
    ]


GIT_REF = "blob-safetynet @ git+https://github.com/blob-safetynet/blob-safetynet@v0.1.0"


@pytest.mark.parametrize(
    ("inputs", "installed"),
    [
        ({}, "{action}/policies/wheels/blob_safetynet-0.1.0-py3-none-any.whl"),
        (
            {"package": "dist/blob_safetynet-0.1.0-py3-none-any.whl"},
            "dist/blob_safetynet-0.1.0-py3-none-any.whl",
        ),
        ({"package": GIT_REF}, GIT_REF),
        ({"version": "0.1.0"}, "blob-safetynet==0.1.0"),
    ],
    ids=["own-source", "wheel", "git-ref", "index"],
)
def test_the_install_step_takes_the_actions_source_a_wheel_a_git_ref_or_the_index(
    tmp_path: Path, inputs: dict[str, str], installed: str
) -> None:
    """By default the action builds its own source (the tag's or commit's) into a wheel in its
    pack's wheels/ and installs that: no index is asked for blob-safetynet. `package` takes a
    wheel or a git ref instead, `version` the index."""
    action = tmp_path / "action"
    action.mkdir()
    shutil.copy(ROOT / "action.yml", action / "action.yml")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = fake_python(tmp_path / "bin")
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    result = run_action(action, {"command": "audit", **inputs}, workspace, temp, env)
    assert result.outcomes["install"] == "success", result.log
    calls = pip_calls(env)
    if not inputs:
        assert calls[0] == [
            "wheel",
            "--no-deps",
            "--wheel-dir",
            f"{action}/policies/wheels",
            str(action),
        ]
    assert calls[-1] == ["install", installed.format(action=action)]
    assert len(calls) == (2 if not inputs else 1)


def test_the_packs_requirements_find_the_wheel_where_the_action_builds_it() -> None:
    """policies/requirements.txt looks in ./wheels, the folder the action's install step
    fills, so `preview` with the action's own pack finds blob-safetynet without an index."""
    metadata = yaml.safe_load((ROOT / "action.yml").read_text())
    (install,) = [s for s in metadata["runs"]["steps"] if s.get("id") == "install"]
    assert 'wheels="$SAFETYNET_ACTION_PATH/policies/wheels"' in install["run"]
    lines = (ROOT / "policies" / "requirements.txt").read_text().splitlines()
    assert "--find-links ./wheels" in lines


WORKFLOWS = {
    "docs/ci-github.md": doc_workflow,
    "examples/github-actions.yml": (ROOT / "examples" / "github-actions.yml").read_text,
    ".github/workflows/release.yml": (ROOT / ".github" / "workflows" / "release.yml").read_text,
}


def actionlint(tmp_path: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    """actionlint over `workflow` in a repository whose root action is this one (`uses: ./`)."""
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ROOT / "action.yml", repository / "action.yml")
    local = re.sub(r"blob-safetynet/blob-safetynet@\S+", "./", workflow)
    (repository / ".github" / "workflows" / "safetynet.yml").write_text(local)
    return subprocess.run(
        [BIN / "actionlint", "-no-color"],
        cwd=repository,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("source", WORKFLOWS)
def test_the_workflows_pass_actionlint(tmp_path: Path, source: str) -> None:
    """actionlint checks each workflow with this action as a local action, so every `with:`
    key must be an input action.yml declares, every expression must type-check, and no action
    may be at a major that runs on a deprecated runtime."""
    done = actionlint(tmp_path, WORKFLOWS[source]())
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_refuses_an_input_the_action_does_not_declare(tmp_path: Path) -> None:
    """The actionlint check above can fail: a misspelt input is reported."""
    done = actionlint(tmp_path, doc_workflow().replace("fail-on: high", "fail_on: high"))
    assert done.returncode == 1
    assert "fail_on" in done.stdout


def test_audit_files_step_summarises_counts_uploads_and_fails_on_findings(workspace: Path) -> None:
    """The docs' audit-files step: the summary holds the Markdown table, the outputs hold the
    JSON report's counts, upload-sarif gets the file and the command's category, and the step
    fails because a high rule fails (exit 1)."""
    result = run(with_vars(action_steps()["files"]["with"]), workspace)
    summary = json_summary(result)
    assert result.outputs["exit-code"] == str(int(ExitCode.FINDINGS))
    assert result.failed
    assert result.outcomes["run"] == "success"  # reports first; the last step fails the job
    assert "| Account | Rule | Severity | State | Finding |" in result.summary
    assert "acctbad" in result.summary
    assert {name: int(result.outputs[name]) for name in ("fail", "pass", "unknown")} == {
        "fail": summary["FAIL"],
        "pass": summary["PASS"],
        "unknown": summary["UNKNOWN"],
    }
    assert int(result.outputs["accounts"]) == summary["accounts"] == 2
    (uses, given), *_ = [u for u in result.uses if "upload-sarif" in u[0]]
    sarif = json.loads(Path(given["sarif_file"]).read_text())
    assert uses == "github/codeql-action/upload-sarif@v4"
    assert given["category"] == "safetynet-audit-files"
    assert sarif["runs"][0]["automationDetails"]["id"] == "safetynet-audit-files/"


def export_workspace(root: Path, compliant: bool) -> Path:
    """A checkout whose arm/ holds one account's template export as the portal writes it."""
    (root / "arm").mkdir(parents=True)
    portal_export(account_of("acctexport", not compliant), root / "arm" / "export.json")
    return root


def test_the_documented_step_is_green_on_a_compliant_export(tmp_path: Path) -> None:
    """The docs' audit-files step on a compliant account's template export passes: what the
    export cannot show (roles, Defender, private endpoints, the shared key switch) is
    NOT_IN_FILES in the summary and no output counts it as unknown or failed."""
    result = run(with_vars(action_steps()["files"]["with"]), export_workspace(tmp_path, True))
    assert result.outputs["exit-code"] == "0", result.log
    assert not result.failed
    assert result.outcomes["verdict"] == "success"
    assert (result.outputs["fail"], result.outputs["unknown"]) == ("0", "0")
    assert json_summary(result)["NOT_IN_FILES"] == len(NOT_IN_AN_EXPORT)
    assert "**NOT_IN_FILES**" in result.summary


def test_the_documented_step_is_red_on_a_non_compliant_export(tmp_path: Path) -> None:
    """The same step on a non-compliant account's export fails the job: exit 1."""
    result = run(with_vars(action_steps()["files"]["with"]), export_workspace(tmp_path, False))
    assert result.outputs["exit-code"] == str(int(ExitCode.FINDINGS))
    assert int(result.outputs["fail"]) > 0
    assert result.outcomes["verdict"] == "failure"


def test_files_that_leave_out_a_part_they_could_hold_could_not_look(workspace: Path) -> None:
    """`fail-on: none` turns FAILs into no failure, but without the blob service's file the
    blob rules are UNKNOWN: exit 3, and the step fails, because could not look never passes."""
    for path in (workspace / "arm").glob("*-blob-service.json"):
        path.unlink()
    inputs = {**with_vars(action_steps()["files"]["with"]), "fail-on": "none"}
    result = run(inputs, workspace)
    assert int(result.outputs["unknown"]) > 0
    assert result.outputs["exit-code"] == str(int(ExitCode.INCOMPLETE))
    assert result.failed


@pytest.fixture
def arm() -> Iterator[FakeArm]:
    with FakeArm() as server:
        server.add(compliant_account("acctone", "rg-docs"))
        server.add(compliant_account("accttwo", "rg-docs"))
        yield server


def arm_env(server: FakeArm) -> dict[str, str]:
    """What azure/login leaves for the CLI, here as the token route the CLI also reads."""
    return {
        "SAFETYNET_ARM_TOKEN": TOKEN,
        "REQUESTS_CA_BUNDLE": server.ca_file,
        "SAFETYNET_ARM_ENDPOINT": server.endpoint,
    }


def test_live_audit_step_of_a_compliant_group_passes(arm: FakeArm, workspace: Path) -> None:
    """The docs' live audit step against the fake ARM: two compliant accounts, exit 0, the
    step passes, azure/login is asked with the repository's client and tenant ids, and the
    SARIF category is the step's own."""
    result = run(
        with_vars(action_steps()["Audit the live accounts"]["with"]), workspace, arm_env(arm)
    )
    assert result.outputs["exit-code"] == "0", result.log
    assert not result.failed
    assert result.outputs["accounts"] == "2"
    assert result.outputs["fail"] == "0"
    logins = [given for uses, given in result.uses if uses.startswith("azure/login@")]
    assert logins == [
        {
            "client-id": VARS["AZURE_CLIENT_ID"],
            "tenant-id": VARS["AZURE_TENANT_ID"],
            "subscription-id": SUBSCRIPTION,
        }
    ]
    sarif = json.loads(Path(result.outputs["sarif"]).read_text())
    assert sarif["runs"][0]["automationDetails"]["id"] == "safetynet-audit-rg-docs/"


def test_could_not_look_fails_the_step(arm: FakeArm, workspace: Path) -> None:
    """An account whose role assignments answer 403: nothing fails, verdicts are UNKNOWN,
    exit 3, and the action fails: could not look is never a pass."""
    arm.add(compliant_account("locked", "rg-docs")).failures["roleAssignments"] = Failure(403)
    inputs = {**with_vars(action_steps()["Audit the live accounts"]["with"]), "fail-on": "none"}
    result = run(inputs, workspace, arm_env(arm))
    assert result.outputs["exit-code"] == str(int(ExitCode.INCOMPLETE))
    assert int(result.outputs["unknown"]) > 0
    assert result.failed
    assert "exit 3" in result.summary


def test_management_group_is_passed_through_to_the_cli(workspace: Path) -> None:
    """`management-group` becomes `--management-group`, which the CLI accepts (a fleet audit);
    with no credential in the step it could not look: exit 3, the annotation names the failed
    sign-in, and the step fails."""
    inputs = {"command": "audit", "management-group": "mg-platform", "python": sys.executable}
    result = run(inputs, workspace)
    assert "::error title=safetynet::safetynet audit exited 3: 1 read error" in result.log
    assert ": authentication: " in result.log
    assert result.outputs["exit-code"] == str(int(ExitCode.INCOMPLETE))
    assert result.outputs["fail"] == "0"
    assert result.failed


def test_an_unknown_command_is_bad_usage_said_in_the_summary(workspace: Path) -> None:
    """`command: scan` is refused before anything runs: exit 2, the summary names the input,
    an error annotation is printed, and upload-sarif is not asked (no SARIF was written)."""
    result = run({"command": "scan", "python": sys.executable}, workspace)
    assert result.outputs["exit-code"] == str(int(ExitCode.USAGE))
    assert escaping.markdown("input command 'scan'") in result.summary
    assert "::error title=safetynet::" in result.log
    assert not [u for u in result.uses if "upload-sarif" in u[0]]
    assert result.failed


def test_a_step_that_never_reported_fails_closed(workspace: Path, tmp_path: Path) -> None:
    """A Python without the package: the install step fails, the run step is skipped, and the
    last step still fails the job rather than passing on a missing exit code."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    result = run({"command": "audit-files", "files": "arm/*.json", "python": str(fake)}, workspace)
    assert result.outcomes["install"] == "failure"
    assert result.outcomes["run"] == "skipped"
    assert result.outputs["exit-code"] == ""
    assert result.outcomes["verdict"] == "failure"


def test_verify_step_on_the_embedded_emulator_summarises_its_table(workspace: Path) -> None:
    """`command: verify` with no target probes an embedded Azurite: the summary holds the
    probes' table in a code block, the outputs hold the JSON report's counts, SARIF goes to
    upload-sarif under safetynet-verify, and a clean run passes."""
    result = run({"command": "verify", "python": sys.executable}, workspace)
    summary = json.loads(Path(result.outputs["json"]).read_text())["summary"]
    assert result.outputs["exit-code"] == "0", result.log
    assert not result.failed
    assert "SNV-CREATE-ONLY" in result.summary
    assert "```text" in result.summary
    assert int(result.outputs["pass"]) == summary["PASS"] > 0
    assert int(result.outputs["unknown"]) == summary["NOT_VERIFIABLE"] > 0
    (given,) = [g for uses, g in result.uses if "upload-sarif" in uses]
    assert given["category"] == "safetynet-verify"


def test_the_docs_say_what_verify_exits_on_not_verifiable() -> None:
    """The run above exits 0 with NOT_VERIFIABLE probes; docs/ci-github.md says so where it
    says what the step exits on, and no longer that it exits 3 on every unreached verdict."""
    text = " ".join(DOC.read_text().split())
    assert "verify exits 0 on a NOT_VERIFIABLE probe" in text
    assert "still exits 3 on them" not in text


def test_a_code_block_cannot_be_closed_by_the_text_it_holds() -> None:
    """The summary's code block uses a fence longer than any run of backticks in the text."""
    from blob_safetynet.cli.ci import fenced

    block = fenced("detail ```` still inside")
    fence = block.splitlines()[0].removesuffix("text")
    assert len(fence) == 5
    assert block.rstrip().endswith(fence)


def test_preview_maps_a_mandatory_violation_to_findings(workspace: Path, tmp_path: Path) -> None:
    """`command: preview` runs `pulumi preview --stack S --policy-pack <the action's policies>`
    and reads its "[mandatory]" violation lines as exit 1. The Pulumi CLI cannot be installed
    here (it downloads from outside the package registries), so a stand-in on PATH prints what Pulumi prints
    for a violation (https://www.pulumi.com/docs/iac/crossguard/get-started/) and records its
    arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pulumi = bin_dir / "pulumi"
    pulumi.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/argv\n'
        'echo "Policy Violations:"\n'
        'echo "    [mandatory]  safetynet v0.1.0  sn-soft-delete (acct: azure-native:storage:StorageAccount)"\n'
        "exit 255\n"
    )
    pulumi.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    result = run({"command": "preview", "stack": "dev", "python": sys.executable}, workspace, env)
    argv = (tmp_path / "argv").read_text().split()
    assert argv == [
        "preview",
        "--stack",
        "dev",
        "--policy-pack",
        str(ROOT / "policies"),
        "--non-interactive",
    ]
    assert result.outputs["exit-code"] == str(int(ExitCode.FINDINGS))
    assert "[mandatory]" in result.summary
    assert result.failed


def test_a_report_of_an_earlier_run_is_not_read_as_this_ones(workspace: Path) -> None:
    """A JSON report left by an earlier run in the reports folder is removed first: a run the
    CLI refuses (exit 2) has empty counts, not the old ones."""
    first = run(with_vars(action_steps()["files"]["with"]), workspace)
    assert first.outputs["fail"] != ""
    inputs = {**with_vars(action_steps()["files"]["with"]), "args": "--storage-api-version nope"}
    second = run(inputs, workspace)
    assert second.outputs["exit-code"] == str(int(ExitCode.USAGE))
    assert second.outputs["fail"] == ""
    assert second.outputs["json"] == ""


def test_a_reports_dir_that_is_a_file_is_bad_usage(workspace: Path) -> None:
    """reports-dir naming a file: exit 2 with the input named, no traceback."""
    (workspace / "taken").write_text("x")
    inputs = {**with_vars(action_steps()["files"]["with"]), "reports-dir": "taken"}
    result = run(inputs, workspace)
    assert result.outputs["exit-code"] == str(int(ExitCode.USAGE))
    assert escaping.markdown("input reports-dir") in result.summary
    assert "Traceback" not in result.log


def committed_link(workspace: Path, name: str, target: Path) -> None:
    """A symbolic link a pull request commits into the checkout."""
    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
    (workspace / name).symlink_to(target, target_is_directory=target.is_dir())


@pytest.mark.parametrize(
    ("inputs", "plant", "said"),
    [
        ({"reports-dir": "linked"}, ("linked", "folder"), "leads outside the workspace"),
        ({"reports-dir": "inside-link"}, ("inside-link", "arm"), "symbolic link"),
        ({"reports-dir": "../outside"}, None, "is outside the workspace"),
        ({"reports-dir": "/etc"}, None, "is outside the workspace"),
        ({"files": "arm/*.json"}, ("arm/leak.json", "file"), "leads outside the workspace"),
        ({"files": "../outside/*.json"}, None, "is outside the workspace"),
        ({"suppressions": "s.yml"}, ("s.yml", "file"), "leads outside the workspace"),
    ],
)
def test_path_inputs_are_confined_to_the_workspace(
    workspace: Path,
    inputs: dict[str, str],
    plant: tuple[str, str] | None,
    said: str,
) -> None:
    """A reports folder, file pattern or suppressions file outside the workspace, or reached
    through a committed link that leads outside it (or, for the folder written into, any
    link), is bad usage: exit 2 naming the input, and nothing outside is written or removed."""
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "audit-files.json").write_text("keep")
    (outside / "secret.json").write_text("{}")
    if plant is not None:
        name, kind = plant
        target = {"folder": outside, "file": outside / "secret.json"}.get(kind)
        committed_link(workspace, name, target or workspace / kind)
    result = run({**with_vars(action_steps()["files"]["with"]), **inputs}, workspace)
    assert result.outputs["exit-code"] == str(int(ExitCode.USAGE)), result.log
    assert escaping.markdown(said) in result.summary
    assert sorted(p.name for p in outside.iterdir()) == ["audit-files.json", "secret.json"]
    assert (outside / "audit-files.json").read_text() == "keep"
    assert result.outcomes["verdict"] == "failure"


def test_markup_from_an_input_does_not_render_in_the_job_summary(workspace: Path) -> None:
    """An input holding HTML (`<img src=...>`) is quoted in the summary escaped, so GitHub's
    Markdown shows it as text instead of loading the image."""
    inputs = {"command": '<img src="https://example.invalid/x.png">', "python": sys.executable}
    result = run(inputs, workspace)
    assert result.outputs["exit-code"] == str(int(ExitCode.USAGE))
    assert not re.search(r"(?<!\\)<", result.summary)
    assert "\\<img src\\=" in result.summary


def annotations(result: ActionRun) -> list[str]:
    return [command.data for command in result.commands if command.name == "error"]


def test_an_exit_1_annotation_names_what_failed_not_the_contract(workspace: Path) -> None:
    """The annotation of a red audit-files step names the rules that failed at or above the
    gate and the accounts they failed on, as the summary's first line does; it does not quote
    the exit-code contract's list of everything exit 1 may mean."""
    result = run(with_vars(action_steps()["files"]["with"]), workspace)
    failed = [
        f"{f['rule']} on {f['account']}"
        for f in json.loads(Path(result.outputs["json"]).read_text())["findings"]
        if f["state"] == "FAIL" and f["severity"] in ("high", "critical")
    ]
    [annotation] = annotations(result)
    expected = f"{len(failed)} rules failed at or above high: {', '.join(failed)}"
    assert annotation == f"safetynet audit-files exited 1: {expected}"
    assert "a row could not be swept" not in result.log + result.summary
    assert result.summary.startswith(
        f"**safetynet audit-files: exit 1**, {escaping.markdown(expected)}\n"
    )


def test_exit_3_from_files_says_what_was_not_judged_not_authentication(workspace: Path) -> None:
    """Files without their blob service documents: exit 3 whose annotation names the verdicts
    the files did not let it judge and why, and says no credential was used; never
    "authentication failed"."""
    for path in (workspace / "arm").glob("*-blob-service.json"):
        path.unlink()
    inputs = {**with_vars(action_steps()["files"]["with"]), "fail-on": "none"}
    result = run(inputs, workspace)
    [annotation] = annotations(result)
    assert annotation.startswith("safetynet audit-files exited 3: ")
    assert "could not be judged from the files: SN-BLOB-SOFT-DELETE on acctbad" in annotation
    assert "blob service properties not in the files (add `az storage account" in annotation
    assert "no credential is used for saved files" in annotation
    assert "authentication" not in annotation + result.summary


def test_sarif_of_saved_files_points_at_the_committed_file_and_line(workspace: Path) -> None:
    """The SARIF upload-sarif receives locates each result in the committed file that holds
    the account, relative to the checkout, at the line of its resource; code scanning can link
    it. Nothing in it names the runner's folders."""
    result = run(with_vars(action_steps()["files"]["with"]), workspace)
    (_, given), *_ = [u for u in result.uses if "upload-sarif" in u[0]]
    text = Path(given["sarif_file"]).read_text()
    results = json.loads(text)["runs"][0]["results"]
    locations = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in results
    }
    assert locations == {("arm/acctbad-account.json", 1)}
    assert str(workspace) not in text


def test_summary_and_junit_name_paths_relative_to_the_workspace(workspace: Path) -> None:
    """Neither the job summary nor the JUnit report carries the runner's absolute paths: the
    files are named as they are in the repository."""
    inputs = {**with_vars(action_steps()["files"]["with"]), "formats": "sarif,junit"}
    result = run(inputs, workspace)
    junit = Path(result.outputs["junit"]).read_text()
    assert str(workspace) not in result.summary
    assert str(workspace) not in junit
    assert escaping.markdown("arm/acctbad-account.json") in result.summary
    assert "arm/acctbad-account.json" in junit


def test_the_summary_leads_with_the_finding_and_keeps_code_spans(workspace: Path) -> None:
    """A summary row says what was found, then the rule's ideal and fix, whose code spans
    render as code: no escaped backtick in what the rules say."""
    result = run(with_vars(action_steps()["files"]["with"]), workspace)
    [row] = [
        line
        for line in result.summary.splitlines()
        if "| acctbad | `SN-NO-PUBLIC-ACCESS` |" in line
    ]
    finding = row.split(" | ")[4]
    assert finding.startswith("Anonymous public blob access is allowed on the account")
    assert "Expected: Anonymous blob access is disallowed on the account." in finding
    assert "account `allowBlobPublicAccess: false`" in finding
    assert "\\`" not in finding
