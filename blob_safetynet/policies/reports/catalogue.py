"""The rule catalogue as a Markdown table, generated from the rules themselves.

`python -m blob_safetynet.policies.reports.catalogue --write docs/policies.md` replaces the text between the markers below;
`--check docs/policies.md` exits 1 when that text is stale.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from blob_safetynet.policies.reports.generated_table import cell, replace_between, table_cli
from blob_safetynet.policies.rules import RULES, Rule

START: Final = "<!-- rules:start -->"
END: Final = "<!-- rules:end -->"


def _where(rule: Rule) -> str:
    from blob_safetynet.policies.pack.crossguard import is_resource_rule

    return "resource" if is_resource_rule(rule) else "stack"


def render(rules: Sequence[Rule] = RULES) -> str:
    """The table: id, severity and enforcement, scope, what it checks (and why), the framework
    controls it maps to, how to fix an account and a Pulumi program."""
    lines = [
        "| id | severity | scope | what it checks | controls | fix on an account (audit, verify) "
        "| fix in a Pulumi program (pack) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rule in rules:
        severity = f"{rule.severity.value} ({rule.enforcement})"
        checks = f"**{rule.title}.** {rule.rationale}"
        lines.append(
            f"| `{rule.id}` | {severity} | {rule.scope.value} | {cell(checks)} | "
            f"{cell(controls(rule)) or '-'} | {cell(rule.remediation.account)} | "
            f"{cell(rule.remediation.pulumi)} |"
        )
    return "\n".join(lines) + "\n"


def controls(rule: Rule) -> str:
    """The rule's framework controls, grouped by framework: "CIS 3.0.0 4.1, 4.15; MCSB v1 DP-3"."""
    by_framework: dict[str, list[str]] = {}
    for control in rule.controls:
        by_framework.setdefault(control.framework.short, []).append(control.id)
    return "; ".join(f"{name} {', '.join(ids)}" for name, ids in by_framework.items())


def replace_between_markers(text: str, table: str) -> str:
    """`text` with everything between the markers replaced by `table`."""
    return replace_between(text, table, START, END)


def main(argv: Sequence[str] | None = None) -> int:
    return table_cli(
        argv,
        prog="python -m blob_safetynet.policies.reports.catalogue",
        render=render,
        markers=(START, END),
        table_name="the rule catalogue",
    )


if __name__ == "__main__":
    sys.exit(main())
