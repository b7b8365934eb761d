"""The coverage table of docs/coverage.md: every peer check beside the rule here that covers it.

`python -m blob_safetynet.policies.reports.coverage --write docs/coverage.md` replaces the text
between the markers below; `--check docs/coverage.md` exits 1 when that text is stale. The rows
are in `peers.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from blob_safetynet.policies.reports.generated_table import cell, table_cli
from blob_safetynet.policies.reports.peers import PEER_CHECKS, PeerCheck, Source

START: Final = "<!-- coverage:start -->"
END: Final = "<!-- coverage:end -->"


def render(checks: Sequence[PeerCheck] = PEER_CHECKS) -> str:
    """The sources with their reference pages, then one row per peer check: its source, its id
    as the peer spells it, what it checks, the rules here and the reason or how far they go."""
    lines = ["| source | where its checks are listed | checks |", "| --- | --- | --- |"]
    for source in Source:
        count = sum(1 for check in checks if check.source is source)
        lines.append(f"| {source.value} | <{source.reference}> | {count} |")
    lines += [
        "",
        "| source | peer check | what it checks | rule here | why none, or how far it goes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in checks:
        rules = ", ".join(f"`{rule}`" for rule in check.rules) or "none"
        lines.append(
            f"| {check.source.value} | `{cell(check.check)}` | {cell(check.title)} | {rules} "
            f"| {cell(check.reason) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return table_cli(
        argv,
        prog="python -m blob_safetynet.policies.reports.coverage",
        render=render,
        markers=(START, END),
        table_name="the coverage table",
    )


if __name__ == "__main__":
    sys.exit(main())
