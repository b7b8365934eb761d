"""`safetynet history`: each probe's and rule's outcomes over the continuous verification runs.

Reads the history records the verification timer writes (`.safetynet/verify/history/`), at most
`--limit` of them and each at most 1 MiB (blob_safetynet/policies/continuous/history.py), and prints one line per check,
oldest run first. Everything taken from a record is escaped for the terminal. Exit codes
(`blob_safetynet.cli.exitcodes`): 0 the newest run of every check passed or could not be judged; 1 a
check's newest outcome is FAIL; 2 bad usage or no such container; 3 no record could be read, or
some blobs under the prefix were not records.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from azure.core.exceptions import ResourceNotFoundError

from blob_safetynet.cli.commands.common import CommandError, UsageError, ascii_int, fail
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_blob_options,
    classify,
    open_blob_service_client,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.continuous.history import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    History,
    HistoryError,
    read_history,
)
from blob_safetynet.settings import signals
from blob_safetynet.settings.redaction import printable

SYMBOLS: Final = {"PASS": "P", "FAIL": "F", "NOT_VERIFIABLE": "N", "UNKNOWN": "U"}
ABSENT: Final = "-"
MAX_ID: Final = 48
"""Longer check ids (a hostile record) are cut so the table stays a table."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "history",
        help="each probe's and rule's outcomes over the continuous verification runs",
        description=(
            "Read the history records the deployed app's verification timer writes under "
            ".safetynet/verify/history/ and print each check's outcomes, oldest run first "
            "(P pass, F fail, N not verifiable, U unknown, - not run)."
        ),
    )
    add_blob_options(parser)
    parser.add_argument(
        "--limit",
        type=ascii_int,
        default=DEFAULT_LIMIT,
        help=f"the newest N runs (1 to {MAX_LIMIT}, default {DEFAULT_LIMIT})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.set_defaults(handler=run)


@dataclass
class CheckLine:
    kind: str
    id: str
    outcomes: list[str | None] = field(default_factory=list)
    """One per run, None where the run did not have this check."""

    @property
    def last(self) -> str | None:
        return next((o for o in reversed(self.outcomes) if o is not None), None)


def timeline(history: History) -> list[CheckLine]:
    """One line per (kind, id) in first-seen order, with its outcome in every run."""
    lines: dict[tuple[str, str], CheckLine] = {}
    for number, record in enumerate(history.records):
        for check in record["checks"]:
            key = (check["kind"], check["id"])
            line = lines.setdefault(key, CheckLine(*key, outcomes=[None] * number))
            if len(line.outcomes) == number:
                line.outcomes.append(check["outcome"])
        for line in lines.values():
            line.outcomes += [None] * (number + 1 - len(line.outcomes))
    return list(lines.values())


def run(args: argparse.Namespace) -> int:
    as_json = bool(args.json)
    try:
        if not 1 <= args.limit <= MAX_LIMIT:
            raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}")
        container = open_blob_service_client(args).get_container_client(args.container)
        history = read_history(container, limit=args.limit)
    except CommandError as error:
        return fail("history", error.code, str(error), as_json)
    except HistoryError as error:
        return fail("history", ExitCode.INCOMPLETE, str(error), as_json)
    except ResourceNotFoundError:
        message = f"container '{printable(args.container)}' does not exist"
        return fail("history", ExitCode.USAGE, message, as_json)
    except TARGET_ERRORS as error:
        refused = classify(error, args, started=False)
        return fail("history", refused.code, str(refused), as_json)
    lines = timeline(history)
    sys.stdout.write(render_json(history, lines) if as_json else render_table(history, lines))
    for rejected in history.rejected:
        print(f"safetynet history: skipped {printable(rejected)}", file=sys.stderr)
    return exit_code(history, lines)


def exit_code(history: History, lines: Sequence[CheckLine]) -> int:
    if any(line.last == signals.FAILED for line in lines):
        return ExitCode.FINDINGS
    if not history.records or history.rejected:
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def _shown_id(text: str) -> str:
    escaped = printable(text)
    return escaped if len(escaped) <= MAX_ID else escaped[: MAX_ID - 3] + "..."


def render_table(history: History, lines: Sequence[CheckLine]) -> str:
    if not history.records:
        return "no continuous verification record under .safetynet/verify/history/ yet\n"
    runs = history.records
    out = [
        f"{len(runs)} run(s), {printable(str(runs[0]['run_id']))} .. "
        f"{printable(str(runs[-1]['run_id']))}, oldest first",
        f"{'check':<{MAX_ID}}  {'kind':<5}  outcomes  last",
    ]
    for line in lines:
        marks = "".join(SYMBOLS.get(o, "?") if o is not None else ABSENT for o in line.outcomes)
        last = printable(line.last or ABSENT)
        out.append(f"{_shown_id(line.id):<{MAX_ID}}  {printable(line.kind):<5}  {marks}  {last}")
    times = [t for t in (time_to_recover(r) for r in runs) if t is not None]
    if times:
        out.append(
            f"time to recover (the recovery drill): last {times[-1]:.2f} s, slowest "
            f"{max(times):.2f} s, over {len(times)} run(s) that recovered"
        )
    return "\n".join(out) + "\n"


def time_to_recover(record: dict[str, Any]) -> float | None:
    """A record's `time_to_recover_s` when it is a number of seconds (records are read, not
    trusted: anything else counts as absent)."""
    value = record.get("time_to_recover_s")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < 86_400 else None


def render_json(history: History, lines: Sequence[CheckLine]) -> str:
    runs = [
        {
            **{key: record.get(key) for key in ("run_id", "started_utc", "target")},
            "time_to_recover_s": time_to_recover(record),
        }
        for record in history.records
    ]
    checks: list[dict[str, Any]] = [
        {"kind": line.kind, "id": line.id, "outcomes": line.outcomes, "last": line.last}
        for line in lines
    ]
    body = {"runs": runs, "checks": checks, "rejected": history.rejected}
    # ensure_ascii: a record's control characters leave as \u escapes, never raw.
    return json.dumps(body, ensure_ascii=True, indent=2) + "\n"
