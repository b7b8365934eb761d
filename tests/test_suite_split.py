"""The long end-to-end tests (marked e2e) leave `make test` but never CI: `.ci/run` runs
`make test-e2e` after `make test`, and the two targets together select every test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipe(target: str) -> list[str]:
    """The command lines of one Makefile target."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.MULTILINE)
    assert match is not None, target
    return [line.strip() for line in match[1].splitlines()]


def test_make_test_and_make_test_e2e_split_the_suite_by_the_marker() -> None:
    """`make test` deselects the e2e marker and `make test-e2e` selects exactly it, so no test
    falls between the two."""
    assert any(line.startswith('$(BIN)/pytest -m "not e2e"') for line in recipe("test"))
    assert "$(BIN)/pytest -m e2e" in recipe("test-e2e")


def test_ci_runs_the_end_to_end_tests_after_the_suite() -> None:
    """`.ci/run` runs `make test`, then `make test-e2e`."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test-e2e" in lines
    assert lines.index("make test") < lines.index("make test-e2e")


def test_the_readmes_make_test_figure_names_every_part_the_target_runs() -> None:
    """`make test` runs its prerequisites (lint, and the venv and node_modules set-up) before
    pytest: the README's figure for it gives each part a time, not pytest's alone."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    prerequisites = re.search(r"^test: ([^\n]*)$", text, re.MULTILINE)
    assert prerequisites is not None
    assert prerequisites[1].split() == ["lint", "$(NODE_STAMP)"]
    assert re.search(r"^lint: \$\(PY_STAMP\)$", text, re.MULTILINE)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    figure = readme[readme.index("`make test` is three parts") :].split(" - **")[0]
    for part, timed in (
        ("`make venv` and `npm ci`", r"about \d+ s from a fresh clone"),
        ("`make lint`", r"\d+ s with no mypy cache"),
        ("tests on two pytest-xdist workers", r"in \d+ s of pytest"),
    ):
        assert part in figure, part
        assert re.search(timed, figure), timed
