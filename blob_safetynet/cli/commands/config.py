"""`safetynet config check`: a stack's configuration checked offline, before `pulumi preview`.

It reads `Pulumi.<stack>.yaml` and validates this program's keys with the program's own parser
(`blob_safetynet.infra.config.parse`): the message a `pulumi up` would stop with, in under a
second, with no Pulumi CLI, backend or credential. With the `infra` extra it then runs the
program under Pulumi mocks that answer as ARM would (`blob_safetynet.infra.mocks`), lists the
resources it would create and judges the stack's storage accounts by the CrossGuard pack's rules
(`judge_stack`, the pack's thresholds with its containerName set to the stack's).

What offline cannot see is said, not guessed: a secret's value (its ciphertext needs the stack's
secrets provider; a placeholder stands in for the database URL under the mocks), and whether
the subnets exist and fit (`pulumi preview` reads them; the mocks answer every subnet as fit).

Exit 0: valid, and no rule at or above --fail-on fails. 1: a rule at or above it fails. 2: the
file or a value is refused (the key, the value and what is allowed). A verdict the program does
not decide (UNKNOWN: Defender for Storage is a subscription plan) is listed and, as under
`pulumi preview` with the pack, is a note, not a failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from blob_safetynet.cli.commands.common import fail
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.settings.redaction import printable

if TYPE_CHECKING:
    from blob_safetynet.infra.config import StackConfig
    from blob_safetynet.infra.mocks import StackRun
    from blob_safetynet.infra.stackfile import StackFile
    from blob_safetynet.policies.rules import Finding

NO_FAIL: Final = "none"
SEVERITIES: Final = ("critical", "high", "medium", "low")
PLACEHOLDER_URL: Final = "postgresql+psycopg://placeholder.invalid:5432/secret-not-read"
"""Stands in for a secret database URL under the mocks; nothing connects to it."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="check a stack's configuration offline (the step before pulumi preview)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="validate Pulumi.<stack>.yaml and, with the infra extra, run the program under "
        "mocks: the resources it would create and the rules they would pass",
        description="Validate this program's keys of a stack configuration file offline, "
        "then (with the infra extra) run the program under Pulumi mocks and judge its storage "
        "accounts by the policy pack's rules. No Pulumi CLI, backend or credential is used.",
    )
    check.add_argument(
        "file",
        metavar="STACK_FILE",
        nargs="?",
        type=Path,
        help="the stack's configuration file (default: Pulumi.<--stack>.yaml, or the one "
        "Pulumi.*.yaml in the current folder)",
    )
    check.add_argument("--stack", help="the stack whose Pulumi.<stack>.yaml to read")
    check.add_argument(
        "--config-only",
        action="store_true",
        help="validate the configuration only; do not run the program",
    )
    check.add_argument(
        "--fail-on",
        choices=[*SEVERITIES, NO_FAIL],
        default="high",
        help="exit 1 when a rule of this severity or above fails (default high, as audit)",
    )
    check.set_defaults(handler=run)


class _Refused(Exception):
    """The check stops with exit 2; the message says why."""


def _stack_file(args: argparse.Namespace) -> Path:
    if args.file is not None:
        if args.stack:
            raise _Refused("give STACK_FILE or --stack, not both")
        path: Path = args.file
        return path
    if args.stack:
        return Path(f"Pulumi.{args.stack}.yaml")
    found = sorted(p for p in Path.cwd().glob("Pulumi.*.y*ml") if p.name != "Pulumi.yaml")
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise _Refused(f"name the stack file or --stack (Pulumi.*.yaml here: {names})")
    return found[0]


def run(args: argparse.Namespace) -> int:
    from blob_safetynet.infra import stackfile
    from blob_safetynet.infra.config import ConfigError

    try:
        stack = stackfile.read(_stack_file(args))
        config = _validated(stack)
    except (_Refused, stackfile.StackFileError, ConfigError) as error:
        return fail("config check", ExitCode.USAGE, str(error), False)
    if args.config_only:
        return ExitCode.OK
    try:
        from blob_safetynet.infra.mocks import run_under_mocks
    except ImportError:
        print(
            "program: not run: the Pulumi SDK is not installed "
            '(pip install "blob-safetynet[infra]"); the configuration alone was checked'
        )
        return ExitCode.OK
    try:
        ran = run_under_mocks(
            _program(config), project=_namespace(), stack=stack.stack, subnets=None
        )
    except ConfigError as error:
        return fail("config check", ExitCode.USAGE, str(error), False)
    _print_resources(ran)
    findings = _judged(ran, config)
    return _verdict(findings, args.fail_on)


def _namespace() -> str:
    from blob_safetynet.infra.config import NAMESPACE

    return NAMESPACE


def _validated(stack: StackFile) -> StackConfig:
    """The file's keys parsed as `pulumi up` parses them; secrets said, not read."""
    from blob_safetynet.infra.config import (
        DATABASE_URL_KEY,
        KEYS,
        WEBHOOKS_KEY,
        parse,
        refuse_plain_secrets,
    )

    refuse_plain_secrets(stack.raw, lambda key: key in stack.secrets)
    raw = {key: value for key, value in stack.raw.items() if key not in stack.secrets}
    if DATABASE_URL_KEY in stack.secrets:
        raw[DATABASE_URL_KEY] = PLACEHOLDER_URL
    root = stack.path.parent.resolve()
    parsed = parse(raw, root=root)
    print(f"safetynet config check: {printable(str(stack.path))} (stack {printable(stack.stack)})")
    given = len([key for key in stack.raw if key in KEYS])
    print(f"configuration: valid; {given} of {len(KEYS)} keys set, the others take their defaults")
    for key in sorted(stack.secrets):
        stand_in = (
            "a placeholder URL stands in under the mocks"
            if key == DATABASE_URL_KEY
            else "its default stands in"
        )
        if key == WEBHOOKS_KEY:
            stand_in = "no webhook stands in"
        print(
            f"  {key}: a secret; its value is checked by `pulumi preview`, which decrypts it "
            f"({stand_in})"
        )
    for key in stack.others:
        print(f"  {printable(key)}: another namespace's (a provider's), not checked")
    return parsed


def _program(config: StackConfig) -> Callable[[], Mapping[str, Any]]:
    def program() -> Mapping[str, Any]:
        from blob_safetynet.infra.program import provision

        return provision(config)

    return program


def _print_resources(ran: StackRun) -> None:
    custom = [res for res in ran.resources if res.custom]
    print(
        f"program under Pulumi mocks: {len(custom)} resources in {len(ran.resources) - len(custom)} "
        "components (subnets taken as fit: `pulumi preview` reads them)"
    )
    width = max((len(res.type) for res in custom), default=0)
    for res in custom:
        print(f"  {res.type:<{width}}  {printable(res.name)}")


def _judged(ran: StackRun, config: StackConfig) -> list[Finding]:
    """Every rule over the stack's accounts, as the pack's stack policies judge outputs."""
    from blob_safetynet.policies.adapters.pulumi_props import StackResource
    from blob_safetynet.policies.pack.crossguard import judge_stack
    from blob_safetynet.policies.rules import RULES
    from blob_safetynet.policies.rules.model import Thresholds

    resources = [
        StackResource(res.type, res.name, res.state, res.parent_urn or None, res.id)
        for res in ran.resources
        if res.custom
    ]
    limits = Thresholds(container=config.container_name)
    return [finding for rule in RULES for finding in judge_stack(rule, resources, limits)]


def _verdict(findings: Sequence[Finding], fail_on: str) -> int:
    """Each rule once: PASS with the accounts it passed on, any other outcome account by
    account with its message; then the counts, and the exit code by --fail-on."""
    from blob_safetynet.policies.rules import Outcome, Severity

    accounts = sorted({f.account for f in findings})
    print(
        f"rules on {len(accounts)} storage account(s) ({', '.join(map(printable, accounts))}), "
        "the policy pack's thresholds:"
    )
    for rule_id in dict.fromkeys(f.rule.id for f in findings):
        judged = [f for f in findings if f.rule.id == rule_id]
        passed = [printable(f.account) for f in judged if f.outcome is Outcome.PASS]
        severity = judged[0].severity.value
        if passed:
            print(f"  {'PASS':<8} {rule_id:<28} {severity:<8} {', '.join(passed)}")
        for f in judged:
            if f.outcome is not Outcome.PASS:
                shown = f"{printable(f.account)}: {printable(f.message)}"
                print(f"  {f.outcome.value:<8} {rule_id:<28} {severity:<8} {shown}")
    shown_outcomes = (Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN, Outcome.NOT_APPLICABLE)
    counts = {o: sum(f.outcome is o for f in findings) for o in shown_outcomes}
    print(", ".join(f"{count} {outcome.value}" for outcome, count in counts.items()))
    if counts[Outcome.UNKNOWN]:
        print(
            f"{counts[Outcome.UNKNOWN]} UNKNOWN: what the program does not decide; "
            "`pulumi preview` with the pack reports them as notes"
        )
    if fail_on == NO_FAIL:
        return ExitCode.OK
    least = Severity(fail_on).rank
    failing = [f for f in findings if f.outcome is Outcome.FAIL and f.severity.rank >= least]
    if failing:
        print(
            f"safetynet config check: {len(failing)} rule(s) at or above {fail_on} fail",
            file=sys.stderr,
        )
        return ExitCode.FINDINGS
    return ExitCode.OK
