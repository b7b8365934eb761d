"""The rule catalogue as a Markdown table, generated from the rules themselves.

`python -m policies.catalogue --write README.md` replaces the text between the markers below;
`--check README.md` exits 1 when that text is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from policies.rules import RULES, Rule

START: Final = "<!-- rules:start -->"
END: Final = "<!-- rules:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(rule: Rule) -> str:
    from policies.pack import is_resource_rule

    return "resource" if is_resource_rule(rule) else "stack"


def render(rules: Sequence[Rule] = RULES) -> str:
    """The table: id, severity and enforcement, what it checks (and why), how to fix."""
    lines = [
        "| id | severity | what it checks | how to fix |",
        "| --- | --- | --- | --- |",
    ]
    for rule in rules:
        severity = f"{rule.severity.value} ({rule.enforcement})"
        checks = f"**{rule.title}.** {rule.rationale}"
        lines.append(f"| `{rule.id}` | {severity} | {_cell(checks)} | {_cell(rule.remediation)} |")
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, table: str) -> str:
    """`text` with everything between the markers replaced by `table`."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {START} and {END} are missing or out of order")
    return text[: start + len(START)] + "\n" + table + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.catalogue")
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
    updated = replace_between_markers(current, table)
    if args.check:
        if updated != current:
            print(f"{target}: the rule catalogue is stale; run {parser.prog} --write {target}")
            return 1
        return 0
    target.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
