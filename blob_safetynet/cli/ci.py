"""`python -m blob_safetynet.cli.ci github|azure`: the one step the GitHub Action (`action.yml`)
and the Azure Pipelines template (`templates/safetynet.yml`) run.

It reads the step's inputs from `INPUT_*` variables (the action and the template map their
inputs there; nothing is interpolated into a script), runs `safetynet audit`, `audit
--from-file`, `verify` or `pulumi preview` with the CrossGuard pack, writes every report to the
reports folder, puts the Markdown report in the run's summary, and sets the outputs: the counts,
the report paths and the exit code of the contract (docs/cli.md). It exits 0 once the outputs
are written, whatever the verdict, so the publishing steps after it run; the action's and the
template's last step fails the job by that exit code. Pages: docs/ci-github.md and
docs/ci-azure-pipelines.md.

What a pull request controls (template names, Pulumi's output, file names) reaches the agent
only through `agent_output.neutralise`: every line the step and its children print, so no such
text can set a variable or an output. The path inputs are confined to the workspace, and every
file is written by `settings.atomicfile` without following a link.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from blob_safetynet.cli.agent_output import AgentOutput, neutralise
from blob_safetynet.cli.ci_verdict import audit_seen, meaning, preview_seen, verify_seen
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.reports import escaping
from blob_safetynet.settings import atomicfile
from blob_safetynet.settings.redaction import printable

COMMANDS: Final = ("preview", "audit", "audit-files", "verify")
AUDIT_FORMATS: Final = ("sarif", "junit", "markdown", "json", "csv", "html", "table")
VERIFY_FORMATS: Final = ("sarif", "junit", "json", "table")
DEFAULT_FORMATS: Final = "sarif,junit"
DEFAULT_REPORTS: Final = "safetynet-reports"
REQUIRED_FORMATS: Final = {"audit": ("json", "markdown"), "verify": ("json", "table")}
"""What the step itself reads: the counts (json) and the summary (markdown; verify has none,
so its table in a code block)."""
EXTENSIONS: Final = {
    "sarif": "sarif",
    "junit": "xml",
    "markdown": "md",
    "json": "json",
    "csv": "csv",
    "html": "html",
    "table": "txt",
}
COUNTS: Final = ("accounts", "pass", "fail", "unknown", "suppressed", "baselined", "errors")
PREVIEW_VIOLATION: Final = re.compile(r"^\s*\[mandatory\]\s", re.MULTILINE)
"""How `pulumi preview` lists a mandatory policy violation: `[mandatory]  <pack> <version>
<policy> (<resource>)` under "Policy Violations"
(https://www.pulumi.com/docs/iac/crossguard/get-started/#running-locally)."""


class InputError(Exception):
    """An input the step cannot use: the run is bad usage (exit 2), said in the summary."""


@dataclass
class Step:
    """What one step was asked to do, read from the `INPUT_*` variables."""

    command: str
    args: list[str]
    reports: Path
    formats: list[str]
    category: str
    workdir: Path
    preview: list[str] = field(default_factory=list)


def _input(env: Mapping[str, str], name: str) -> str:
    return env.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip()


def _words(value: str) -> list[str]:
    """Whitespace- or newline-separated values (YAML block scalars give newlines)."""
    return value.split()


def workspace(env: Mapping[str, str]) -> Path:
    """The checkout the step runs in: GitHub's workspace, Azure Pipelines' sources folder, else
    the working directory."""
    named = (
        env.get("GITHUB_WORKSPACE")
        or env.get("BUILD_SOURCESDIRECTORY")
        or env.get("SYSTEM_DEFAULTWORKINGDIRECTORY")
        or os.curdir
    )
    return Path(os.path.abspath(named))


def relative(root: Path, path: Path) -> str:
    """A path inside the workspace as the reports name it: relative to it, so no summary, JUnit
    property or SARIF location carries the runner's own folders."""
    return os.path.relpath(path, root)


def confined(root: Path, value: str, name: str) -> Path:
    """`value` (relative to the workspace `root`) as a path inside it; InputError when it is
    outside, or when a symbolic link on the way (a pull request can commit one) leads outside."""
    path = Path(os.path.abspath(root / value))
    if path != root and root not in path.parents:
        raise InputError(f"input {name}: '{printable(value)}' is outside the workspace")
    real_root, real = root.resolve(), path.resolve()
    if real != real_root and real_root not in real.parents:
        raise InputError(
            f"input {name}: '{printable(value)}' leads outside the workspace through a "
            "symbolic link"
        )
    return path


def read_step(env: Mapping[str, str]) -> Step:
    """The step from its inputs; InputError names the first one that cannot be used."""
    command = _input(env, "command")
    if command not in COMMANDS:
        raise InputError(
            f"input command '{printable(command)}' is not one of {', '.join(COMMANDS)}"
        )
    workdir = workspace(env)
    reports = confined(workdir, _input(env, "reports-dir") or DEFAULT_REPORTS, "reports-dir")
    category = _input(env, "category") or f"safetynet-{command}"
    if command == "preview":
        return Step(command, [], reports, [], category, workdir, _preview_args(env))
    step = Step(command, [], reports, _formats(env, command), category, workdir)
    step.args = [*_scope_args(env, command, workdir), *_report_args(env, command, workdir)]
    try:
        step.args += shlex.split(_input(env, "args"))
    except ValueError as error:
        raise InputError(f"input args: {error}") from None
    return step


def _formats(env: Mapping[str, str], command: str) -> list[str]:
    allowed = VERIFY_FORMATS if command == "verify" else AUDIT_FORMATS
    asked = (_input(env, "formats") or DEFAULT_FORMATS).replace(",", " ").split()
    unknown = [f for f in asked if f not in allowed]
    if unknown:
        raise InputError(
            f"input formats: {printable(', '.join(unknown))} not available for {command} "
            f"(one of {', '.join(allowed)})"
        )
    required = REQUIRED_FORMATS["verify" if command == "verify" else "audit"]
    return list(dict.fromkeys([*asked, *required]))


def _scope_args(env: Mapping[str, str], command: str, workdir: Path) -> list[str]:
    """The scope options; management-group is passed through as given (the CLI decides)."""
    options = {
        "subscription": "--subscription",
        "management-group": "--management-group",
        "resource-group": "--resource-group",
        "account": "--account",
    }
    if command == "verify":
        options |= {"account-url": "--account-url", "container": "--container"}
    args = [
        word
        for name, flag in options.items()
        if _input(env, name)
        for word in (flag, _input(env, name))
    ]
    if command == "audit-files":
        files = _files(_input(env, "files"), workdir)
        args = [*args, "--from-file", *files]
    elif _input(env, "files"):
        raise InputError("input files is read only by command audit-files")
    return args


def _files(patterns: str, workdir: Path) -> list[str]:
    """Each pattern (a path or a glob, relative to the workspace) expanded, sorted, once."""
    if not patterns:
        raise InputError("command audit-files needs input files (paths or globs of ARM JSON)")
    found: dict[str, None] = {}
    for pattern in _words(patterns):
        matches = sorted(
            relative(workdir, confined(workdir, match, "files"))
            for match in glob.glob(pattern, root_dir=workdir, recursive=True)
        )
        if not matches:
            raise InputError(f"input files: '{printable(pattern)}' matches no file")
        found |= dict.fromkeys(matches)
    return list(found)


def _report_args(env: Mapping[str, str], command: str, workdir: Path) -> list[str]:
    args = []
    if command != "verify":
        if _input(env, "fail-on"):
            args += ["--fail-on", _input(env, "fail-on")]
        for name in ("suppressions", "baseline"):
            if _input(env, name):
                path = confined(workdir, _input(env, name), name)
                args += [f"--{name}", relative(workdir, path)]
    elif _input(env, "suppressions") or _input(env, "baseline"):
        raise InputError("inputs suppressions and baseline are read only by the audit commands")
    return args


def _preview_args(env: Mapping[str, str]) -> list[str]:
    stack = _input(env, "stack")
    if not stack:
        raise InputError("command preview needs input stack")
    pack = _input(env, "policy-pack") or str(
        Path(env.get("SAFETYNET_ACTION_PATH", ".")) / "policies"
    )
    return ["pulumi", "preview", "--stack", stack, "--policy-pack", pack, "--non-interactive"]


def report_paths(step: Step) -> dict[str, Path]:
    return {f: step.reports / f"{step.command}.{EXTENSIONS[f]}" for f in step.formats}


def prepare(step: Step) -> None:
    """The reports folder made, and this command's reports of an earlier run removed, so no
    count or path of a stale file is read as this run's."""
    try:
        atomicfile.make_folders(step.reports, base=step.workdir)
        for path in report_paths(step).values():
            atomicfile.remove(path, base=step.workdir)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        shown = relative(step.workdir, step.reports)
        raise InputError(f"input reports-dir '{printable(shown)}': {reason}") from None


def run_safetynet(step: Step, cli: Callable[[Sequence[str]], int]) -> int:
    """The CLI's exit code for the step, every report written to its path."""
    outputs = [w for f, p in report_paths(step).items() for w in ("--output", f"{f}={p}")]
    subcommand = ["audit"] if step.command == "audit-files" else [step.command]
    category = ["--sarif-category", step.category] if "sarif" in step.formats else []
    return cli([*subcommand, *step.args, *outputs, *category])


def run_preview(step: Step) -> tuple[int, str]:
    """`pulumi preview` with the pack: 0 clean, 1 a mandatory policy violation, 3 anything else
    that failed (Pulumi's exit code does not tell a violation from a failed preview)."""
    try:
        done = subprocess.run(  # noqa: S603 (argv of our own, no shell)
            step.preview, cwd=step.workdir, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return ExitCode.INCOMPLETE, "the pulumi CLI is not on PATH (install it before this step)"
    text = done.stdout + done.stderr
    sys.stdout.write(text)
    sys.stdout.flush()
    if done.returncode == 0:
        return ExitCode.OK, text
    return (ExitCode.FINDINGS if PREVIEW_VIOLATION.search(text) else ExitCode.INCOMPLETE), text


def json_report(step: Step) -> dict[str, Any] | None:
    """The run's JSON report, or None when the CLI wrote none (bad usage)."""
    path = report_paths(step).get("json")
    if path is None or not path.is_file():
        return None
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def counts(step: Step) -> dict[str, int]:
    """The counts of the run's JSON report, or none when the CLI wrote none (bad usage)."""
    report = json_report(step)
    if report is None:
        return {}
    summary = report["summary"]
    if step.command == "verify":
        return {
            "pass": summary["PASS"],
            "fail": summary["FAIL"],
            "unknown": summary["NOT_VERIFIABLE"],
        }
    return {
        "accounts": summary["accounts"],
        "pass": summary["PASS"],
        "fail": summary["FAIL"],
        "unknown": summary["UNKNOWN"],
        "suppressed": summary["SUPPRESSED"],
        "baselined": summary["BASELINED"],
        "errors": summary["errors"],
    }


def seen(step: Step, code: int, preview_text: str = "") -> str:
    """What this step saw behind its exit code (`ci_verdict`), from its own JSON report."""
    if step.command == "preview":
        return preview_seen(code, preview_text)
    report = json_report(step)
    if report is None:
        return meaning(code)
    if step.command == "verify":
        return verify_seen(code, report)
    return audit_seen(code, report, files=step.command == "audit-files")


def fenced(text: str) -> str:
    """`text` as a Markdown code block whose fence no run of backticks in it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}\n"


def summary_text(step: Step, code: int, preview_text: str = "", problem: str = "") -> str:
    """The run summary: the verdict line (what this step saw), then the Markdown report (or the
    table for verify, the preview's output for preview)."""
    said = meaning(code) if problem else seen(step, code, preview_text)
    verdict = f"**safetynet {step.command}: exit {code}**, {escaping.markdown(said)}\n\n"
    if problem:
        return verdict + f"{escaping.markdown(problem)}\n"
    paths = report_paths(step)
    if "markdown" in paths and paths["markdown"].is_file():
        return verdict + paths["markdown"].read_text()
    if "table" in paths and paths["table"].is_file():
        return verdict + fenced(paths["table"].read_text())
    return verdict + (fenced(preview_text) if preview_text else "")


class Runner:
    """Where outputs, the summary and error lines go on one CI system."""

    def __init__(self, env: Mapping[str, str], out: Callable[[str], None]) -> None:
        self.env = env
        self.out = out

    def output(self, name: str, value: str) -> None:
        raise NotImplementedError

    def summary(self, text: str, reports: Path, name: str) -> None:
        raise NotImplementedError

    def error(self, text: str) -> None:
        raise NotImplementedError


class GitHub(Runner):
    """Workflow commands: outputs and the job summary are files the runner names
    (https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands)."""

    def output(self, name: str, value: str) -> None:
        delimiter = f"safetynet_{secrets.token_hex(8)}"
        text = f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
        atomicfile.append_text(self.env["GITHUB_OUTPUT"], text)

    def summary(self, text: str, reports: Path, name: str) -> None:
        atomicfile.append_text(self.env["GITHUB_STEP_SUMMARY"], text)

    def error(self, text: str) -> None:
        shown = neutralise(text)
        escaped = shown.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        self.out(f"::error title=safetynet::{escaped}")


def _vso(value: str) -> str:
    """A value in an Azure Pipelines logging command, escaped as the agent unescapes it
    (https://learn.microsoft.com/en-us/azure/devops/pipelines/scripts/logging-commands#formatting-commands)."""
    return (
        value.replace("%", "%AZP25")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
        .replace("]", "%5D")
        .replace(";", "%3B")
    )


class Azure(Runner):
    """Logging commands on standard output: `task.setvariable` (each output an output variable
    of the step, and SAFETYNET_<NAME> for the template's later steps), `task.uploadsummary` and
    `task.logissue` (https://learn.microsoft.com/en-us/azure/devops/pipelines/scripts/logging-commands)."""

    def output(self, name: str, value: str) -> None:
        variable = name.replace("-", "_")
        self.out(f"##vso[task.setvariable variable={variable};isOutput=true]{_vso(value)}")
        plain = f"SAFETYNET_{variable.upper()}"
        self.out(f"##vso[task.setvariable variable={plain}]{_vso(value)}")

    def summary(self, text: str, reports: Path, name: str) -> None:
        path = reports / f"{name}.summary.md"
        try:
            atomicfile.make_folders(reports, base=workspace(self.env))
            atomicfile.write_text(path, text, base=workspace(self.env))
        except OSError as error:
            self.error(f"cannot write the summary {printable(str(path))}: {error.strerror}")
            return
        self.out(f"##vso[task.uploadsummary]{_vso(str(path.resolve()))}")

    def error(self, text: str) -> None:
        self.out(f"##vso[task.logissue type=error]{_vso(neutralise(text))}")


RUNNERS: Final[dict[str, type[Runner]]] = {"github": GitHub, "azure": Azure}


def step_main(
    system: str,
    env: Mapping[str, str],
    cli: Callable[[Sequence[str]], int],
    out: Callable[[str], None],
) -> int:
    """Run the step and record it; 0 once the outputs are written, 2 when they cannot be."""
    runner = RUNNERS[system](env, out)
    try:
        step = read_step(env)
        prepare(step)
    except InputError as error:
        runner.error(str(error))
        reports = workspace(env) / DEFAULT_REPORTS
        bad = Step("step", [], reports, [], "", Path("."))
        runner.summary(summary_text(bad, ExitCode.USAGE, problem=str(error)), reports, "safetynet")
        runner.output("exit-code", str(int(ExitCode.USAGE)))
        return ExitCode.OK
    preview_text = ""
    if step.command == "preview":
        code, preview_text = run_preview(step)
    else:
        code = run_safetynet(step, cli)
    runner.summary(summary_text(step, code, preview_text), step.reports, step.command)
    found = counts(step)
    for name in COUNTS:
        runner.output(name, str(found[name]) if name in found else "")
    for fmt, path in report_paths(step).items():
        runner.output(fmt, str(path) if path.is_file() else "")
    runner.output("reports-dir", str(step.reports))
    runner.output("category", step.category)
    runner.output("exit-code", str(code))
    if code != ExitCode.OK:
        runner.error(f"safetynet {step.command} exited {code}: {seen(step, code, preview_text)}")
    return ExitCode.OK


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in RUNNERS:
        print(f"usage: python -m blob_safetynet.cli.ci {{{','.join(RUNNERS)}}}", file=sys.stderr)
        return ExitCode.USAGE
    from blob_safetynet.cli.main import main as cli

    # Paths are given to the CLI relative to the workspace, which the reports then name; a
    # workspace that cannot be entered is reported by the inputs it cannot hold.
    with contextlib.suppress(OSError):
        os.chdir(workspace(os.environ))
    with AgentOutput() as agent:
        return step_main(args[0], os.environ, cli, agent.command)


if __name__ == "__main__":
    sys.exit(main())
