"""The probe table of docs/verification.md, generated from the probes themselves.

`python -m policies.probes.catalogue --write docs/verification.md` replaces the text between the
markers; `--check docs/verification.md` exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from policies.probes import PROBES, Probe

START: Final = "<!-- probes:start -->"
END: Final = "<!-- probes:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(probes: Sequence[Probe] = PROBES) -> str:
    """One row per probe: what it does, the rules it proves, Azurite, live, requests."""
    lines = [
        "| probe | what it does | proves | on Azurite | on a live account | requests |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for probe in probes:
        proves = ", ".join(f"`{rule}`" for rule in probe.proves) or "(the protocol)"
        does = f"**{probe.title}.** {probe.action}."
        lines.append(
            f"| `{probe.id}` | {_cell(does)} | {proves} | {_cell(probe.on_emulator)} "
            f"| {_cell(probe.on_live)} | {probe.requests} |"
        )
    total = sum(probe.requests for probe in probes)
    lines.append(f"| | | | | total, plus clean-up deletes | {total} |")
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, table: str) -> str:
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {START} and {END} are missing or out of order")
    return text[: start + len(START)] + "\n" + table + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.probes.catalogue")
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
            print(f"{target}: the probe table is stale; run {parser.prog} --write {target}")
            return 1
        return 0
    target.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
