"""Every `safetynet ...` command the README, docs/ and examples/ show exists in the CLI's
parser: its subcommand path (`db upgrade`, `binding bind`) and every option given to it.

A command is read where a reader would copy it from: an inline code span that starts with
`safetynet`, or a line of a fenced block (or of a pipeline file in examples/) that runs it.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from blob_safetynet.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file())
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`(safetynet [^`]+)`")
RUNS = re.compile(r"(?:^|[\s;&|(`$:])safetynet((?: +[a-z][a-z-]*)+)(.*)$")
WORD = re.compile(r"[a-z][a-z-]*")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Shown:
    where: str
    words: tuple[str, ...]
    """What follows `safetynet` up to the first option or value."""
    options: tuple[str, ...]


def _command(text: str, where: str) -> Shown | None:
    match = RUNS.search(text)
    if match is None:
        return None
    words = tuple(match.group(1).split())
    return Shown(where, words, tuple(OPTION.findall(match.group(2))))


def _joined(block: str) -> list[str]:
    """A block's lines, a line ending in a backslash joined with the next."""
    return block.replace("\\\n", " ").splitlines()


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT)
        for block in FENCE.finditer(text):
            line = text.count("\n", 0, block.start())
            for number, code in enumerate(_joined(block.group(1)), start=line + 2):
                found += [c for c in [_command(code, f"{name}:{number}")] if c]
        prose = FENCE.sub("", text)
        for span in SPAN.finditer(prose):
            found += [c for c in [_command(span.group(1), f"{name} `{span.group(1)}`")] if c]
    for example in EXAMPLES:
        name = example.relative_to(ROOT)
        lines = _joined(example.read_text(encoding="utf-8", errors="replace"))
        for number, code in enumerate(lines, start=1):
            found += [c for c in [_command(code, f"{name}:{number}")] if c]
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def resolve(parser: argparse.ArgumentParser, shown: Shown) -> list[str]:
    """What of `shown` the parser does not know: a subcommand, or options of the command."""
    command, path = parser, ["safetynet"]
    for word in shown.words:
        choices = _subcommands(command)
        if not choices:
            break  # a positional value or the next word of the sentence
        if word not in choices:
            return [f"{' '.join(path)} has no subcommand {word!r}"]
        command, path = choices[word], [*path, word]
    if _subcommands(command) and shown.options:
        return [f"{' '.join(path)} takes its options after a subcommand"]
    known = set(command._option_string_actions)
    return [f"{' '.join(path)} has no option {o}" for o in shown.options if o not in known]


SHOWN = shown_commands()


def test_the_docs_show_commands() -> None:
    """The reader finds the commands where they are (guards the extraction itself)."""
    names = {shown.words[0] for shown in SHOWN}
    assert {"audit", "verify", "adopt", "db", "binding", "local", "sweep"} <= names
    assert len(SHOWN) > 50


@pytest.mark.parametrize("shown", SHOWN, ids=lambda shown: shown.where)
def test_every_command_shown_exists_in_the_cli(shown: Shown) -> None:
    """The subcommand path and each option shown are the parser's own (a group named alone,
    `safetynet db`, is a reference to its commands)."""
    assert resolve(build_parser(), shown) == []
