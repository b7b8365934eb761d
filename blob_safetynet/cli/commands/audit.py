"""`safetynet audit`: judge live storage accounts by the policy rules, in a pipeline's format.

A fleet's results are spooled to a temporary file as they are judged and every report is
written from it with memory flat in the number of accounts (`policies.reports.stream`); each
--output file is written to a temporary file beside it and renamed into place at the end, so an
interrupted or crashed run leaves no report that looks complete.

Exit 0: no failing rule at or above --fail-on and every rule judged. 1: at least one failed.
2: bad usage. 3: nothing failed but the audit is incomplete (authentication failed, a
permission is missing, ARM answered something unreadable, a rule could not be judged, or no
account was found), so a pipeline never mistakes "could not look" for "compliant". With
--from-file, a rule whose facts no saved file can hold is NOT_IN_FILES: reported in every
format, it leaves the exit code to what the files do show.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blob_safetynet.cli.commands.audit_outcome import NO_FAIL, exit_code, warn
from blob_safetynet.cli.commands.audit_scope import scope_from
from blob_safetynet.cli.commands.audit_stream import Stream, failed_streams, write_spooled
from blob_safetynet.cli.commands.common import (
    UsageError,
    ascii_int,
    fail,
    one_stdin,
    parse_flag,
)
from blob_safetynet.cli.commands.outputs import (
    Output,
    add_output_options,
    add_sarif_category,
    check_outputs,
    parse_outputs,
    sarif_category,
    write_outputs,
)
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.reports.formats import RENDERERS, AuditRenderer
from blob_safetynet.policies.reports.sarif import render_sarif
from blob_safetynet.policies.reports.stream import Spool, SpooledReport
from blob_safetynet.policies.reports.stream import apply as apply_streaming
from blob_safetynet.policies.reports.view import (
    HistoryError,
    HistoryRun,
    ReportContext,
    findings_of,
    load_baseline,
    load_history,
)
from blob_safetynet.policies.rules import RULES, Severity, suppressions
from blob_safetynet.policies.rules.data_protection import SOFT_DELETE_DAYS
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.rules.suppressions import Baseline
from blob_safetynet.policies.sources.connection import (
    READ_TIMEOUT_S,
    StaticTokenCredential,
    default_credential,
)
from blob_safetynet.policies.sources.connection import check_arm_endpoint as arm_endpoint_rule
from blob_safetynet.policies.sources.files import OfflineError, run_offline_audit
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import DEFAULT_CONCURRENCY, STORAGE_API_VERSION, run_audit
from blob_safetynet.policies.sources.results import AccountResult, AuditReport
from blob_safetynet.policies.sources.throttle import SharedThrottle
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError, check_container_name
from blob_safetynet.settings.redaction import Redactor, printable
from blob_safetynet.settings.untrusted import STDIN, InputFile

TOKEN_ENV = appsettings.ARM_TOKEN.name
MAX_CONCURRENCY = 64
MAX_READ_TIMEOUT_S = 3600
MAX_DAYS = 36_500
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*", re.ASCII)
"""RFC 6750's b64token: the characters a bearer token may hold."""
DEFAULTS = Thresholds()


_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?", re.ASCII)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser(
        "audit",
        help="audit live storage accounts against the policy rules",
        description=(
            "Read storage accounts through Azure Resource Manager and judge them by the same "
            f"rules as the policy pack. Authenticates with DefaultAzureCredential, or with the "
            f"bearer token in ${TOKEN_ENV} when it is set. A rule at or above --fail-on that "
            "fails is a finding; the exit codes are listed below."
        ),
    )
    where = parser.add_argument_group(
        "what to audit (one account, a resource group, a subscription, or a fleet)"
    )
    where.add_argument(
        "--subscription",
        action="append",
        metavar="ID",
        help=f"subscription id (env {appsettings.AZURE_SUBSCRIPTION_ID.name}); repeat it to "
        "audit several through Resource Graph",
    )
    where.add_argument(
        "--management-group",
        action="append",
        default=[],
        metavar="ID",
        help="every account under this management group, listed through Resource Graph; repeatable",
    )
    where.add_argument(
        "--all-subscriptions",
        action="store_true",
        help="every subscription the credential can read, listed through Resource Graph",
    )
    where.add_argument("--resource-group", help="only accounts in this resource group")
    where.add_argument(
        "--account",
        help="one account: its name (needs --resource-group) or its full resource id",
    )
    where.add_argument(
        "--from-file",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="judge saved ARM JSON instead of reading Azure: `az storage account show`, "
        "`... blob-service-properties show`, `... management-policy show`, `az storage "
        "container-rm list` outputs or an ARM template export; no credential is used",
    )
    out = add_output_options(parser, RENDERERS, "audit")
    add_sarif_category(out, "safetynet-audit/<scope>/, or safetynet-audit/files/ for --from-file")
    out.add_argument(
        "--stream",
        type=Path,
        metavar="FILE",
        help="fleet audits: write each account's verdicts to FILE as JSON Lines as soon as "
        "it is judged (before suppressions and baseline)",
    )
    out.add_argument(
        "--suppressions",
        type=Path,
        metavar="FILE",
        help="YAML or JSON file of (rule, resource pattern, justification, expiry): a FAIL it "
        "covers is reported as SUPPRESSED and does not fail the run",
    )
    out.add_argument(
        "--suppression-horizon-days",
        type=ascii_int,
        default=suppressions.HORIZON_DAYS,
        metavar="N",
        help="refuse a suppression that expires more than N days after today (default "
        f"{suppressions.HORIZON_DAYS}: every accepted risk is reviewed within a year)",
    )
    out.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="an earlier --format json report: a FAIL it already held (same rule and resource) "
        "is reported as BASELINED and does not fail the run, so only new failures do; its FAILs "
        "that no longer fail are listed",
    )
    out.add_argument(
        "--history",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="earlier --format json reports, oldest first: the HTML report shows each rule's "
        "history, a column per run labelled by when it ran",
    )
    out.add_argument(
        "--fail-on",
        choices=[*(s.value for s in reversed(Severity)), NO_FAIL],
        default=Severity.HIGH.value,
        help="exit 1 when a rule of this severity or above fails (default high)",
    )
    conn = parser.add_argument_group("connection")
    conn.add_argument(
        "--arm-endpoint",
        default=env(appsettings.ARM_ENDPOINT.name),
        help="Resource Manager URL for sovereign clouds or tests "
        f"(env {appsettings.ARM_ENDPOINT.name})",
    )
    conn.add_argument(
        "--storage-api-version",
        help=f"Microsoft.Storage api-version to read with (default {STORAGE_API_VERSION}, "
        "pinned; pass an older one where a cloud lags); with --from-file, the version the "
        "CLI outputs were read with (default: unknown, so what it may lack is NOT_IN_FILES); "
        "it does not apply to a template export, whose resources name their own apiVersion",
    )
    conn.add_argument(
        "--allow-custom-endpoint",
        action="store_const",
        const="true",
        default=appsettings.ALLOW_CUSTOM_ENDPOINT.read(os.environ),
        help="send the token to an --arm-endpoint that is neither Azure's Resource Manager nor "
        f"loopback (env {appsettings.ALLOW_CUSTOM_ENDPOINT.name}=true|false)",
    )
    conn.add_argument(
        "--concurrency",
        type=ascii_int,
        default=DEFAULT_CONCURRENCY,
        help=f"accounts read at once, 1-{MAX_CONCURRENCY} (default {DEFAULT_CONCURRENCY}; "
        "1 = sequential)",
    )
    conn.add_argument(
        "--read-timeout",
        type=ascii_int,
        default=int(READ_TIMEOUT_S),
        metavar="SECONDS",
        help=f"how long one answer may take before the read is tried again, 1-{MAX_READ_TIMEOUT_S} "
        f"(default {int(READ_TIMEOUT_S)}; a read that never gets one is a read error, exit 3)",
    )
    limits = parser.add_argument_group("thresholds (same as the policy pack's config)")
    limits.add_argument(
        "--min-blob-soft-delete-days",
        type=ascii_int,
        default=DEFAULTS.min_blob_soft_delete_days,
        help=f"1-{SOFT_DELETE_DAYS[-1]}, the days Azure can keep a deleted blob "
        f"(default {DEFAULTS.min_blob_soft_delete_days})",
    )
    limits.add_argument(
        "--min-container-soft-delete-days",
        type=ascii_int,
        default=DEFAULTS.min_container_soft_delete_days,
        help=f"1-{SOFT_DELETE_DAYS[-1]}, the days Azure can keep a deleted container "
        f"(default {DEFAULTS.min_container_soft_delete_days})",
    )
    limits.add_argument("--max-pending-days", type=ascii_int, default=DEFAULTS.max_pending_days)
    limits.add_argument(
        "--container",
        default=env(appsettings.CONTAINER.name, DEFAULTS.container),
        help=f"the protocol's container (env {appsettings.CONTAINER.name})",
    )
    limits.add_argument(
        "--deployment-principal",
        action="append",
        default=[],
        metavar="OBJECT_ID",
        help="an identity that deploys (pipeline, operator): exempt from the application-role "
        "rules; repeatable (the pack's deploymentPrincipalIds)",
    )
    parser.set_defaults(handler=run)


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    for option, days, most in (
        ("--min-blob-soft-delete-days", args.min_blob_soft_delete_days, SOFT_DELETE_DAYS[-1]),
        (
            "--min-container-soft-delete-days",
            args.min_container_soft_delete_days,
            SOFT_DELETE_DAYS[-1],
        ),
        ("--max-pending-days", args.max_pending_days, MAX_DAYS),
    ):
        if not 1 <= days <= most:
            raise UsageError(f"{option} must be between 1 and {most}")
    try:
        check_container_name(args.container, "--container")
    except SettingsError as error:
        raise UsageError(str(error)) from None
    return Thresholds(
        min_blob_soft_delete_days=args.min_blob_soft_delete_days,
        min_container_soft_delete_days=args.min_container_soft_delete_days,
        max_pending_days=args.max_pending_days,
        container=args.container,
        deployment_principal_ids=tuple(args.deployment_principal),
    )


def check_arm_endpoint(endpoint: str | None, allow_custom: bool) -> None:
    """`blob_safetynet.policies.sources.connection.check_arm_endpoint` for the option, its refusal a UsageError."""
    if endpoint is None:
        return
    try:
        arm_endpoint_rule(endpoint, allow_custom=allow_custom)
    except SettingsError as error:
        raise UsageError(str(error)) from None


def token_from_environment() -> str | None:
    """The pipeline's token, surrounding whitespace removed (a token file saved on Windows ends
    in CR LF, which an HTTP header refuses); anything else that is not a token is refused."""
    raw = os.environ.get(TOKEN_ENV)
    if raw is None:
        return None
    token = raw.strip()
    if not token:
        # Set but blank is a mistake (an empty secret variable), not a request for another login.
        raise UsageError(f"${TOKEN_ENV} is set but empty; unset it to use DefaultAzureCredential")
    if not _TOKEN.fullmatch(token):
        raise UsageError(
            f"${TOKEN_ENV} holds characters a bearer token cannot (RFC 6750: letters, digits "
            "and -._~+/ with trailing =); the value is not shown"
        )
    return token


def _suppressions(
    path: Path | None, horizon: suppressions.Horizon
) -> tuple[list[suppressions.Suppression], list[InputFile]]:
    if path is None:
        return [], []
    if not 1 <= horizon.days <= suppressions.MAX_HORIZON_DAYS:
        raise UsageError(
            f"--suppression-horizon-days must be between 1 and {suppressions.MAX_HORIZON_DAYS}"
        )
    try:
        accepted, file = suppressions.read(path, (rule.id for rule in RULES), horizon)
        return accepted, [file]
    except suppressions.SuppressionError as error:
        raise UsageError(f"--suppressions '{printable(str(path))}': {error}") from None


def _baseline(path: Path | None) -> Baseline | None:
    if path is None:
        return None
    try:
        return load_baseline(path)
    except HistoryError as error:
        raise UsageError(f"--baseline '{printable(str(path))}': {error}") from None


def _history(paths: list[Path]) -> list[HistoryRun]:
    runs = []
    for path in paths:
        try:
            runs.append(load_history(path))
        except HistoryError as error:
            raise UsageError(f"--history '{printable(str(path))}': {error}") from None
    return runs


def _outputs(args: argparse.Namespace) -> list[Output]:
    """The report files, checked before ARM is read; none may be one of the input files."""
    outputs = parse_outputs(args.output, args.format, RENDERERS)
    inputs = [args.suppressions, args.baseline, *args.history, *(args.from_file or ())]
    one_stdin(
        {
            "--from-file": args.from_file or [],
            "--suppressions": args.suppressions,
            "--baseline": args.baseline,
            "--history": args.history,
        }
    )
    files = [path for path in inputs if str(path) != STDIN]
    check_outputs(outputs, files)
    if args.stream is not None:
        check_outputs([Output("jsonl", args.stream)], [*files, *(o.path for o in outputs)])
    return outputs


def _api_version(args: argparse.Namespace) -> str | None:
    version: str | None = args.storage_api_version
    if version is not None and not _API_VERSION.fullmatch(version):
        raise UsageError("--storage-api-version must look like 2024-01-01 (or ...-preview)")
    return version


def _live_report(
    args: argparse.Namespace,
    limits: Thresholds,
    redactor: Redactor,
    spools: contextlib.ExitStack,
    streams: list[Stream],
) -> Callable[[], AuditReport | SpooledReport]:
    """The live audit, every option checked and the credential made before ARM is read; a
    fleet's results go to a `Spool` that `spools` closes, its --stream added to `streams`."""
    scope = scope_from(args)
    if args.stream is not None and not scope.fleet:
        raise UsageError(
            "--stream needs a fleet scope (--management-group, --all-subscriptions or "
            "several --subscription)"
        )
    allow_custom = parse_flag(args.allow_custom_endpoint, "--allow-custom-endpoint")
    check_arm_endpoint(args.arm_endpoint, allow_custom)
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        raise UsageError(f"--concurrency must be between 1 and {MAX_CONCURRENCY}")
    if not 1 <= args.read_timeout <= MAX_READ_TIMEOUT_S:
        raise UsageError(f"--read-timeout must be between 1 and {MAX_READ_TIMEOUT_S} seconds")
    version = _api_version(args) or STORAGE_API_VERSION
    token = token_from_environment()
    credential = StaticTokenCredential(token) if token else default_credential()
    throttle = SharedThrottle()
    options: dict[str, Any] = {
        "thresholds": limits,
        "arm_endpoint": args.arm_endpoint,
        "allow_custom_endpoint": allow_custom,
        "concurrency": args.concurrency,
        "storage_api_version": version,
        "throttle": throttle,
        "read_timeout_s": float(args.read_timeout),
    }
    if not scope.fleet:
        return lambda: run_audit(scope, credential, **options)

    def fleet() -> SpooledReport:
        spool = spools.enter_context(Spool())

        def judged(result: AccountResult) -> None:
            spool.append(result)
            stream.result(result)

        with Stream(args.stream, redactor, throttle) as stream:
            streams.append(stream)
            report = run_fleet_audit(
                scope, credential, on_result=judged, keep_results=False, **options
            )
            stream.finish(report)
        return SpooledReport(
            report.scope,
            report.thresholds,
            spool,
            report.errors,
            report.rules,
            report.seconds,
            report.requests,
        )

    return fleet


def _offline_report(args: argparse.Namespace, limits: Thresholds) -> Callable[[], AuditReport]:
    """The files judged: read now, so an unreadable one is bad usage before any output."""
    if args.account or args.resource_group or args.management_group or args.all_subscriptions:
        raise UsageError(
            "--from-file judges files; --account, --resource-group, --management-group and "
            "--all-subscriptions select live accounts"
        )
    try:
        report = run_offline_audit(args.from_file, limits, _api_version(args))
    except OfflineError as error:
        raise UsageError(f"--from-file {error}") from None
    return lambda: report


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as spools:
        return _run(args, spools)


def _run(args: argparse.Namespace, spools: contextlib.ExitStack) -> int:
    as_json = args.format == "json"
    redactor: Redactor = getattr(args, "redactor", None) or Redactor()
    streams: list[Stream] = []
    try:
        limits = thresholds_from(args)
        outputs = _outputs(args)
        judge = (
            _offline_report(args, limits)
            if args.from_file
            else _live_report(args, limits, redactor, spools, streams)
        )
        now = dt.datetime.now(dt.UTC)
        horizon = suppressions.Horizon(now.date(), args.suppression_horizon_days)
        accepted, suppressions_file = _suppressions(args.suppressions, horizon)
        baseline = _baseline(args.baseline)
        history = _history(args.history)
        category = sarif_category(args.sarif_category)
    except UsageError as error:
        return fail("audit", error.code, str(error), as_json)
    except SettingsError as error:
        return fail("audit", ExitCode.USAGE, str(error), as_json)
    report = judge()
    scope = report.scope
    inputs = [*(report.inputs if isinstance(report, AuditReport) else ()), *suppressions_file]
    inputs += [read.file for read in [baseline, *history] if read and read.file]

    def context_of(applied: suppressions.Applied) -> ReportContext:
        return ReportContext(applied, history, now, inputs=inputs, fail_on=args.fail_on)

    # The report quotes ARM's words, which may echo what was sent: scrubbed like every stream.
    if isinstance(report, SpooledReport):
        applied = apply_streaming(findings_of(report), accepted, now.date(), baseline)
        context = context_of(applied)
        written = write_spooled(outputs, report, context, category, redactor)
    else:
        context = context_of(suppressions.apply(report.findings, accepted, now.date(), baseline))
        renderers: dict[str, AuditRenderer] = {
            **RENDERERS,
            "sarif": functools.partial(render_sarif, category=category),
        }
        texts = {o.format: renderers[o.format](report, context) for o in outputs}
        written = write_outputs(outputs, texts, redactor, "audit")
    # After the other reports: a --stream that failed is an output error, not a lost audit.
    if failed_streams(streams, "audit") or not written:
        return ExitCode.USAGE
    warn(report, context, scope)
    return exit_code(report, context, args.fail_on)
