"""The probe table of docs/verification.md, generated from the probes themselves.

`python -m blob_safetynet.policies.reports.probe_catalogue --write docs/verification.md` replaces the text between the
markers; `--check docs/verification.md` exits 1 when it is stale.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from blob_safetynet.policies.probes import PROBES, Probe
from blob_safetynet.policies.reports.generated_table import cell, table_cli

START: Final = "<!-- probes:start -->"
END: Final = "<!-- probes:end -->"


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
            f"| `{probe.id}` | {cell(does)} | {proves} | {cell(probe.on_emulator)} "
            f"| {cell(probe.on_live)} | {probe.requests} |"
        )
    total = sum(probe.requests for probe in probes)
    lines.append(f"| | | | | total, plus clean-up deletes | {total} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return table_cli(
        argv,
        prog="python -m blob_safetynet.policies.reports.probe_catalogue",
        render=render,
        markers=(START, END),
        table_name="the probe table",
    )


if __name__ == "__main__":
    sys.exit(main())
