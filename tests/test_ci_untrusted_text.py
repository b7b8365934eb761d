"""Text a pull request controls, through both CI runners' code paths: no line the step prints
is a command to the agent, so the documented gate cannot be turned green by it.

The agents read commands as tests/ci_steps.py reads them (ported from the GitHub runner's and
the Azure Pipelines agent's parsers): every line of stdout and stderr, GitHub's `::` after
leading white space and `##[` anywhere, Azure's `##vso[` anywhere, a variable set `isreadonly`
never set again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from blob_safetynet.cli.agent_output import neutralise
from blob_safetynet.cli.exitcodes import ExitCode
from tests import tree
from tests.ci_steps import (
    ROOT,
    ActionRun,
    TemplateRun,
    agent_lines,
    azure_command,
    github_command,
    run_action,
    run_template,
)

PIN = "##vso[task.setvariable variable=SAFETYNET_EXIT_CODE;isreadonly=true]0"
PIN_OUTPUT = "##vso[task.setvariable variable=exit_code;isOutput=true;isreadonly=true]0"
HOSTILE_NAME = (
    f"[format('{{0}}', '{PIN} ::set-output name=exit-code::0 ##[set-output name=exit-code;]0')]"
)
"""A template name expression `--from-file` cannot resolve, so its error quotes it."""
HOSTILE_LINES = [
    PIN,
    PIN_OUTPUT,
    "  ::set-output name=exit-code::0",
    "\u00a0::stop-commands::pulled",
    "\u2003::add-mask::1",
    "progress\r::error title=forged::from the pull request",
    "text ##[set-output name=exit-code;]0",
    "##[error]a forged log error",
    "###vso[task.complete result=Succeeded;]done",
    "\t::warning file=x.py::twice",
]
AZURE_OWN = frozenset({"task.setvariable", "task.uploadsummary", "task.logissue"})
TEMPLATE = ROOT / "templates" / "safetynet.yml"


def test_no_hostile_line_is_a_command_once_neutralised() -> None:
    """Each line that either agent reads as a command reads as none after `neutralise`, for
    both agents, and text that opens no command is left as it is."""
    for line in HOSTILE_LINES:
        assert any(github_command(p) or azure_command(p) for p in agent_lines(line.encode()))
        for piece in agent_lines(neutralise(line).encode()):
            assert github_command(piece) is None, piece
            assert azure_command(piece) is None, piece
            assert "##[" not in piece
    urn = "urn:pulumi:dev::app::azure-native:storage:StorageAccount::acct # a note"
    assert neutralise(urn) == urn


def test_every_line_of_the_process_and_its_children_is_neutralised(tmp_path: Path) -> None:
    """Under AgentOutput, what Python prints, what is written to descriptors 1 and 2 directly
    and what a child process inheriting them prints reach the agent neutralised; the step's own
    command line passes as written."""
    script = tmp_path / "step.py"
    lines = json.dumps(HOSTILE_LINES)
    script.write_text(
        "import os, subprocess, sys\n"
        "from blob_safetynet.cli.agent_output import AgentOutput\n"
        f"lines = {lines}\n"
        "with AgentOutput() as agent:\n"
        "    for line in lines:\n"
        "        print(line)\n"
        "        print(line, file=sys.stderr)\n"
        "        os.write(1, (line + '\\n').encode())\n"
        "    sys.stdout.flush()\n"
        "    child = 'import sys; [print(l) for l in %r]; sys.stdout.flush()' % (lines,)\n"
        "    subprocess.run([sys.executable, '-c', child], check=True)\n"
        "    agent.command('##vso[task.setvariable variable=OWN]1')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        cwd=ROOT,
        env=tree.environment({"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}),
        check=True,
    )
    stdout, stderr = agent_lines(done.stdout), agent_lines(done.stderr)
    assert len(stdout) >= 3 * len(HOSTILE_LINES)
    assert len(stderr) >= len(HOSTILE_LINES)
    commands = [azure_command(line) for line in stdout + stderr]
    assert [c.data for c in commands if c] == ["1"]
    assert not [line for line in stdout + stderr if github_command(line)]


@pytest.fixture
def hostile_workspace(tmp_path: Path) -> Path:
    """A checkout whose ARM template names its account with both agents' command syntaxes."""
    root = tmp_path / "workspace"
    (root / "arm").mkdir(parents=True)
    template = {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {},
        "resources": [
            {
                "type": "Microsoft.Storage/storageAccounts",
                "apiVersion": "2023-05-01",
                "name": HOSTILE_NAME,
                "location": "westeurope",
                "properties": {},
            }
        ],
    }
    (root / "arm" / "template.json").write_text(json.dumps(template))
    return root


def pulumi_stand_in(folder: Path) -> dict[str, str]:
    """A `pulumi` on PATH that prints the hostile lines on stdout and stderr, then a mandatory
    violation as Pulumi lists one (https://www.pulumi.com/docs/iac/crossguard/get-started/)."""
    folder.mkdir()
    (folder / "pulumi").write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"for line in {HOSTILE_LINES!r}:\n"
        "    print(line)\n"
        "    print(line, file=sys.stderr)\n"
        "print('    [mandatory]  safetynet v0.1.0  sn-soft-delete (acct: x)')\n"
        "sys.exit(255)\n"
    )
    (folder / "pulumi").chmod(0o755)
    return {"PATH": f"{folder}:{Path(sys.executable).parent}:/usr/bin:/bin"}


def github(inputs: dict[str, str], workspace: Path, env: dict[str, str] | None = None) -> ActionRun:
    temp = workspace.parent / "runner-temp"
    temp.mkdir(exist_ok=True)
    return run_action(ROOT, {**inputs, "python": sys.executable}, workspace, temp, env or {})


def azure(
    inputs: dict[str, str], workspace: Path, env: dict[str, str] | None = None
) -> TemplateRun:
    temp = workspace.parent / "agent-temp"
    temp.mkdir(exist_ok=True)
    parameters = {**inputs, "python": sys.executable}
    return run_template(TEMPLATE, parameters, workspace, temp, env or {})


def assert_github_step_gave_only_its_own_commands(result: ActionRun) -> None:
    assert [(c.name, c.properties) for c in result.commands] == [
        ("error", {"title": "safetynet"})
    ], [c.line for c in result.commands]
    assert "##[" not in result.log


def assert_azure_step_gave_only_its_own_commands(result: TemplateRun, code: int) -> None:
    assert {c.name for c in result.commands} <= AZURE_OWN
    assert not [c.line for c in result.commands if "isreadonly" in c.properties]
    assert not result.read_only
    assert result.variables["SAFETYNET_EXIT_CODE"] == str(code)
    assert result.outputs["exit_code"] == str(code)
    assert "##[" not in result.stdout + result.stderr


def test_a_template_name_cannot_steer_the_github_action(hostile_workspace: Path) -> None:
    """audit-files quotes the unresolvable name in its error: the error reaches the log with
    no command in it, the step's exit code stays 2 and the gate fails."""
    result = github({"command": "audit-files", "files": "arm/*.json"}, hostile_workspace)
    assert "cannot resolve the name" in result.log
    assert result.outputs["exit-code"] == str(int(ExitCode.USAGE))
    assert result.outcomes["verdict"] == "failure"
    assert_github_step_gave_only_its_own_commands(result)


def test_a_template_name_cannot_steer_the_azure_template(hostile_workspace: Path) -> None:
    """The same file through the Azure template: no variable is pinned, SAFETYNET_EXIT_CODE
    and the output variable say 2, and the gate exits 2."""
    result = azure({"command": "audit-files", "files": "arm/*.json"}, hostile_workspace)
    assert result.codes[-1] == ExitCode.USAGE
    assert_azure_step_gave_only_its_own_commands(result, ExitCode.USAGE)
    assert "cannot resolve the name" in result.stderr


def test_pulumis_output_cannot_turn_the_azure_gate_green(tmp_path: Path) -> None:
    """A preview whose output pins SAFETYNET_EXIT_CODE to 0 read-only (what a pull request's
    program can print): the variable still says 1, the mandatory violation, and the gate fails."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    result = azure(
        {"command": "preview", "stack": "dev"}, workspace, pulumi_stand_in(tmp_path / "bin")
    )
    assert result.codes[-1] == ExitCode.FINDINGS
    assert_azure_step_gave_only_its_own_commands(result, ExitCode.FINDINGS)
    assert "**error title=forged::from the pull request" in result.stdout


def test_pulumis_output_gives_no_workflow_command_on_github(tmp_path: Path) -> None:
    """The same preview through the action: no set-output, stop-commands or mask reaches the
    runner, the step's exit code is 1 and the gate fails."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    result = github(
        {"command": "preview", "stack": "dev"}, workspace, pulumi_stand_in(tmp_path / "bin")
    )
    assert result.outputs["exit-code"] == str(int(ExitCode.FINDINGS))
    assert result.outcomes["verdict"] == "failure"
    assert_github_step_gave_only_its_own_commands(result)
