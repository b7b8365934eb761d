"""A Markdown table kept between two markers in a document, and the `--write`/`--check` CLI
that the generated tables (rules in docs/policies.md, probes in docs/verification.md, peer
checks in docs/coverage.md) share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from blob_safetynet.settings import atomicfile


def cell(text: str) -> str:
    """`text` made safe for one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def replace_between(text: str, table: str, start_marker: str, end_marker: str) -> str:
    """`text` with everything between the markers replaced by `table`."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"the markers {start_marker} and {end_marker} are missing or out of order")
    return text[: start + len(start_marker)] + "\n" + table + text[end:]


def table_cli(
    argv: Sequence[str] | None,
    *,
    prog: str,
    render: Callable[[], str],
    markers: tuple[str, str],
    table_name: str,
) -> int:
    """Print the table, `--write` it between the `markers` of a file, or `--check` (exit 1) that
    the file's is stale."""
    parser = argparse.ArgumentParser(prog=prog)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="update the table in this Markdown file")
    group.add_argument("--check", type=Path, help="exit 1 if the table in this file is stale")
    args = parser.parse_args(argv)
    table = render()
    target: Path | None = args.write or args.check
    if target is None:
        sys.stdout.write(table)
        return 0
    current = target.read_text(encoding="utf-8")
    updated = replace_between(current, table, *markers)
    if args.check:
        if updated != current:
            print(f"{target}: {table_name} is stale; run {parser.prog} --write {target}")
            return 1
        return 0
    atomicfile.write_text(target, updated, mode=0o644)
    return 0
