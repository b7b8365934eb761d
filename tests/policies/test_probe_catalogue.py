"""docs/verification.md's probe table is generated from the probes and must not go stale."""

from __future__ import annotations

from pathlib import Path

from blob_safetynet.policies.probes import PROBES
from blob_safetynet.policies.reports.probe_catalogue import main, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "verification.md"


def test_probe_table_is_current() -> None:
    """docs/verification.md holds exactly the table the probes render."""
    assert main(["--check", str(DOC)]) == 0


def test_a_row_per_probe_and_ids_unique() -> None:
    """One row per probe in registry order; ids are unique and say they are probes."""
    rows = render().splitlines()[2:-1]
    assert [row.split("`")[1] for row in rows] == [p.id for p in PROBES]
    assert len({p.id for p in PROBES}) == len(PROBES)
    assert all(p.id.startswith("SNV-") for p in PROBES)


def test_stale_table_is_reported(tmp_path: Path) -> None:
    """--check exits 1 on a stale table and --write repairs it."""
    stale = tmp_path / "v.md"
    stale.write_text("x\n<!-- probes:start -->\n| old |\n<!-- probes:end -->\n")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0
