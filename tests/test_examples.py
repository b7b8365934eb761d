"""The pipeline recipes in examples/ call the real CLI (every `safetynet` line parses) and this
repository's action and template with inputs they declare; every action is at its current major."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from blob_safetynet.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RECIPES = sorted(EXAMPLES.glob("*.yml"))
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
TEMPLATE = yaml.safe_load((ROOT / "templates" / "safetynet.yml").read_text())
CURRENT_MAJORS = {
    "actions/checkout": "v6",
    "actions/setup-python": "v6",
    "actions/setup-node": "v6",
    "actions/cache": "v5",
    "actions/upload-artifact": "v6",
    "actions/download-artifact": "v7",
    "azure/login": "v3",
    "pulumi/actions": "v7",
    "github/codeql-action/upload-sarif": "v4",
    "mikepenz/action-junit-report": "v6",
    "pypa/gh-action-pypi-publish": "release/v1",
    "blob-safetynet/blob-safetynet": "v0.1.0",
}
"""The major each action is at, on Node 24: actionlint (tests/test_action.py) reports an action
whose major still runs on the deprecated Node 20 (azure/login@v2, pulumi/actions@v6 and
download-artifact@v6 were); action-junit-report is at v6, codeql-action at v4."""


def strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def safetynet_commands(recipe: Path) -> list[list[str]]:
    """The argument lists of every `safetynet` command line in the recipe's scripts."""
    commands = []
    for script in strings(yaml.safe_load(recipe.read_text())):
        for line in script.replace("\\\n", " ").splitlines():
            if "safetynet " not in line:
                continue
            words = shlex.split(line.split(" || ")[0], comments=True)
            for index, word in enumerate(words):
                if Path(word).name == "safetynet":
                    commands.append(words[index + 1 :])
    return commands


def test_there_are_two_recipes() -> None:
    """A GitHub Actions workflow and an Azure Pipelines file."""
    assert [p.name for p in RECIPES] == ["azure-pipelines.yml", "github-actions.yml"]


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.name for p in RECIPES])
def test_every_safetynet_line_parses_with_the_real_cli(recipe: Path) -> None:
    """Each recipe builds the zip with options the CLI has, previews with the pack and deploys."""
    parser = build_parser()
    parsed = [parser.parse_args(args) for args in safetynet_commands(recipe)]
    assert "build-function" in {args.command for args in parsed}
    text = recipe.read_text()
    assert "--policy-pack policies" in text
    assert "pulumi up" in text


def test_github_audits_and_verifies_with_the_action_and_declared_inputs() -> None:
    """The workflow's audit and verify are one `uses:` of this repository's action each, with
    inputs action.yml declares."""
    steps = [
        s for s in steps_of(load("github-actions.yml")) if "blob-safetynet/" in str(s.get("uses"))
    ]
    assert [s["with"]["command"] for s in steps] == ["audit", "verify"]
    for step in steps:
        assert set(step["with"]) <= set(ACTION["inputs"])


def test_azure_audits_and_verifies_with_the_template_and_declared_parameters() -> None:
    """The pipeline's audit and verify are one template step each, with parameters the
    template declares and step names unique in the job."""
    steps = [s for s in steps_of(load("azure-pipelines.yml")) if "template" in s]
    declared = {p["name"] for p in TEMPLATE["parameters"]}
    assert [s["template"] for s in steps] == ["templates/safetynet.yml"] * 2
    assert [s["parameters"]["command"] for s in steps] == ["audit", "verify"]
    assert all(set(s["parameters"]) <= declared for s in steps)
    names = [s["parameters"].get("stepName", "safetynet") for s in steps]
    assert len(set(names)) == len(names)


def uses_everywhere() -> list[str]:
    """Every `uses:` of the recipes, the docs' workflow and the action itself."""
    doc = (ROOT / "docs" / "ci-github.md").read_text()
    workflows = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    texts = [p.read_text() for p in [*RECIPES, RELEASE, ROOT / "action.yml"]] + workflows
    return [m.group(1) for text in texts for m in re.finditer(r"uses:\s*(\S+@\S+)", text)]


def test_every_action_is_at_its_current_major() -> None:
    """No recipe, doc or the action itself uses an action behind its current major (e.g.
    action-junit-report@v4, two majors behind)."""
    found = uses_everywhere()
    stale = [use for use in found if CURRENT_MAJORS.get(use.split("@")[0]) != use.split("@")[1]]
    assert found
    assert stale == []


def test_no_script_exports_a_command_substitution() -> None:
    """`export X="$(cmd)"` returns export's status and hides a failing cmd (ShellCheck
    SC2155): no recipe or template script does it."""
    files = [*RECIPES, RELEASE, ROOT / "action.yml", ROOT / "templates" / "safetynet.yml"]
    scripts = "\n".join(s for path in files for s in strings(yaml.safe_load(path.read_text())))
    assert not re.search(r"export\s+[^\n]*=\"?\$\(", scripts)


def load(name: str) -> dict[str, object]:
    loaded = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def steps_of(recipe: dict[str, object]) -> list[dict[str, object]]:
    jobs = recipe.get("jobs")
    if isinstance(jobs, dict):
        return [step for job in jobs.values() for step in job["steps"]]
    steps = recipe["steps"]
    assert isinstance(steps, list)
    return steps


def scripts(step: dict[str, object]) -> str:
    return "\n".join(strings({key: step.get(key) for key in ("run", "script", "inputs")}))


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.name for p in RECIPES])
def test_the_policy_packs_venv_is_prepared_before_the_first_preview(recipe: Path) -> None:
    """`make policy-pack` runs in a step before any `pulumi preview --policy-pack`."""
    texts = [scripts(step) for step in steps_of(load(recipe.name))]
    prepared = next(i for i, text in enumerate(texts) if "make policy-pack" in text)
    previewed = next(i for i, text in enumerate(texts) if "pulumi preview" in text)
    assert prepared < previewed


def test_the_action_uploads_sarif_with_codeql_action_v4() -> None:
    """upload-sarif is taken from codeql-action v4 (v3 is deprecated), inside the action."""
    uses = [str(step.get("uses", "")) for step in ACTION["runs"]["steps"]]
    assert "github/codeql-action/upload-sarif@v4" in uses


def test_github_explains_the_oidc_subject_the_environment_implies() -> None:
    """A job with `environment:` gets the environment subject; the recipe names it."""
    recipe = load("github-actions.yml")
    jobs = recipe["jobs"]
    assert isinstance(jobs, dict)
    environment = jobs["deploy-and-verify"]["environment"]
    text = (EXAMPLES / "github-actions.yml").read_text()
    assert f"repo:<owner>/<repo>:environment:{environment}" in text


def test_azure_pipelines_schedules_always_as_the_string_the_schema_types() -> None:
    """The Azure Pipelines schema types a schedule's `always` as a string: "true", not true."""
    schedules = load("azure-pipelines.yml")["schedules"]
    assert isinstance(schedules, list)
    assert [schedule["always"] for schedule in schedules] == ["true"]


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.name for p in RECIPES])
def test_each_recipe_tells_the_stack_its_deployer_is_a_service_principal(recipe: Path) -> None:
    """Pipeline identities are service principals, which their Key Vault grant must name."""
    assert "deployerPrincipalType ServicePrincipal" in recipe.read_text()


RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def test_the_release_attaches_wheel_and_sdist_whatever_pypi_says() -> None:
    """On a version tag the wheel and sdist are built once by `make dist`, checked by `make
    adoption`, and attached to the GitHub release by a job that waits for nothing but the
    build: installing from the release never depends on a package index."""
    recipe = yaml.safe_load(RELEASE.read_text())
    assert recipe[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    jobs = recipe["jobs"]
    build_scripts = "\n".join(scripts(step) for step in jobs["build"]["steps"])
    assert "make dist" in build_scripts
    assert "make adoption" in build_scripts
    assert jobs["github-release"]["needs"] == "build"
    assert "gh release create" in "\n".join(scripts(s) for s in jobs["github-release"]["steps"])
    assert recipe["permissions"] == {"contents": "read"}


def test_pypi_is_optional_and_publishes_with_trusted_publishing() -> None:
    """PyPI comes after the GitHub release, only when the repository asks for it, with the
    OIDC token as its only credential (id-token: write, no password)."""
    publish = yaml.safe_load(RELEASE.read_text())["jobs"]["publish"]
    assert publish["needs"] == "github-release"
    assert publish["if"] == "vars.PYPI_PUBLISH == 'true'"
    assert publish["permissions"] == {"id-token": "write"}
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert "pypa/gh-action-pypi-publish@release/v1" in uses
    assert "password" not in RELEASE.read_text()


def test_the_release_attaches_the_sweeper_zip_built_from_the_tagged_checkout() -> None:
    """The zip a team passes as SweeperOptions.package_path is built by `make function-zip` in the
    build job, kept out of what goes to the package index, and attached to the GitHub release
    with its SHA-256 by the one job that may write the repository's contents."""
    recipe = yaml.safe_load(RELEASE.read_text())
    jobs = recipe["jobs"]
    build_scripts = "\n".join(scripts(step) for step in jobs["build"]["steps"])
    assert "make function-zip" in build_scripts
    assert "sha256sum sweeper-function.zip" in build_scripts
    uploads = {
        step["with"]["name"]: step["with"]["path"]
        for step in jobs["build"]["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact")
    }
    assert uploads == {"dist": "dist/", "function-zip": "build/sweeper-function.zip*"}
    downloads = [s for s in jobs["publish"]["steps"] if "download-artifact" in s.get("uses", "")]
    assert [step["with"]["name"] for step in downloads] == ["dist"]
    release = jobs["github-release"]
    assert release["permissions"] == {"contents": "write"}
    writers = [name for name, job in jobs.items() if "write" in job.get("permissions", {}).values()]
    assert sorted(writers) == ["github-release", "publish"]
