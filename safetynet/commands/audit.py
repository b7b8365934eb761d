"""`safetynet audit`: judge live storage accounts by the policy rules, in a pipeline's format.

Exit 0: no failing rule at or above --fail-on. 1: at least one. 2: bad usage. 3: nothing
failed but the audit is incomplete (authentication failed, a permission is missing, or ARM
answered something unreadable), so a pipeline never mistakes "could not look" for "compliant".
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from policies.audit import (
    DEFAULT_CONCURRENCY,
    STORAGE_API_VERSION,
    Scope,
    StaticTokenCredential,
    default_credential,
    run_audit,
)
from policies.model import Thresholds
from policies.report import RENDERERS
from policies.rules import Severity

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3
TOKEN_ENV = "SAFETYNET_ARM_TOKEN"  # noqa: S105 (the variable's name, not a token)
NO_FAIL = "none"
_ACCOUNT_ID = re.compile(
    r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)"
    r"/providers/Microsoft\.Storage/storageAccounts/(?P<name>[^/]+)/?",
    re.IGNORECASE,
)
DEFAULTS = Thresholds()


class UsageError(Exception):
    """Bad options: the message says which and why."""


_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser(
        "audit",
        help="audit live storage accounts against the policy rules",
        description=(
            "Read storage accounts through Azure Resource Manager and judge them by the same "
            f"rules as the policy pack. Authenticates with DefaultAzureCredential, or with the "
            f"bearer token in ${TOKEN_ENV} when it is set. Exit codes: 0 ok, 1 a rule at or "
            "above --fail-on failed, 2 bad usage, 3 incomplete (auth/permission/unreadable)."
        ),
    )
    where = parser.add_argument_group("what to audit (one account, a resource group, or all)")
    where.add_argument(
        "--subscription",
        default=env("AZURE_SUBSCRIPTION_ID"),
        help="subscription id (env AZURE_SUBSCRIPTION_ID)",
    )
    where.add_argument("--resource-group", help="only accounts in this resource group")
    where.add_argument(
        "--account",
        help="one account: its name (needs --resource-group) or its full resource id",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=sorted(RENDERERS), default="table")
    out.add_argument("--output", type=Path, help="write the report here instead of stdout")
    out.add_argument(
        "--fail-on",
        choices=[*(s.value for s in reversed(Severity)), NO_FAIL],
        default=Severity.HIGH.value,
        help="exit 1 when a rule of this severity or above fails (default high)",
    )
    conn = parser.add_argument_group("connection")
    conn.add_argument(
        "--arm-endpoint",
        default=env("SAFETYNET_ARM_ENDPOINT"),
        help="Resource Manager URL for sovereign clouds or tests (env SAFETYNET_ARM_ENDPOINT)",
    )
    conn.add_argument(
        "--storage-api-version",
        default=STORAGE_API_VERSION,
        help=f"Microsoft.Storage api-version to read with (default {STORAGE_API_VERSION}, "
        "pinned; pass an older one where a cloud lags)",
    )
    conn.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"accounts read at once (default {DEFAULT_CONCURRENCY}; 1 = sequential)",
    )
    limits = parser.add_argument_group("thresholds (same as the policy pack's config)")
    limits.add_argument(
        "--min-blob-soft-delete-days", type=int, default=DEFAULTS.min_blob_soft_delete_days
    )
    limits.add_argument("--max-pending-days", type=int, default=DEFAULTS.max_pending_days)
    limits.add_argument(
        "--container",
        default=env("SAFETYNET_CONTAINER", DEFAULTS.container),
        help="the protocol's container (env SAFETYNET_CONTAINER)",
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


def scope_from(args: argparse.Namespace) -> Scope:
    """The audit's scope from the options; raises UsageError when they do not name one."""
    account, group, subscription = args.account, args.resource_group, args.subscription
    if account and account.startswith("/"):
        match = _ACCOUNT_ID.fullmatch(account)
        if match is None:
            raise UsageError(f"--account {account!r} is not a storage account resource id")
        if subscription and subscription.lower() != match["sub"].lower():
            raise UsageError("--account names another subscription than --subscription")
        return Scope(match["sub"], match["rg"], match["name"])
    if not subscription:
        raise UsageError("--subscription (or AZURE_SUBSCRIPTION_ID) is required")
    if account and not group:
        raise UsageError("--account NAME needs --resource-group (or pass the full resource id)")
    return Scope(subscription, group, account)


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    if args.min_blob_soft_delete_days < 1 or args.max_pending_days < 1:
        raise UsageError("--min-blob-soft-delete-days and --max-pending-days must be >= 1")
    return Thresholds(
        min_blob_soft_delete_days=args.min_blob_soft_delete_days,
        max_pending_days=args.max_pending_days,
        container=args.container,
        deployment_principal_ids=tuple(args.deployment_principal),
    )


def _check_endpoint(endpoint: str | None) -> None:
    if endpoint is None:
        return
    url = urlsplit(endpoint)
    if url.scheme != "https" or not url.netloc:
        raise UsageError(
            f"--arm-endpoint {endpoint!r} must be an https:// URL (tokens are never sent "
            "over plain HTTP)"
        )


def run(args: argparse.Namespace) -> int:
    try:
        scope = scope_from(args)
        limits = thresholds_from(args)
        _check_endpoint(args.arm_endpoint)
        if args.concurrency < 1:
            raise UsageError("--concurrency must be >= 1")
        if not _API_VERSION.fullmatch(args.storage_api_version):
            raise UsageError("--storage-api-version must look like 2024-01-01 (or ...-preview)")
    except UsageError as error:
        print(f"safetynet audit: {error}", file=sys.stderr)
        return EXIT_USAGE
    token = os.environ.get(TOKEN_ENV)
    credential = StaticTokenCredential(token) if token else default_credential()
    report = run_audit(
        scope,
        credential,
        thresholds=limits,
        arm_endpoint=args.arm_endpoint,
        concurrency=args.concurrency,
        storage_api_version=args.storage_api_version,
    )
    text = RENDERERS[args.format](report)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    for problem in report.all_errors:
        where = problem.account or scope.label
        print(
            f"safetynet audit: {where}: {problem.operation}: {problem.kind.value}: "
            f"{problem.message}",
            file=sys.stderr,
        )
    if args.fail_on != NO_FAIL and report.failures(Severity(args.fail_on)):
        return EXIT_FAILED
    if report.all_errors:
        return EXIT_INCOMPLETE
    return EXIT_OK
