"""The rule catalogue in docs/policies.md is generated from the rules and must not go stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from blob_safetynet.policies.reports.catalogue import (
    END,
    START,
    main,
    render,
    replace_between_markers,
)
from blob_safetynet.policies.rules import RULES

CATALOGUE_DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def test_documented_catalogue_is_current() -> None:
    """docs/policies.md holds exactly the table the rules render (run the generator if this fails)."""
    assert main(["--check", str(CATALOGUE_DOC)]) == 0


def test_catalogue_has_a_row_per_rule() -> None:
    """The rendered table has a header, a separator and one row per rule, in order."""
    rows = render().splitlines()
    assert [row.split("`")[1] for row in rows[2:]] == [rule.id for rule in RULES]


def test_check_reports_a_stale_table(tmp_path: Path) -> None:
    """--check exits 1 when the text between the markers differs from the rules."""
    stale = tmp_path / "policies.md"
    stale.write_text(f"# x\n{START}\n| old |\n{END}\n")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0


def test_missing_markers_are_an_error() -> None:
    """Replacing needs both markers in order."""
    with pytest.raises(ValueError, match="markers"):
        replace_between_markers("no markers here", render())
