"""`safetynet verify`: prove, by acting on the data plane, that an account enforces its nets.

No target: an embedded Azurite, started and stopped here. Exit codes (`blob_safetynet.cli.exitcodes`):
0 nothing failed; 1 a probe (or, with --subscription/--account, a settings rule) failed; 2 bad
usage; 3 nothing failed but the run could not act (authentication, a missing permission, an
unreachable endpoint, probe blobs left behind), so "could not look" never passes as "holds".
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace

from azure.core.credentials import TokenCredential
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.commands.audit import check_arm_endpoint, token_from_environment
from blob_safetynet.cli.commands.audit_scope import scope_from
from blob_safetynet.cli.commands.common import CommandError, UsageError, ascii_int, fail, parse_flag
from blob_safetynet.cli.commands.outputs import (
    Output,
    add_output_options,
    add_sarif_category,
    check_outputs,
    parse_outputs,
    sarif_category,
    write_outputs,
)
from blob_safetynet.cli.commands.target import (
    TARGET_ERRORS,
    add_blob_options,
    classify,
    open_blob_service_client,
)
from blob_safetynet.cli.conventions import terminal_progress
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite, AzuriteError
from blob_safetynet.function.drill import recovery_drill
from blob_safetynet.policies.probes import (
    PROBES,
    Probe,
    ProbeOutcome,
    ProbeSettings,
    Target,
    run_probes,
)
from blob_safetynet.policies.probes.base import TargetMissingError
from blob_safetynet.policies.probes.runner import VerificationRun, describe_target
from blob_safetynet.policies.probes.writes import CONCURRENT_WRITERS
from blob_safetynet.policies.reports.formats import VERIFY_RENDERERS
from blob_safetynet.policies.reports.sarif import render_verify_sarif
from blob_safetynet.policies.rules import Finding, Outcome
from blob_safetynet.policies.rules.model import UNKNOWN, Thresholds
from blob_safetynet.policies.sources.connection import StaticTokenCredential, default_credential
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.protocol.pooling import pooled_transport
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.redaction import (
    Redactor,
    display_connection_string,
    display_url,
    printable,
)
from blob_safetynet.settings.vocabulary import PENDING, STATE_TAG

DEFAULTS = Thresholds()
SECOND_FIELDS = ("CLIENT_ID", "TENANT_ID", "CLIENT_SECRET", "FEDERATED_TOKEN_FILE")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    parser = subparsers.add_parser(
        "verify",
        help="prove on the data plane that an account enforces its safety nets",
        description=(
            "Act on a container (create-only uploads, tag-guarded deletes, undelete, refused "
            "keys and anonymous reads, ...) and report per probe PASS, FAIL or NOT_VERIFIABLE. "
            "Without a target, an embedded Azurite is started and stopped. Probe blobs live "
            "under .safetynet/verify/<run id>/ and are deleted at the end (canaries excepted)."
        ),
    )
    add_blob_options(parser)
    parser.add_argument(
        "--second-credential",
        metavar="ENV_PREFIX",
        help="a second identity WITHOUT the uploader role, read from <PREFIX>_CLIENT_ID and "
        "<PREFIX>_TENANT_ID plus <PREFIX>_CLIENT_SECRET or <PREFIX>_FEDERATED_TOKEN_FILE (or a "
        "managed identity with only <PREFIX>_CLIENT_ID); its tag write must be refused (403)",
    )
    parser.add_argument(
        "--max-pending-days",
        type=ascii_int,
        default=DEFAULTS.max_pending_days,
        help="the lifecycle rule's days when the settings are not read (default "
        f"{DEFAULTS.max_pending_days}, the policy's maximum)",
    )
    parser.add_argument(
        "--sweeper-period",
        default=appsettings.SWEEPER_PERIOD.read(os.environ),
        help="the sweeper's schedule period: its heartbeat must be younger than three (default 5m)",
    )
    parser.add_argument(
        "--table",
        default=env(appsettings.TABLE.name),
        help="the documents table (name or schema.name) the sweeper's heartbeat must name "
        f"(env {appsettings.TABLE.name}; default: any table)",
    )
    settings = parser.add_argument_group("settings verdict beside each behaviour verdict")
    settings.add_argument("--subscription", default=env(appsettings.AZURE_SUBSCRIPTION_ID.name))
    settings.add_argument("--resource-group")
    settings.add_argument(
        "--account", help="the account's name (with --resource-group) or resource id"
    )
    settings.add_argument("--arm-endpoint", default=env(appsettings.ARM_ENDPOINT.name))
    add_sarif_category(
        add_output_options(parser, VERIFY_RENDERERS, "run"), "safetynet-verify/<host/container>/"
    )
    parser.set_defaults(handler=run)


def second_credential(prefix: str, environ: dict[str, str] | None = None) -> TokenCredential:
    """The second identity from `<prefix>_*` variables; UsageError names what is missing."""
    values = environ if environ is not None else dict(os.environ)
    get = {field: values.get(f"{prefix}_{field}", "").strip() for field in SECOND_FIELDS}
    if not get["CLIENT_ID"]:
        raise UsageError(f"--second-credential {prefix}: {prefix}_CLIENT_ID is not set")
    if (get["CLIENT_SECRET"] or get["FEDERATED_TOKEN_FILE"]) and not get["TENANT_ID"]:
        raise UsageError(f"--second-credential {prefix}: {prefix}_TENANT_ID is not set")
    try:
        return _second_identity(get)
    except ValueError as error:
        # azure-identity checks the tenant id's characters when the credential is made.
        if "tenant" in str(error).lower():
            raise UsageError(
                f"--second-credential {prefix}: {prefix}_TENANT_ID is not a tenant id (a GUID "
                "or a domain name of letters, digits, '.' and '-')"
            ) from None
        raise UsageError(
            f"--second-credential {prefix}: the {prefix}_* variables were refused: "
            f"{printable(str(error).splitlines()[0] if str(error) else type(error).__name__)}"
        ) from None


def _second_identity(get: dict[str, str]) -> TokenCredential:
    from azure import identity  # heavy import, only when a second identity is asked for

    if get["CLIENT_SECRET"]:
        return identity.ClientSecretCredential(
            get["TENANT_ID"], get["CLIENT_ID"], get["CLIENT_SECRET"]
        )
    if get["FEDERATED_TOKEN_FILE"]:
        return identity.WorkloadIdentityCredential(
            tenant_id=get["TENANT_ID"],
            client_id=get["CLIENT_ID"],
            token_file_path=get["FEDERATED_TOKEN_FILE"],
        )
    return identity.ManagedIdentityCredential(client_id=get["CLIENT_ID"])


def _wants_settings(args: argparse.Namespace) -> bool:
    return bool(args.resource_group or args.account)


def _validate(args: argparse.Namespace) -> ProbeSettings:
    if not 1 <= args.max_pending_days <= 36_500:
        raise UsageError("--max-pending-days must be between 1 and 36500")
    check_arm_endpoint(
        args.arm_endpoint, parse_flag(args.allow_custom_endpoint, "--allow-custom-endpoint")
    )
    if args.second_credential and not args.account_url:
        raise UsageError("--second-credential needs --account-url (RBAC exists only on Azure)")
    if _wants_settings(args):
        if not args.account:
            raise UsageError("--resource-group needs --account: settings are read for one account")
        scope_from(args)
    return ProbeSettings(
        pending_days=args.max_pending_days,
        sweeper_period=appsettings.SWEEPER_PERIOD.duration(args.sweeper_period, "--sweeper-period"),
        sweeper_table=_table(args.table),
    )


def _table(text: str | None) -> str | None:
    if text is None:
        return None
    names = appsettings.table_names(text, "", table_name=f"--table ({appsettings.TABLE.name})")
    return names.qualified


@contextmanager
def _blob_service_client(args: argparse.Namespace) -> Iterator[tuple[BlobServiceClient, str]]:
    """The service to probe and a description of where it came from."""
    if args.account_url or args.connection_string:
        yield open_blob_service_client(args), ""
        return
    with Azurite() as emulator:
        service = BlobServiceClient.from_connection_string(emulator.connection_string)
        with suppress(ResourceExistsError):
            service.create_container(args.container)
        yield service, " (embedded Azurite, stopped at the end)"


@dataclass
class SettingsVerdicts:
    findings: list[Finding]
    errors: list[str]
    pending_days: int | None
    """The days of the account's lifecycle rule for pending blobs, when it was read."""


def _read_settings(args: argparse.Namespace) -> SettingsVerdicts:
    """Judge the settings rules on the account, as `safetynet audit --account` does."""
    token = token_from_environment()
    credential = StaticTokenCredential(token) if token else default_credential()
    report = run_audit(
        scope_from(args),
        credential,
        thresholds=Thresholds(container=args.container, max_pending_days=args.max_pending_days),
        arm_endpoint=args.arm_endpoint,
        allow_custom_endpoint=parse_flag(args.allow_custom_endpoint, "--allow-custom-endpoint"),
        concurrency=1,
    )
    errors = [
        f"{e.account or report.scope.label}: {e.operation}: {e.kind.value}: {e.message}"
        for e in report.all_errors
    ]
    days: list[int] = []
    for result in report.results:
        rules = result.account.lifecycle_rules
        if rules is UNKNOWN:
            continue
        days += [
            rule.delete_after_days
            for rule in rules
            if isinstance(rule.delete_after_days, int)
            and rule.tag_filters is not UNKNOWN
            and any((f.name, f.op, f.value) == (STATE_TAG, "==", PENDING) for f in rule.tag_filters)
        ]
    return SettingsVerdicts(report.findings, errors, min(days) if days else None)


def _progress(number: int, total: int, probe: Probe) -> None:
    print(f"\r[{number:>2}/{total}] {probe.id:<28}", end="", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    try:
        settings = _validate(args)
        outputs = parse_outputs(args.output, args.format, VERIFY_RENDERERS)
        check_outputs(outputs)
        sarif_category(args.sarif_category)
        if _wants_settings(args):
            token_from_environment()  # a malformed token is bad usage, found before acting
        second = second_credential(args.second_credential) if args.second_credential else None
    except CommandError as error:
        return fail("verify", error.code, str(error), as_json)
    except SettingsError as error:
        return fail("verify", ExitCode.USAGE, str(error), as_json)
    try:
        with _blob_service_client(args) as (service, origin), recovery_drill() as drill:
            verdicts = _read_settings(args) if _wants_settings(args) else None
            if verdicts is not None and verdicts.pending_days is not None:
                settings = replace(settings, pending_days=verdicts.pending_days)
            second_service = (
                BlobServiceClient(args.account_url, credential=second)
                if second is not None
                else None
            )
            target = Target(
                service,
                args.container,
                second=second_service,
                settings=settings,
                client_options={"transport": pooled_transport(CONCURRENT_WRITERS, shared=True)},
                recovery=drill,
            )
            progress = terminal_progress(args)
            if progress:
                where = describe_target(target)
                print(f"safetynet verify: run {target.run_id} on {where}{origin}", file=sys.stderr)
            result = run_probes(target, PROBES, on_progress=_progress if progress else None)
            if progress:
                print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)
            if verdicts is not None:
                result.settings, result.settings_errors = verdicts.findings, verdicts.errors
    except TargetMissingError:
        message = f"container '{printable(args.container)}' does not exist"
        return _failed(args, outputs, ExitCode.USAGE, message)
    except AzuriteError as error:
        return _failed(args, outputs, ExitCode.USAGE, str(error))
    except CommandError as error:
        return _failed(args, outputs, error.code, str(error))
    except TARGET_ERRORS as error:
        refused = classify(error, args, started=False)
        return _failed(args, outputs, refused.code, str(refused))
    if not _write(args, outputs, result):
        return ExitCode.USAGE
    return exit_code(result)


def _write(args: argparse.Namespace, outputs: list[Output], result: VerificationRun) -> bool:
    # The report quotes ARM's and the service's words, which may echo what was sent.
    redactor: Redactor = getattr(args, "redactor", None) or Redactor()
    renderers: dict[str, Callable[[VerificationRun], str]] = {
        **VERIFY_RENDERERS,
        "sarif": functools.partial(
            render_verify_sarif, category=sarif_category(args.sarif_category)
        ),
    }
    texts = {o.format: renderers[o.format](result) for o in outputs}
    return write_outputs(outputs, texts, redactor, "verify")


def _failed(args: argparse.Namespace, outputs: list[Output], code: int, message: str) -> int:
    """A run that stopped before its probes: every report file still says why (a pipeline's
    upload step refuses an empty SARIF or JUnit file), stdout and stderr as before."""
    if args.account_url:
        where = display_url(args.account_url, "account URL")
    elif args.connection_string:
        where = display_connection_string(args.connection_string)
    else:
        where = "embedded Azurite"
    stopped = VerificationRun(
        target=f"{where} container {args.container}",
        run_id="-",
        incomplete=[f"the run stopped before its probes: {message}"],
    )
    _write(args, [o for o in outputs if o.path is not None], stopped)
    return fail("verify", ExitCode(code), message, args.format == "json")


def exit_code(result: VerificationRun) -> int:
    """1 on any FAIL (probe or settings rule), else 3 when the run could not act, else 0."""
    settings_failed = any(f.outcome is Outcome.FAIL for f in result.settings or [])
    if result.outcomes(ProbeOutcome.FAIL) or settings_failed:
        return ExitCode.FINDINGS
    if result.incomplete or result.settings_errors or result.leftovers:
        return ExitCode.INCOMPLETE
    return ExitCode.OK
