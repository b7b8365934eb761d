"""The exit-code contract is defined once and shown the same in every `--help` and docs/cli.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blob_safetynet.cli.exitcodes import MEANINGS, REDACTION_PROMISE, ExitCode
from blob_safetynet.cli.main import main

CLI_DOC = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
COMMANDS = [
    [],
    ["demo"],
    ["db", "init"],
    ["sweep"],
    ["reconcile"],
    ["audit"],
    ["policy", "export"],
    ["build-function"],
]


def squeeze(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "safetynet")
def test_every_help_lists_the_contract_and_the_redaction_promise(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command's --help ends with every exit code's meaning and the redaction promise."""
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    help_text = squeeze(capsys.readouterr().out)
    assert exited.value.code == 0
    for code, meaning in MEANINGS.items():
        assert f"{code.value} {squeeze(meaning)}" in help_text
    assert squeeze(REDACTION_PROMISE) in help_text


def test_documented_table_matches_the_contract() -> None:
    """docs/cli.md's exit-code table has one row per code, with the contract's words."""
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", CLI_DOC, re.MULTILINE))
    assert {int(k): v for k, v in rows.items()} == {
        int(code): meaning.replace("'", '"') for code, meaning in MEANINGS.items()
    }
    assert set(MEANINGS) == set(ExitCode)
