"""`safetynet recover --after-restore`: roll a table restored to an earlier time forward from the
container, plan then apply, as `recover` does (`blob_safetynet.recover.rollforward`).

  safetynet recover --after-restore --db URL --container C --write-plan plan.json   # dry run
  safetynet recover --after-restore --db URL --container C --apply-plan plan.json   # apply it
  safetynet recover --after-restore --db URL --container C --apply                  # both

The dry run reads every blob it would point a row at (a blob whose bytes do not bear out its
metadata is reported, never planned). Documents deleted after the restore point are kept unless
`--reapply-deletes`; the plan holds that choice. Exit 0 when the table and the container agree
(after applying: a fresh judgement finds nothing), 1 while steps or findings remain.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from blob_safetynet.cli.commands import plan_file
from blob_safetynet.cli.commands.common import (
    CommandError,
    UsageError,
    capped,
    fail,
    log_progress,
)
from blob_safetynet.cli.commands.recover_tail import apply_and_report, refusals_and_target_errors
from blob_safetynet.cli.commands.target import open_target
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.recover.plan import Target
from blob_safetynet.recover.rollforward import View, judge
from blob_safetynet.recover.rollforward_apply import DONE, RollForward, roll_forward
from blob_safetynet.recover.rollforward_bytes import verified
from blob_safetynet.recover.rollforward_plan import RECORD, plan_dict
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.redaction import printable

COMMAND = "safetynet recover --after-restore"


def check_options(args: argparse.Namespace) -> None:
    """SettingsError for an option that means nothing with (or without) --after-restore."""
    if not args.after_restore:
        if args.reapply_deletes:
            raise SettingsError("--reapply-deletes needs --after-restore")
        return
    if args.verify_bytes:
        raise SettingsError(
            "--verify-bytes is recover's without --after-restore: the roll-forward reads the "
            "bytes of every blob it points a row at anyway"
        )
    if args.expiry_horizon is not None:
        raise SettingsError(
            "--expiry-horizon is recover's without --after-restore: the roll-forward needs no "
            "kept copy"
        )
    if args.reapply_deletes and args.apply_plan:
        raise SettingsError(
            "--reapply-deletes with --apply-plan: the plan holds the choice it was made with"
        )


def run(args: argparse.Namespace) -> int:
    log_progress()
    try:
        try:
            if args.apply and args.apply_plan:
                raise SettingsError("--apply and --apply-plan exclude each other")
            plan_file.check_output(args.write_plan, "--write-plan", args.db, args.apply_plan)
            saved = (
                plan_file.read(args.apply_plan, "--apply-plan", "roll-forward")
                if args.apply_plan
                else None
            )
        except SettingsError as error:
            raise UsageError(str(error)) from None
        store, container = open_target(args)
        with refusals_and_target_errors(args):
            plan = saved
            if plan is None:
                judgement = judge(View.read(store, container), args.reapply_deletes)
                if not args.apply:
                    judgement = verified(judgement, container)
                target = Target.of(store, container)
                plan = plan_dict(target, judgement, args.reapply_deletes)
                if args.write_plan is not None:
                    plan_file.write(args.write_plan, plan, "--write-plan")
                if not args.apply:
                    return _report_plan(plan, args)
            return apply_and_report(
                args,
                lambda stop: roll_forward(store, container, plan=plan, stop_requested=stop),
                _report_applied,
                lambda result: result.agree,
            )
    except CommandError as error:
        return fail("recover", error.code, str(error), args.json)


def _step_line(step: dict[str, Any]) -> str:
    moved = (
        f"{step['row_blob']} -> " if step["row_blob"] and step["row_blob"] != step["blob"] else ""
    )
    return (
        f"{step['action']}: {printable(step['name'])} (document {printable(step['document'])}, "
        f"{printable(moved)}{printable(step['blob'])}): {printable(step['detail'])}"
    )


def _finding_line(finding: dict[str, Any]) -> str:
    document = f", document {finding['document']}" if finding["document"] else ""
    return f"left: {finding['kind']}: blob {finding['blob']}{document}: {finding['detail']}"


def _report_plan(plan: dict[str, Any], args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps({"plan": plan}))
    else:
        steps = [s for s in plan["steps"] if s["action"] != RECORD]
        for line in [_step_line(s) for s in steps][:200]:
            print(line)
        if len(steps) > 200:
            print(f"... and {len(steps) - 200} more step(s) (the plan file lists every one)")
        recorded = plan["summary"][RECORD]
        if recorded:
            print(f"record: {recorded} retired blob(s) no row nor record names, for the sweeper")
        for line in capped([_finding_line(f) for f in plan["findings"]]):
            print(line)
        print(_summary(plan))
        if args.write_plan is not None:
            shown = printable(str(args.write_plan))
            print(f"plan written to {shown}; review it, then run {COMMAND} --apply-plan {shown}")
    return ExitCode.FINDINGS if plan["steps"] or plan["findings"] else ExitCode.OK


def _summary(plan: dict[str, Any]) -> str:
    counts = ", ".join(
        f"{count} {action}" for action, count in plan["summary"].items() if action != "left"
    )
    return f"{len(plan['steps'])} step(s) ({counts}); {len(plan['findings'])} left for a person"


def _report_applied(result: RollForward, args: argparse.Namespace) -> None:
    after = [f.as_dict() for f in result.after.findings]
    if args.json:
        print(
            json.dumps(
                {
                    "outcomes": [o.as_dict() for o in result.outcomes],
                    "done": result.count(DONE),
                    "agree": result.agree,
                    "remaining_steps": [s.as_dict() for s in result.after.steps],
                    "left": after,
                    "stopped": result.stopped,
                }
            )
        )
        return
    counts = Counter((o.step.action, o.status) for o in result.outcomes)
    for outcome in result.outcomes:
        if outcome.status != DONE:
            step = outcome.step.as_dict()
            print(f"{outcome.status}: {_step_line(step)}: {printable(outcome.detail)}")
    for line in capped([_finding_line(f) for f in after]):
        print(line)
    done = ", ".join(
        f"{n} {action}" for (action, status), n in sorted(counts.items()) if status == DONE
    )
    print(f"{result.count(DONE)} step(s) done ({done or 'none'})")
    if result.agree:
        print("the table and the container agree")
    else:
        print(
            f"{len(result.after.steps)} step(s) still to do (run again), {len(after)} left for a "
            "person"
        )
    if result.stopped is not None:
        print(
            f"safetynet recover: stopped by {result.stopped} between two steps; run the same "
            "command again to finish",
            file=sys.stderr,
        )
