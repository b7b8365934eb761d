"""The pipeline recipes in examples/ call the real CLI: every `safetynet` line parses."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from safetynet.cli import build_parser

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECIPES = sorted(EXAMPLES.glob("*.yml"))


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
    """Each recipe builds the zip, audits as SARIF and verifies as JUnit with options the CLI has."""
    parser = build_parser()
    parsed = [parser.parse_args(args) for args in safetynet_commands(recipe)]
    formats = {(args.command, getattr(args, "format", None)) for args in parsed}
    assert {("build-function", None), ("audit", "sarif"), ("verify", "junit")} <= formats
    text = recipe.read_text()
    assert "--policy-pack policy-pack" in text
    assert "pulumi up" in text
