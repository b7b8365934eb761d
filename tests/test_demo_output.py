"""`safetynet demo`'s scenario ids never read as invariants, and docs/protocol.md shows its output."""

from __future__ import annotations

import contextlib
import io
import logging
import re
from pathlib import Path

import pytest

from blob_safetynet.cli.main import main

pytestmark = pytest.mark.e2e  # the whole demo, run

PROTOCOL_DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
SAMPLE = re.compile(r"## What `make demo` shows.*?```text\n(?P<body>.*?)```", re.DOTALL)
SCENARIO_ROW = re.compile(r"^(?P<id>[A-Z][0-9]*) +\|", re.MULTILINE)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def demo_run() -> tuple[str, list[str]]:
    """The demo's stdout, and every message urllib3 logged while it ran."""
    out, kept = io.StringIO(), Kept()
    urllib3 = logging.getLogger("urllib3")
    urllib3.addHandler(kept)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert main(["demo"]) == 0
    finally:
        urllib3.removeHandler(kept)
    return out.getvalue(), kept.messages


@pytest.fixture(scope="module")
def demo_output(demo_run: tuple[str, list[str]]) -> str:
    return demo_run[0]


def test_no_connection_is_discarded_for_a_full_pool(demo_run: tuple[str, list[str]]) -> None:
    """The racing writers share a client whose pool holds a connection for each of them."""
    assert [m for m in demo_run[1] if "Connection pool is full" in m] == []


def test_scenario_ids_are_not_invariant_ids(demo_output: str) -> None:
    """The call-shape scenarios are S1-S9; I1-I6 only ever name invariants in the output."""
    ids = SCENARIO_ROW.findall(demo_output)
    assert [i for i in ids if i.startswith("S")] == [f"S{n}" for n in range(1, 10)]
    assert not [i for i in ids if re.fullmatch(r"I[0-9]+", i)]


def test_the_sample_in_protocol_md_is_lines_of_a_real_run(demo_output: str) -> None:
    """Every sample line without an elision is printed, character for character, by the demo."""
    match = SAMPLE.search(PROTOCOL_DOC.read_text(encoding="utf-8"))
    assert match is not None
    shown = [line for line in match["body"].splitlines() if line and "..." not in line]
    assert len(shown) >= 4
    printed = set(demo_output.splitlines())
    assert [line for line in shown if line not in printed] == []


RECOVERY_ROW = re.compile(r"^(?P<id>R[0-9]+) +\|.*\| (?P<verdict>ok|MISMATCH)$", re.MULTILINE)


def test_the_recovery_story_runs_r1_to_r9_and_every_step_matches(demo_output: str) -> None:
    """The recovery steps R1-R9 are printed once each, in order, every one measured as expected,
    and the last line says every document came back."""
    rows = RECOVERY_ROW.findall(demo_output)
    assert [row[0] for row in rows] == [f"R{n}" for n in range(1, 10)]
    assert {row[1] for row in rows} == {"ok"}
    assert demo_output.rstrip().splitlines()[-2].endswith("every document came back")


def test_the_demo_says_where_recovery_runs_and_shows_why(demo_output: str) -> None:
    """The recovery heading names the double it runs on and Azurite's 501, and R1 measures
    that 501 on plain Azurite in this run."""
    assert "on the recovery double in front of Azurite" in demo_output
    assert "answers Undelete Blob with 501" in demo_output
    (r1,) = [line for line in demo_output.splitlines() if line.startswith("R1 ")]
    assert r1.split("|")[3].strip() == "HTTP 501"
