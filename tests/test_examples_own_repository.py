"""The recipes for a team's own repository (examples/own-repository/): GitHub Actions and Azure
Pipelines that use the installed package alone. Parsed and schema-checked like the other
recipes (every `safetynet` line by the real CLI, actions at their current major, SchemaStore's
workflow and pipeline schemas, actionlint), and their scripts run, in order, as the runner and
the agent run them, in a folder outside this checkout: the package of this tree on PATH in
place of the install step, the Pulumi and Azure CLIs stood in by scripts that record their
arguments (neither can be installed here), ARM served by the fake ARM server. Verify is parsed
only: it needs a live blob endpoint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from blob_safetynet.cli.main import build_parser
from blob_safetynet.policies.governance import export
from testkit.arm_fake import SUBSCRIPTION, TOKEN, FakeArm, compliant_account
from tests import tree
from tests.ci_steps import (
    TemplateRun,
    azure_condition,
    condition,
    interpolate,
    read_outputs,
)
from tests.infra.test_config_check import stack_file
from tests.policies.pulumi_cli import start_pack
from tests.test_examples import CURRENT_MAJORS, safetynet_commands, strings

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "own-repository"
GITHUB = FOLDER / "github-actions.yml"
AZURE = FOLDER / "azure-pipelines.yml"
RECIPES = [GITHUB, AZURE]
BIN = Path(sys.executable).parent
GROUP = "rg-docs"
OUTPUTS = {
    "resourceGroupName": GROUP,
    "accountName": "acctone",
    "blobEndpoint": "https://acctone.blob.core.windows.net/",
    "containerName": "documents",
}
MACRO = re.compile(r"\$\(([\w.]+)\)")
INSTALL = "Install blob-safetynet"
NOT_RUN = ("Verify the behaviour",)
"""Steps parsed but not run: verify needs a live blob endpoint."""


def load(path: Path) -> dict[Any, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.name for p in RECIPES])
def test_every_safetynet_line_parses_and_nothing_of_this_repository_is_used(
    recipe: Path,
) -> None:
    """Each `safetynet` line parses with the real CLI; the recipe checks the configuration,
    writes the pack, previews with it, deploys, audits, verifies and exports; and it uses no
    make target, template, action or pack folder of this repository."""
    parser = build_parser()
    parsed = [parser.parse_args(args) for args in safetynet_commands(recipe)]
    used = {(args.command, getattr(args, "action", None)) for args in parsed}
    assert {
        ("config", "check"),
        ("policy", "pack"),
        ("policy", "export"),
        ("audit", None),
        ("verify", None),
    } <= used
    text = recipe.read_text()
    for needed in ("pulumi preview --stack", "pulumi up --stack", "az policy assignment create"):
        assert needed in text
    foreign = ("make ", "templates/", "--policy-pack policies", "uses: blob-safetynet/")
    assert [word for word in foreign if word in text] == []


def test_every_action_of_the_github_recipe_is_at_its_current_major() -> None:
    """The `uses:` of the GitHub recipe are at the majors test_examples.py holds current."""
    found = re.findall(r"uses:\s*(\S+@\S+)", GITHUB.read_text())
    stale = [use for use in found if CURRENT_MAJORS.get(use.split("@")[0]) != use.split("@")[1]]
    assert found
    assert stale == []


def test_no_script_exports_a_command_substitution() -> None:
    """`export X="$(cmd)"` hides a failing cmd (ShellCheck SC2155): no recipe script does it."""
    scripts = "\n".join(s for path in RECIPES for s in strings(load(path)))
    assert not re.search(r"export\s+[^\n]*=\"?\$\(", scripts)


@pytest.mark.parametrize(
    ("recipe", "schema"),
    [(GITHUB, "vendor.github-workflows"), (AZURE, "vendor.azure-pipelines")],
    ids=["github", "azure"],
)
def test_the_recipes_validate_against_schemastores_schemas(recipe: Path, schema: str) -> None:
    """check-jsonschema's vendored GitHub workflow and Azure Pipelines schemas accept them."""
    done = check_schema(recipe, schema)
    assert done.returncode == 0, done.stdout + done.stderr


def check_schema(recipe: Path, schema: str) -> subprocess.CompletedProcess[str]:
    transform = ["--data-transform", "azure-pipelines"] if "azure" in schema else []
    return subprocess.run(
        [
            BIN / "check-jsonschema",
            "--regex-variant",
            "python",
            "--builtin-schema",
            schema,
            *transform,
            recipe,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=tree.environment(),
    )


def test_the_azure_schema_check_can_fail(tmp_path: Path) -> None:
    """The Azure Pipelines schema check above refuses a misspelt step key."""
    broken = tmp_path / "azure-pipelines.yml"
    broken.write_text(AZURE.read_text().replace("displayName: Audit", "displayNme: Audit"))
    assert check_schema(broken, "vendor.azure-pipelines").returncode == 1


def actionlint(tmp_path: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    """actionlint over `workflow` as a repository's only workflow."""
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    (repository / ".github" / "workflows").mkdir(parents=True)
    (repository / ".github" / "workflows" / "safetynet.yml").write_text(workflow)
    return subprocess.run(
        [BIN / "actionlint", "-no-color"],
        cwd=repository,
        capture_output=True,
        text=True,
        check=False,
        env=tree.environment(),
    )


def test_the_github_recipe_passes_actionlint(tmp_path: Path) -> None:
    """actionlint type-checks every expression, `if:` and `with:` of the GitHub recipe."""
    done = actionlint(tmp_path, GITHUB.read_text())
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_can_fail_on_the_recipe(tmp_path: Path) -> None:
    """The check above can fail: a step output that does not exist is reported."""
    broken = GITHUB.read_text().replace("steps.stack.outcome", "steps.stack.outcom")
    assert actionlint(tmp_path, broken).returncode == 1


@dataclass
class Team:
    """A team's repository outside this checkout, and what the stood-in CLIs were asked."""

    root: Path
    temp: Path
    bin: Path
    log: Path
    env: dict[str, str] = field(default_factory=dict)

    def calls(self, program: str) -> list[list[str]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line)[1:] for line in lines if json.loads(line)[0] == program]


def stand_in(folder: Path, name: str, log: Path, body: str) -> None:
    """A program on PATH that records its arguments (as JSON, one call a line), then `body`."""
    script = folder / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(log)!r}, 'a') as f: f.write(json.dumps([{name!r}, *sys.argv[1:]]) + '\\n')\n"
        f"{body}\n"
    )
    script.chmod(0o755)


@pytest.fixture
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    """A repository with a valid Pulumi.prod.yaml, in a temporary folder outside this checkout;
    `pulumi` and `az` stand-ins on PATH; ARM served by the fake with two compliant accounts."""
    base = tmp_path_factory.mktemp("team")
    assert ROOT not in base.parents
    root, temp, stubs = base / "repo", base / "runner-temp", base / "bin"
    for folder in (root, temp, stubs):
        folder.mkdir()
    stack_file(root, stack="prod")
    log = base / "calls.jsonl"
    outputs = json.dumps(OUTPUTS)
    stand_in(
        stubs,
        "pulumi",
        log,
        f"if sys.argv[1:3] == ['stack', 'output']: print({outputs}[sys.argv[3]])",
    )
    stand_in(stubs, "az", log, f"if sys.argv[1:3] == ['account', 'show']: print({SUBSCRIPTION!r})")
    with FakeArm() as server:
        for name in ("acctone", "accttwo"):
            server.add(compliant_account(name, GROUP))
        yield Team(
            root,
            temp,
            stubs,
            log,
            {
                "SAFETYNET_ARM_TOKEN": TOKEN,
                "SAFETYNET_ARM_ENDPOINT": server.endpoint,
                "REQUESTS_CA_BUNDLE": server.ca_file,
            },
        )


def shell_env(team: Team, extra: Mapping[str, str]) -> dict[str, str]:
    """What a runner's shell has, the package of this tree on PATH as the install step leaves
    it (the venv of this tree, importing the tree: tests/tree.py)."""
    path = os.pathsep.join([str(team.bin), str(BIN), "/usr/bin", "/bin"])
    base = {"PATH": path, "HOME": str(team.temp), "LANG": "C.UTF-8", **team.env, **extra}
    return tree.environment(base)


def run_script(
    team: Team, script: str, env: Mapping[str, str]
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=team.root,
        env=shell_env(team, env),
        capture_output=True,
        check=False,
        timeout=300,
    )


def run_github(team: Team, enforce: str) -> dict[str, int]:
    """The GitHub recipe's `run:` steps on a push, in order, with `if:`, env and step outputs
    as the runner gives them; the exit code of each step run, by name."""
    workflow = load(GITHUB)
    contexts: dict[str, Any] = {
        "vars": {
            "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
            "AZURE_CLIENT_ID": "c",
            "AZURE_TENANT_ID": "t",
        },
        "secrets": {"PULUMI_ACCESS_TOKEN": "pul-token"},
        "github": {"event_name": "push", "workspace": str(team.root)},
        "runner": {"temp": str(team.temp), "os": "Linux"},
        "steps": {},
    }
    job_env = {k: interpolate(str(v), contexts) for k, v in workflow["env"].items()}
    job_env["ENFORCE"] = enforce
    files = {
        name: team.temp / f"{name}.txt"
        for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")
    }
    codes: dict[str, int] = {}
    failed = False
    for step in workflow["jobs"]["safetynet"]["steps"]:
        name = step.get("name", step.get("uses", ""))
        if "uses" in step or name == INSTALL or name in NOT_RUN:
            continue
        if not condition(step.get("if"), contexts, failed):
            continue
        files["GITHUB_OUTPUT"].write_text("")
        env = {k: interpolate(str(v), contexts) for k, v in step.get("env", {}).items()}
        given = {**job_env, **{k: str(v) for k, v in files.items()}, "RUNNER_TEMP": str(team.temp)}
        done = run_script(team, step["run"], {**given, **env})
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        codes[name] = done.returncode
        failed = failed or done.returncode != 0
        outcome = "success" if done.returncode == 0 else "failure"
        contexts["steps"][step.get("id", name)] = {
            "outputs": read_outputs(files["GITHUB_OUTPUT"]),
            "outcome": outcome,
        }
    return codes


def test_the_github_recipe_runs_outside_a_clone(team: Team) -> None:
    """On a push: the configuration check passes, the pack written from the installed package is
    the one preview and up are given, the audit of the deployed group passes into the job
    summary with its SARIF, and every exported definition, the initiative and an assignment
    in DoNotEnforce mode are created with az."""
    codes = run_github(team, enforce="false")
    assert set(codes.values()) == {0}, codes
    pack = team.temp / "safetynet-pack"
    pulumi = team.calls("pulumi")
    assert ["preview", "--stack", "prod", "--policy-pack", str(pack)] in pulumi
    assert ["up", "--stack", "prod", "--yes", "--policy-pack", str(pack)] in pulumi
    assert "## safetynet audit: " in (team.temp / "GITHUB_STEP_SUMMARY.txt").read_text()
    assert (team.root / "safetynet-reports" / "audit.sarif").is_file()
    check_az(team, "DoNotEnforce")


def test_enforce_true_assigns_with_the_default_enforcement_mode(team: Team) -> None:
    """ENFORCE "true" assigns the initiative with enforcement mode Default."""
    run_github(team, enforce="true")
    [assignment] = [c for c in team.calls("az") if c[:3] == ["policy", "assignment", "create"]]
    assert assignment[assignment.index("--enforcement-mode") + 1] == "Default"


def check_az(team: Team, mode: str) -> None:
    """az was asked for each exported definition with its mode and rule, the initiative, and
    the assignment of that initiative at the subscription in `mode`."""
    calls = team.calls("az")
    definitions = [c for c in calls if c[:3] == ["policy", "definition", "create"]]
    documents = export.definitions()
    by_name = {c[c.index("--name") + 1]: c for c in definitions}
    assert sorted(by_name) == sorted(d["name"] for d in documents)
    for document in documents:
        call = by_name[document["name"]]
        assert call[call.index("--mode") + 1] == document["properties"]["mode"]
        assert json.loads(call[call.index("--rules") + 1]) == document["properties"]["policyRule"]
    [initiative] = [c for c in calls if c[:3] == ["policy", "set-definition", "create"]]
    assert initiative[initiative.index("--name") + 1] == export.INITIATIVE_NAME
    [assignment] = [c for c in calls if c[:3] == ["policy", "assignment", "create"]]
    scope = f"/subscriptions/{SUBSCRIPTION}"
    assert assignment[assignment.index("--scope") + 1] == scope
    assert assignment[assignment.index("--policy-set-definition") + 1] == (
        f"{scope}/providers/Microsoft.Authorization/policySetDefinitions/{export.INITIATIVE_NAME}"
    )
    assert assignment[assignment.index("--enforcement-mode") + 1] == mode


def test_the_pack_the_recipe_writes_starts_as_pulumi_starts_it(team: Team) -> None:
    """The folder `safetynet policy pack` wrote names the environment the package is installed
    in, and started there as the Pulumi CLI starts a Python pack it serves every rule's policy."""
    run_github(team, enforce="false")
    pack = team.temp / "safetynet-pack"
    project = yaml.safe_load((pack / "PulumiPolicy.yaml").read_text())
    virtualenv = Path(project["runtime"]["options"]["virtualenv"])
    assert virtualenv == Path(sys.prefix)
    with start_pack(pack, python=virtualenv / "bin" / "python", env=dict(os.environ)) as running:
        from google.protobuf import empty_pb2

        info = running.stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "blob-safetynet"
    assert len(info.policies) > 10


def azure_scripts(step: dict[str, Any]) -> str | None:
    """The bash a step runs: `bash:`/`script:`, or AzureCLI@2's inline script."""
    if "bash" in step or "script" in step:
        return str(step.get("bash", step.get("script")))
    if step.get("task") == "AzureCLI@2":
        return str(step["inputs"]["inlineScript"])
    return None


def run_azure(team: Team, enforce: str) -> tuple[TemplateRun, dict[str, int]]:
    """The Azure recipe's scripts on main, in order, with conditions, variables and the
    variables earlier steps set, as the agent runs them."""
    pipeline = load(AZURE)
    variables = {v["name"]: str(v["value"]) for v in pipeline["variables"] if "name" in v}
    variables |= {
        "ENFORCE": enforce,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "PULUMI_ACCESS_TOKEN": "pul-token",
        "Build.SourceBranch": "refs/heads/main",
        "Agent.TempDirectory": str(team.temp),
    }
    result = TemplateRun(variables=dict(variables))
    codes: dict[str, int] = {}
    for step in pipeline["steps"]:
        script, name = azure_scripts(step), step.get("displayName", "")
        if script is None or name.startswith(INSTALL) or name in NOT_RUN:
            continue
        if not azure_condition(step.get("condition"), result.failed, result.variables):
            continue
        macros = {
            key: MACRO.sub(lambda m: result.variables.get(m.group(1), ""), str(value))
            for key, value in step.get("env", {}).items()
        }
        env = {k.replace(".", "_").upper(): v for k, v in result.variables.items()}
        signed_in = {"servicePrincipalId": "sp", "tenantId": "t", "idToken": "oidc"}
        done = run_script(team, script, {**env, **signed_in, **macros})
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        result.read_commands(done.stdout)
        result.stdout += done.stdout.decode()
        codes[name] = done.returncode
        result.failed = result.failed or done.returncode != 0
    return result, codes


def test_the_azure_recipe_runs_outside_a_clone(team: Team) -> None:
    """On main: the same flow through the agent's variables (the stack's outputs set by one
    step, read by the next), the audit's summary uploaded, and the assignment created in
    DoNotEnforce mode."""
    result, codes = run_azure(team, enforce="false")
    assert set(codes.values()) == {0}, codes
    assert result.variables["RG"] == GROUP
    pack = team.temp / "safetynet-pack"
    assert ["up", "--stack", "prod", "--yes", "--policy-pack", str(pack)] in team.calls("pulumi")
    uploaded = re.search(r"##vso\[task\.uploadsummary\](.+)", result.stdout)
    assert uploaded
    assert Path(uploaded.group(1)).read_text().startswith("## safetynet audit: ")
    check_az(team, "DoNotEnforce")


def test_the_docs_link_both_recipes() -> None:
    """docs/ci-github.md and docs/ci-azure-pipelines.md each link their recipe."""
    github = (ROOT / "docs" / "ci-github.md").read_text()
    azure = (ROOT / "docs" / "ci-azure-pipelines.md").read_text()
    assert "(../examples/own-repository/github-actions.yml)" in github
    assert "(../examples/own-repository/azure-pipelines.yml)" in azure
