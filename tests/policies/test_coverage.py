"""docs/coverage.md maps every peer check to the rules here; the table is generated and the
mapping is held to the rule set, so a rule cannot be added without a row."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from blob_safetynet.policies.reports.coverage import END, START, main
from blob_safetynet.policies.reports.peers import PEER_CHECKS, Source
from blob_safetynet.policies.rules import RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"


def test_documented_coverage_is_current() -> None:
    """docs/coverage.md holds exactly the table the rows render (run the generator if this fails)."""
    assert main(["--check", str(DOC)]) == 0


def test_every_rule_answers_at_least_one_peer_check() -> None:
    """Each rule of the registry is named by some row, so a new rule needs its row."""
    named = {rule for check in PEER_CHECKS for rule in check.rules}
    assert [rule.id for rule in RULES if rule.id not in named] == []


def test_every_rule_a_row_names_exists() -> None:
    """A row names only rule ids of the registry: a renamed or removed rule breaks its rows."""
    known = {rule.id for rule in RULES}
    assert sorted({r for check in PEER_CHECKS for r in check.rules} - known) == []


def test_a_row_without_a_rule_says_why() -> None:
    """Every peer check no rule covers carries its reason."""
    assert [check.check for check in PEER_CHECKS if not check.rules and not check.reason] == []


def test_each_source_is_listed_and_names_a_check_once() -> None:
    """Every source has rows, grouped in the order of `Source`, and no check id repeats within
    its source."""
    order = list(dict.fromkeys(check.source for check in PEER_CHECKS))
    assert order == list(Source)
    repeated = Counter((check.source, check.check) for check in PEER_CHECKS)
    assert [key for key, count in repeated.items() if count > 1] == []


def test_check_reports_a_stale_table(tmp_path: Path) -> None:
    """--check exits 1 when the text between the markers differs from the rows; --write repairs it."""
    stale = tmp_path / "coverage.md"
    stale.write_text(f"# x\n{START}\n| old |\n{END}\n")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0
