"""The options every command takes: --version, -q, -v, --log-format, and no colour at all."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet import package_version
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import build_parser
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.policies.rules import RULES, ruleset_version
from blob_safetynet.store.documents import DocumentStore
from tests import tree
from tests.conftest import RunCli
from tests.sweeper.conftest import stale_rows_in, target_options

SAFETYNET = tree.CONSOLE_SCRIPT
PROGRESS = "sweep progress (totals so far)"


def leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's parser, by the words that name it (`db upgrade`, `binding bind`, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*path, name))


def sweep_options(db_url: str, azurite: Azurite, container: ContainerClient) -> list[str]:
    return ["sweep", *target_options(db_url, azurite, container)]


def test_every_command_takes_the_shared_options() -> None:
    """-q/--quiet, -v/--verbose and --log-format are accepted by every command's parser."""
    found = list(leaves(build_parser()))
    assert len(found) >= len(RULES) // 2  # db and binding actions included
    for path, parser in found:
        options = set(parser._option_string_actions)
        assert {"-q", "--quiet", "-v", "--verbose", "--log-format"} <= options, path


def test_version_names_the_package_and_the_rule_set() -> None:
    """`safetynet --version` prints the installed version and the rule set's fingerprint, exit 0."""
    result = subprocess.run(
        [str(SAFETYNET), "--version"],
        capture_output=True,
        text=True,
        check=False,
        env=tree.environment(),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"safetynet {package_version()}"
    assert f"rule set {ruleset_version()} ({len(RULES)} rules" in result.stdout


def test_the_rule_set_version_changes_with_a_rule() -> None:
    """Dropping a rule changes the fingerprint: it names this rule set, not any."""
    assert ruleset_version(RULES[1:]) != ruleset_version(RULES)


@pytest.mark.parametrize("where", ["before", "after"])
def test_log_format_text_gives_plain_lines_where_json_was_the_default(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    where: str,
) -> None:
    """Off a terminal the records are JSON; `--log-format text` (before or after the command)
    makes them plain lines."""
    stale_rows_in(store, container, 2)
    options = sweep_options(db_url, azurite, container)
    words = (
        ["--log-format", "text", *options]
        if where == "before"
        else [*options, "--log-format", "text"]
    )
    code, _, err = run_cli(*words)
    assert code == ExitCode.OK, err
    assert PROGRESS in err
    assert not [line for line in err.splitlines() if line.startswith("{")]


def test_log_format_json_on_a_terminal(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a terminal `-v --log-format json` gives the progress records as JSON objects."""
    stale_rows_in(store, container, 2)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _, err = run_cli(*sweep_options(db_url, azurite, container), "-v", "--log-format", "json")
    assert code == ExitCode.OK, err
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [r for r in records if r["message"] == PROGRESS]


def test_verbose_shows_progress_records_on_a_terminal(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a terminal the progress records are off by default and on with -v."""
    stale_rows_in(store, container, 2)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _, quiet_err = run_cli(*sweep_options(db_url, azurite, container))
    assert code == ExitCode.OK
    stale_rows_in(store, container, 2, prefix="again")
    code, _, err = run_cli(*sweep_options(db_url, azurite, container), "-v")
    assert code == ExitCode.OK, err
    assert PROGRESS not in quiet_err
    assert PROGRESS in err


def test_quiet_leaves_stdout_and_drops_progress(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """-q: no progress records off a terminal, no progress line on one; the result unchanged."""
    stale_rows_in(store, container, 2)
    code, out, err = run_cli("-q", *sweep_options(db_url, azurite, container))
    assert code == ExitCode.OK, err
    assert out.startswith("examined 2 stale rows")
    assert err == ""
    stale_rows_in(store, container, 2, prefix="again")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run_cli(*sweep_options(db_url, azurite, container), "--quiet")
    assert code == ExitCode.OK, err
    assert out.startswith("examined 2 stale rows")
    assert "\r" not in err


def test_quiet_and_verbose_together_are_bad_usage(run_cli: RunCli) -> None:
    """-q with -v contradicts itself: exit 2 naming both, nothing run."""
    code, _, err = run_cli("-q", "db", "upgrade", "-v", "--db", "sqlite:///nowhere.db")
    assert code == ExitCode.USAGE
    assert "-q/--quiet and -v/--verbose" in err


def test_no_command_writes_colour_whatever_no_color_says() -> None:
    """No help text and no run holds an escape sequence, with NO_COLOR set or FORCE_COLOR
    asking for colour (https://no-color.org): there is no colour to turn off."""
    for _, parser in leaves(build_parser()):
        assert "\x1b" not in parser.format_help()
    for env in ({"NO_COLOR": "1"}, {"FORCE_COLOR": "1"}):
        result = subprocess.run(
            [str(SAFETYNET), "db", "upgrade", "--db", "sqlite:///nowhere.db"],
            capture_output=True,
            text=True,
            check=False,
            env=tree.environment({"PATH": "/usr/bin:/bin", **env}),
        )
        assert result.returncode == ExitCode.USAGE
        assert "\x1b" not in result.stdout + result.stderr
