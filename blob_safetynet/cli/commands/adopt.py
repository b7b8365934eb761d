"""`safetynet adopt`: bring an existing table and container under the protocol.

A dry run by default: counts by class, and what `--apply` would do. `--apply` tags every
untagged blob a row names `committed` (only while its ETag is the listed one), writes the
document's identity into its metadata (under the same ETag) and then marks its row Ready.
Nothing is ever deleted; running it again finishes what a crash left.
"""

from __future__ import annotations

import argparse
import json
import logging

from blob_safetynet.cli.commands.common import (
    CommandError,
    UsageError,
    ascii_int,
    capped,
    fail,
    log_progress,
)
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_target_options,
    classify,
    open_target,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.reconcile import adopt
from blob_safetynet.settings.redaction import printable

LOG = logging.getLogger("safetynet.adopt")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "adopt",
        help="bring an existing table and container under the protocol (dry run unless --apply)",
    )
    add_target_options(parser)
    parser.add_argument(
        "--apply",
        action="store_true",
        help="tag the blobs committed and write their document's identity into their metadata "
        "(each If-Match its listed ETag), then mark their rows Ready; never deletes",
    )
    parser.add_argument(
        "--workers",
        type=ascii_int,
        default=adopt.DEFAULT_WORKERS,
        help=f"tag writes in flight, 1-{adopt.MAX_WORKERS} (default {adopt.DEFAULT_WORKERS})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        if not 1 <= args.workers <= adopt.MAX_WORKERS:
            raise UsageError(f"--workers must be 1-{adopt.MAX_WORKERS}, not {args.workers}")
        store, container = open_target(args)
        try:
            plan = adopt.plan(store, container)
        except TARGET_ERRORS as error:
            raise classify(error, args, started=False) from None
        result = adopt.AdoptResult(plan)
        if args.apply:
            log_progress()
            try:
                result = adopt.apply(store, container, plan, args.workers, _progress)
            except TARGET_ERRORS as error:
                raise classify(error, args, started=True) from None
    except CommandError as error:
        return fail("adopt", error.code, str(error), args.json)
    print(json.dumps(as_json(result, args.apply)) if args.json else render(result, args.apply))
    return ExitCode.FINDINGS if result.problems else ExitCode.OK


def _progress(result: adopt.AdoptResult) -> None:
    LOG.info(
        "adopt: %d of %d blobs tagged, %d of %d identified, %d rows marked Ready",
        result.tagged,
        result.plan.to_tag,
        result.identified,
        result.plan.to_identify,
        result.marked_ready,
    )


def counts(plan: adopt.AdoptPlan) -> dict[str, int]:
    return {
        "rows_blob_exists": plan.rows_blob_exists,
        "rows_blob_missing": plan.rows_blob_missing,
        "blobs_unreferenced": plan.blobs_unreferenced,
        "blobs_already_tagged": plan.blobs_already_tagged,
    }


def as_json(result: adopt.AdoptResult, applied: bool) -> dict[str, object]:
    problems = [*result.plan.cannot_adopt, *result.failed]
    unidentified = result.plan.identity_problems
    return {
        "applied": applied,
        "counts": counts(result.plan),
        "to_tag": result.plan.to_tag,
        "to_identify": result.plan.to_identify,
        "to_mark_ready": result.plan.to_mark_ready,
        "tagged": result.tagged,
        "identified": result.identified,
        "marked_ready": result.marked_ready,
        "cannot_adopt": capped(problems),
        "cannot_adopt_count": len(problems),
        "identity_problems": capped(unidentified),
        "identity_problem_count": len(unidentified),
    }


LABELS = {
    "rows_blob_exists": "rows whose blob exists",
    "rows_blob_missing": "rows whose blob is missing",
    "blobs_unreferenced": "blobs no row names",
    "blobs_already_tagged": "blobs already tagged",
}


def render(result: adopt.AdoptResult, applied: bool) -> str:
    plan = result.plan
    lines = [f"adopt ({'applied' if applied else 'dry run'}):"]
    lines += [f"  {LABELS[key]:<28} {value:>8}" for key, value in counts(plan).items()]
    if applied:
        lines.append(
            f"tagged {result.tagged} of {plan.to_tag} blobs committed, wrote the identity of "
            f"{result.identified} of {plan.to_identify}, marked {result.marked_ready} of "
            f"{plan.to_mark_ready} rows Ready; nothing deleted"
        )
    else:
        lines.append(
            f"--apply would tag {plan.to_tag} blobs committed, write the identity of "
            f"{plan.to_identify} and mark {plan.to_mark_ready} rows Ready; nothing is deleted"
        )
    for title, problems in (
        ("cannot adopt", [*plan.cannot_adopt, *result.failed]),
        ("identity not written", plan.identity_problems),
    ):
        if problems:
            lines.append(f"{title} ({len(problems)}):")
            lines += [f"  {printable(problem)}" for problem in capped(problems)]
            if len(problems) > len(capped(problems)):
                lines.append(f"  ... and {len(problems) - len(capped(problems))} more")
    return "\n".join(lines)
