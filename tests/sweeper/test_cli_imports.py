"""Issue 24: a command imports what it uses, not what the other commands need."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from blob_safetynet.cli import main as cli

HEAVY = ("azure.mgmt", "blob_safetynet.policies.audit", "pulumi", "jinja2")
"""The audit's ARM clients, the Pulumi SDK, the HTML report's templates."""
NEEDS_HEAVY = {"audit", "verify"}
"""They read ARM (audit always, verify with an ARM scope) and render HTML reports."""


def loaded_by(*arguments: str) -> list[str]:
    """The modules a fresh interpreter holds after building the parser for `arguments`."""
    program = (
        "import json, sys\n"
        "from blob_safetynet.cli.main import _named_command, build_parser\n"
        f"build_parser(_named_command({list(arguments)!r}))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    modules: list[str] = json.loads(out)
    return modules


@pytest.mark.parametrize("command", sorted(set(cli.COMMANDS) - NEEDS_HEAVY))
def test_a_command_loads_none_of_the_heavy_modules(command: str) -> None:
    """Building the parser for one command imports no ARM client, Pulumi or Jinja2."""
    heavy = [m for m in loaded_by(command, "--help") if m.startswith(HEAVY)]
    assert heavy == []


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
