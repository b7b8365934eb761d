"""Issue 24: a command imports what it uses, not what the other commands need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from blob_safetynet.cli import main as cli
from tests import tree

HEAVY = ("azure.mgmt", "blob_safetynet.policies.sources.live", "pulumi", "jinja2")
"""The audit's ARM clients, the Pulumi SDK, the HTML report's templates."""
NEEDS_AUDIT = {"audit", "verify"}
"""Their parsers list the audit's rules and formats (blob_safetynet.policies.sources.live), but load
neither an ARM client nor Jinja2 until a run reads ARM or renders HTML."""
SAVED_ACCOUNT = (
    Path(__file__).resolve().parents[1] / "policies" / "data" / "az-storage-account-show.json"
)


def loaded_by(*arguments: str) -> list[str]:
    """The modules a fresh interpreter holds after building the parser for `arguments`."""
    program = (
        "import json, sys\n"
        "from blob_safetynet.cli.main import _named_command, build_parser\n"
        f"build_parser(_named_command({list(arguments)!r}))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=tree.TREE,
        env=tree.environment(),
    ).stdout
    modules: list[str] = json.loads(out)
    return modules


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_a_command_loads_none_of_the_heavy_modules(command: str) -> None:
    """Building the parser for one command imports no ARM client, Pulumi or Jinja2 (and, but for
    audit and verify, not the audit either)."""
    heavy = [m for m in loaded_by(command, "--help") if m.startswith(HEAVY)]
    if command in NEEDS_AUDIT:
        heavy = [m for m in heavy if not m.startswith("blob_safetynet.policies.sources.live")]
    assert heavy == []


@pytest.mark.parametrize(("output", "loads_jinja"), [("table", False), ("html", True)])
def test_an_offline_audit_reads_no_arm_client_and_jinja2_only_for_html(
    output: str, loads_jinja: bool
) -> None:
    """`audit --from-file` judges saved JSON without importing azure-mgmt; Jinja2 comes in only
    for the HTML report."""
    program = (
        "import json, sys\n"
        "from blob_safetynet.cli.main import main\n"
        "try:\n"
        f"    main(['audit', '--from-file', {str(SAVED_ACCOUNT)!r}, '--format', {output!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tree.TREE,
        env=tree.environment(),
    )
    modules = json.loads(done.stderr.strip().splitlines()[-1])
    assert "<" in done.stdout or "SN-" in done.stdout
    assert [m for m in modules if m.startswith("azure.mgmt")] == []
    assert any(m.startswith("jinja2") for m in modules) is loads_jinja


def test_the_command_list_alone_loads_no_command_module() -> None:
    """`safetynet --help` imports none of the command modules beyond the shared helpers."""
    loaded = loaded_by("--help")
    commands = [m for m in loaded if m.startswith("blob_safetynet.cli.commands.")]
    assert commands == ["blob_safetynet.cli.commands.common"]
    assert [m for m in loaded if m.startswith(HEAVY)] == []


def test_the_listed_help_lines_are_the_commands_own() -> None:
    """The help line shown for an unloaded command is the one its module registers."""
    full = cli.build_parser()
    choices = next(a for a in full._actions if a.dest == "command")
    own = {a.dest: a.help for a in choices._get_subactions()}
    assert own == {name: help_line for name, (_, help_line) in cli.COMMANDS.items()}


def test_the_function_entry_loads_the_work_only_when_a_timer_needs_it() -> None:
    """Importing sweeper/function_app.py (the host's indexing, the cold start) loads neither
    SQLAlchemy, the Blob SDK, the sweeper nor the verifier; `function_app.sweep_once` is
    then the package's own function."""
    program = (
        "import json, sys\n"
        "sys.path.insert(0, 'sweeper')\n"
        "import function_app\n"
        "indexed = sorted(sys.modules)\n"
        "from blob_safetynet.function.sweep import sweep_once\n"
        "print(json.dumps([indexed, function_app.sweep_once is sweep_once]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=tree.TREE,
        env=tree.environment(),
    ).stdout
    indexed, same = json.loads(out)
    work = ("sqlalchemy", "azure.storage", "blob_safetynet.sweeper", "blob_safetynet.policies")
    assert [m for m in indexed if m.startswith(work)] == []
    assert same is True


def test_redaction_does_not_load_urllib_request() -> None:
    """The redaction every command loads at start spells secrets as HTML and XML escape them
    without importing `xml.sax.saxutils`, which drags `urllib.request` in."""
    assert "urllib.request" not in loaded_by("--help")
