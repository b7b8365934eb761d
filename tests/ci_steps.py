"""Run a composite action's or an Azure Pipelines template's script steps as the runner does.

GitHub (https://docs.github.com/en/actions/reference/workflows-and-actions/metadata-syntax and
.../workflow-commands): each `run:` step is a bash script, with the step's `env:` after its
`${{ }}` expressions are evaluated, GITHUB_OUTPUT / GITHUB_ENV / GITHUB_STEP_SUMMARY files the
runner reads back (`name=value` or `name<<DELIMITER` lines), and `if:` implying `success()`
unless it names a status function. Steps with `uses:` are recorded with their evaluated `with:`,
not run (they are other repositories' actions). Azure Pipelines
(https://learn.microsoft.com/en-us/azure/devops/pipelines/process/templates and
.../scripts/logging-commands): `${{ parameters.x }}` is substituted when the template is
expanded, `$(Name)` macros before a step runs, and `##vso[task.setvariable]` lines set variables
that later steps see as environment variables.

Both read commands as their agents do (`github_command`, `azure_command`, ported from
actions/runner's src/Runner.Common/ActionCommand.cs and azure-pipelines-agent's
src/Microsoft.VisualStudio.Services.Agent/Command.cs): from every line of stdout and of stderr,
a line ending at CR, LF or CRLF as .NET's ReadLine ends it; GitHub's `::name props::data` after
leading white space and its older `##[name props]data` anywhere in a line, with
`stop-commands`; Azure's `##vso[area.event props]data` anywhere in a line, with a variable set
`isreadonly` never set again. Every command read is recorded, so a test can hold a step to the
commands it means to give.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests import tree

ROOT = Path(__file__).resolve().parents[1]
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_TOKEN = re.compile(r"\s*(?:('(?:[^']|'')*')|(&&|\|\||==|!=|!|\(|\))|([A-Za-z_][\w.\-]*(?:\(\))?))")


_DOTNET_LINE_BREAK = re.compile(r"\r\n|\r|\n")
GITHUB_COMMANDS = frozenset(
    {
        "set-env",
        "set-output",
        "save-state",
        "add-mask",
        "add-path",
        "add-matcher",
        "remove-matcher",
        "warning",
        "error",
        "notice",
        "debug",
        "group",
        "endgroup",
        "echo",
        "stop-commands",
    }
)
"""The runner's registered command extensions (src/Runner.Worker/ActionCommandManager.cs and
its neighbours) and stop-commands."""


@dataclass
class Command:
    """One command an agent read from a step's output."""

    name: str
    properties: dict[str, str]
    data: str
    line: str


def agent_lines(data: bytes) -> list[str]:
    """A step's stream as an agent reads it: UTF-8, one line per .NET ReadLine."""
    lines = _DOTNET_LINE_BREAK.split(data.decode("utf-8", "replace"))
    return lines[:-1] if lines and lines[-1] == "" else lines


def _unescape(text: str, mappings: tuple[tuple[str, str], ...]) -> str:
    for escaped, raw in mappings:
        text = text.replace(escaped, raw)
    return text


_GITHUB_DATA = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
_GITHUB_PROPERTY = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
_GITHUB_LEGACY = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))
_AZURE = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%AZP25", "%"))


def _properties(text: str, separator: str, mappings: tuple[tuple[str, str], ...]) -> dict[str, str]:
    found = {}
    for item in (p for p in text.split(separator) if p):
        pair = [part for part in item.split("=", 1) if part]
        if len(pair) == 2:
            found[pair[0].lower()] = _unescape(pair[1], mappings)
    return found


def github_command(line: str, registered: frozenset[str] = GITHUB_COMMANDS) -> Command | None:
    """The workflow command the runner reads in `line` (TryParseV2, then TryParse), if any."""
    trimmed = line.lstrip()
    if trimmed.startswith("::"):
        end = trimmed.find("::", 2)
        if end >= 0:
            name, _, rest = trimmed[2:end].partition(" ")
            if name.lower() in registered:
                properties = _properties(rest.strip(), ",", _GITHUB_PROPERTY)
                data = _unescape(trimmed[end + 2 :], _GITHUB_DATA)
                return Command(name.lower(), properties, data, line)
    prefix = line.find("##[")
    end = line.find("]", prefix) if prefix >= 0 else -1
    if end < 0:
        return None
    name, _, rest = line[prefix + 3 : end].partition(" ")
    if name.lower() not in registered:
        return None
    properties = _properties(rest, ";", _GITHUB_LEGACY)
    return Command(name.lower(), properties, _unescape(line[end + 1 :], _GITHUB_LEGACY), line)


def azure_command(line: str) -> Command | None:
    """The logging command the Azure Pipelines agent reads in `line` (`##vso[` anywhere)."""
    prefix = line.find("##vso[")
    end = line.find("]", prefix) if prefix >= 0 else -1
    if end < 0:
        return None
    name, _, rest = line[prefix + 6 : end].partition(" ")
    if len([part for part in name.split(".") if part]) != 2:
        return None
    properties = _properties(rest, ";", _AZURE)
    return Command(name.lower(), properties, _unescape(line[end + 1 :], _AZURE), line)


def base_environment() -> dict[str, str]:
    """What any runner's shell has: PATH and HOME, nothing of this test process's settings;
    and the tree under test, which the steps' `python -m blob_safetynet.cli.ci` imports."""
    return tree.environment(
        {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    )


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT / GITHUB_ENV file as the runner reads it."""
    values: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            values[name] = "\n".join(lines[index + 1 : end])
            index = end + 1
            continue
        name, _, value = line.partition("=")
        values[name] = value
        index += 1
    return values


class Expression:
    """The subset of GitHub's expression language the action uses: literals, context paths,
    ==, !=, !, &&, || and the status functions. Anything else is an error, so the action
    cannot grow an expression this runner would evaluate wrongly."""

    def __init__(self, text: str, contexts: Mapping[str, Any], failed: bool) -> None:
        self.tokens = self._tokens(text)
        self.contexts = contexts
        self.failed = failed

    @staticmethod
    def _tokens(text: str) -> list[str]:
        tokens, position = [], 0
        while position < len(text.rstrip()):
            match = _TOKEN.match(text, position)
            assert match, f"unsupported expression: {text!r}"
            tokens.append(match.group(match.lastindex or 0))
            position = match.end()
        return tokens

    def value(self) -> object:
        result = self._or()
        assert not self.tokens, f"unparsed: {self.tokens}"
        return result

    def _or(self) -> object:
        left = self._and()
        while self.tokens[:1] == ["||"]:
            self.tokens.pop(0)
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> object:
        left = self._compare()
        while self.tokens[:1] == ["&&"]:
            self.tokens.pop(0)
            right = self._compare()
            left = right if truthy(left) else left
        return left

    def _compare(self) -> object:
        left = self._unary()
        if self.tokens[:1] in (["=="], ["!="]):
            operator = self.tokens.pop(0)
            right = self._unary()
            equal = as_text(left).lower() == as_text(right).lower()  # null is "", case ignored
            return equal if operator == "==" else not equal
        return left

    def _unary(self) -> object:
        token = self.tokens.pop(0)
        if token == "!":
            return not truthy(self._unary())
        if token == "(":
            inner = self._or()
            assert self.tokens.pop(0) == ")"
            return inner
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token == "always()":
            return True
        if token == "success()":
            return not self.failed
        if token == "failure()":
            return self.failed
        if token in ("true", "false"):
            return token == "true"
        context, *path = token.split(".")
        assert context in self.contexts, f"unknown context {context}"
        node: Any = self.contexts[context]
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None  # a skipped step: null
        return node


def truthy(value: object) -> bool:
    return value not in ("", False, None, 0)


def as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def interpolate(text: str, contexts: Mapping[str, Any], failed: bool = False) -> str:
    return _EXPRESSION.sub(
        lambda m: as_text(Expression(m.group(1), contexts, failed).value()), text
    )


def condition(text: str | None, contexts: Mapping[str, Any], failed: bool) -> bool:
    """An `if:`; without a status function it means `success() && (...)`."""
    if text is None:
        return not failed
    bare = _EXPRESSION.fullmatch(text.strip())
    expression = bare.group(1) if bare else text
    if not re.search(r"\b(always|success|failure|cancelled)\(\)", expression):
        expression = f"success() && ({expression})"
    return truthy(Expression(expression, contexts, failed).value())


@dataclass
class ActionRun:
    """What running the action left: per step its outcome, the uses steps' inputs, the files."""

    outcomes: dict[str, str] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    uses: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    log: str = ""
    failed: bool = False
    commands: list[Command] = field(default_factory=list)
    stopped: str | None = None
    """The token of a `stop-commands` still in force."""

    def read_commands(self, data: bytes) -> dict[str, str]:
        """The commands of one stream of a step, as the runner processes them; the outputs
        `set-output` set."""
        outputs: dict[str, str] = {}
        for line in agent_lines(data):
            registered = GITHUB_COMMANDS | ({self.stopped} if self.stopped else set())
            command = github_command(line, frozenset(registered))
            if command is None:
                continue
            if self.stopped:
                if command.name == self.stopped.lower():
                    self.stopped = None
                continue
            self.commands.append(command)
            if command.name == "stop-commands":
                self.stopped = command.data
            elif command.name == "set-output" and "name" in command.properties:
                outputs[command.properties["name"]] = command.data
        return outputs


def run_action(
    action: Path,
    inputs: Mapping[str, object],
    workspace: Path,
    temp: Path,
    env: Mapping[str, str] = (),  # type: ignore[assignment]
) -> ActionRun:
    """Run the composite action at `action` (its action.yml) with `inputs` as a runner would."""
    metadata = yaml.safe_load((action / "action.yml").read_text())
    declared = metadata["inputs"]
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the action does not declare: {unknown}"
    values = {name: as_text(spec.get("default", "")) for name, spec in declared.items()}
    values |= {name: as_text(value) for name, value in inputs.items()}
    files = {
        name: temp / f"{name}.txt"
        for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_STEP_SUMMARY")
    }
    steps: dict[str, dict[str, dict[str, str]]] = {}
    contexts: dict[str, Any] = {
        "inputs": values,
        "steps": steps,
        "github": {"action_path": str(action), "workspace": str(workspace)},
        "runner": {"temp": str(temp), "os": "Linux"},
    }
    result = ActionRun()
    for number, step in enumerate(metadata["runs"]["steps"]):
        name = step.get("id", f"step{number}")
        if not condition(step.get("if"), contexts, result.failed):
            result.outcomes[name] = "skipped"
            continue
        if "uses" in step:
            given = {k: interpolate(as_text(v), contexts) for k, v in step.get("with", {}).items()}
            result.uses.append((step["uses"], given))
            result.outcomes[name] = "success"
            continue
        assert step["shell"] == "bash"
        files["GITHUB_OUTPUT"].write_text("")
        step_env = {k: interpolate(as_text(v), contexts) for k, v in step.get("env", {}).items()}
        raw = subprocess.run(
            [
                "bash",
                "--noprofile",
                "--norc",
                "-eo",
                "pipefail",
                "-c",
                interpolate(step["run"], contexts),
            ],
            cwd=workspace,
            env={
                **base_environment(),
                **dict(env),
                **{k: str(v) for k, v in files.items()},
                "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_ACTION_PATH": str(action),
                "RUNNER_TEMP": str(temp),
                "RUNNER_OS": "Linux",
                "CI": "true",
                **step_env,
            },
            capture_output=True,
            check=False,
        )
        result.log += (raw.stdout + raw.stderr).decode("utf-8", "replace")
        result.codes[name] = raw.returncode
        result.outcomes[name] = "success" if raw.returncode == 0 else "failure"
        result.failed = result.failed or raw.returncode != 0
        set_by_commands = result.read_commands(raw.stdout) | result.read_commands(raw.stderr)
        steps[name] = {"outputs": set_by_commands | read_outputs(files["GITHUB_OUTPUT"])}
    result.outputs = {
        name: interpolate(spec["value"], contexts) for name, spec in metadata["outputs"].items()
    }
    result.summary = (
        files["GITHUB_STEP_SUMMARY"].read_text() if files["GITHUB_STEP_SUMMARY"].exists() else ""
    )
    return result


_MACRO = re.compile(r"\$\(([A-Za-z_][\w.]*)\)")


@dataclass
class TemplateRun:
    """What running the template's script steps left."""

    codes: list[int] = field(default_factory=list)
    tasks: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    failed: bool = False
    commands: list[Command] = field(default_factory=list)
    read_only: set[str] = field(default_factory=set)

    def read_commands(self, data: bytes) -> None:
        """The logging commands of one stream of a step, as the agent processes them."""
        for line in agent_lines(data):
            command = azure_command(line)
            if command is None:
                continue
            self.commands.append(command)
            name = command.properties.get("variable")
            if command.name != "task.setvariable" or not name:
                continue
            output = command.properties.get("isoutput", "").lower() == "true"
            key = ("output:" if output else "") + name.upper()
            if key in self.read_only:
                continue
            if command.properties.get("isreadonly", "").lower() == "true":
                self.read_only.add(key)
            (self.outputs if output else self.variables)[name] = command.data


def expand_template(path: Path, parameters: Mapping[str, object]) -> list[dict[str, Any]]:
    """The template's steps with `${{ parameters.x }}` substituted (defaults, then `parameters`)."""
    template = yaml.safe_load(path.read_text())
    declared = {p["name"]: p for p in template["parameters"]}
    unknown = set(parameters) - set(declared)
    assert not unknown, f"parameters the template does not declare: {unknown}"
    values = {name: as_text(p.get("default", "")) for name, p in declared.items()}
    values |= {name: as_text(value) for name, value in parameters.items()}

    def substitute(node: Any) -> Any:
        if isinstance(node, str):
            return _EXPRESSION.sub(lambda m: _parameter(m.group(1), values), node)
        if isinstance(node, list):
            return [substitute(item) for item in node]
        if isinstance(node, dict):
            return {substitute(k): substitute(v) for k, v in node.items()}
        return node

    steps: list[dict[str, Any]] = substitute(_insert(template["steps"], values))
    return steps


_IF = re.compile(r"\$\{\{\s*if (eq|ne)\(parameters\.([\w-]+), '([^']*)'\)\s*\}\}")


def _insert(items: list[Any], values: Mapping[str, str]) -> list[Any]:
    """Conditional insertion: `- ${{ if eq(parameters.x, 'v') }}:` and `- ${{ else }}:`."""
    expanded: list[Any] = []
    previous: bool | None = None
    for item in items:
        key = next(iter(item)) if isinstance(item, dict) and len(item) == 1 else ""
        match = _IF.fullmatch(key)
        if match:
            operator, name, literal = match.groups()
            previous = (values[name].lower() == literal.lower()) == (operator == "eq")
            expanded += _insert(item[key], values) if previous else []
        elif key.replace(" ", "") == "${{else}}":
            assert previous is not None, "an else without an if"
            expanded += [] if previous else _insert(item[key], values)
            previous = None
        else:
            assert not key.startswith("${{"), f"unsupported template expression: {key}"
            expanded.append(item)
            previous = None
    return expanded


def _parameter(expression: str, values: Mapping[str, str]) -> str:
    match = re.fullmatch(r"parameters\.([\w-]+)", expression)
    assert match, f"unsupported template expression: {expression}"
    return values[match.group(1)]


def azure_condition(text: str | None, failed: bool, variables: Mapping[str, str]) -> bool:
    """The runtime conditions the template uses: succeeded(), succeededOrFailed(), always(),
    and(), eq() and ne() of literal strings and variables['NAME']."""
    if text is None:
        return not failed
    text = re.sub(
        r"variables\['([\w.]+)'\]",
        lambda m: "'" + variables.get(m.group(1), "").replace("'", "") + "'",
        text,
    )
    python = (
        text.replace("succeededOrFailed()", "True")
        .replace("always()", "True")
        .replace("succeeded()", str(not failed))
    )
    python = re.sub(r"\band\(", "_and(", python)
    python = re.sub(r"\beq\(", "_eq(", python)
    python = re.sub(r"\bne\(", "_ne(", python)
    assert re.fullmatch(r"[\w(),' ./:\-]*", python), f"unsupported condition: {text}"
    scope = {
        "_and": lambda *a: all(a),
        "_eq": lambda a, b: str(a).lower() == str(b).lower(),
        "_ne": lambda a, b: str(a).lower() != str(b).lower(),
        "True": True,
        "False": False,
    }
    return bool(eval(python, {"__builtins__": {}}, scope))  # noqa: S307 (checked characters)


def run_template(
    path: Path,
    parameters: Mapping[str, object],
    workspace: Path,
    temp: Path,
    env: Mapping[str, str] = (),  # type: ignore[assignment]
) -> TemplateRun:
    """Run the expanded template's `bash:` steps in order, tasks recorded with their inputs."""
    macros = {
        "System.DefaultWorkingDirectory": str(workspace),
        "Build.SourcesDirectory": str(workspace),
        "Agent.TempDirectory": str(temp),
        "Agent.OS": "Linux",
        "Pipeline.Workspace": str(temp / "pipeline"),
    }
    result = TemplateRun()

    def expand(text: str) -> str:
        return _MACRO.sub(
            lambda m: macros.get(m.group(1), result.variables.get(m.group(1), m.group(0))), text
        )

    for step in expand_template(path, parameters):
        if not azure_condition(step.get("condition"), result.failed, result.variables):
            continue
        if "task" in step:
            inputs = {k: expand(as_text(v)) for k, v in step.get("inputs", {}).items()}
            result.tasks.append((step["task"], inputs))
            continue
        assert "bash" in step, f"a step this runner does not know: {step}"
        step_env = {k: expand(as_text(v)) for k, v in step.get("env", {}).items()}
        variables_env = {k.replace(".", "_").upper(): v for k, v in result.variables.items()}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-c", expand(step["bash"])],
            cwd=workspace,
            env={
                **base_environment(),
                **dict(env),
                "SYSTEM_DEFAULTWORKINGDIRECTORY": str(workspace),
                "BUILD_SOURCESDIRECTORY": str(workspace),
                "AGENT_TEMPDIRECTORY": str(temp),
                "TF_BUILD": "True",
                **variables_env,
                **step_env,
            },
            capture_output=True,
            check=False,
        )
        result.stdout += done.stdout.decode("utf-8", "replace")
        result.stderr += done.stderr.decode("utf-8", "replace")
        result.read_commands(done.stdout)
        result.read_commands(done.stderr)
        result.codes.append(done.returncode)
        result.failed = result.failed or done.returncode != 0
    return result
