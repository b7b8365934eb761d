"""One verification run: every probe in order, then the run's own blobs deleted (canaries kept)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from blob_safetynet.policies.probes.base import (
    CouldNotActError,
    Observation,
    Probe,
    ProbeOutcome,
    Target,
    TargetMissingError,
    describe_refusal,
    not_verifiable,
    status_and_code,
)
from blob_safetynet.policies.rules import Finding
from blob_safetynet.settings.vocabulary import PENDING, RETIRED, STATE_TAG, tag_condition

DELETABLE_STATES = (PENDING, RETIRED)
"""The states this project deletes blobs in (invariant I3)."""


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    outcome: ProbeOutcome
    detail: str
    requests: int
    seconds: float | None = None
    """What the probe timed (the recovery drill: its time to recover), when it timed anything."""


@dataclass
class VerificationRun:
    """What one run found, and whether it could act at all."""

    target: str
    """The endpoint and container, never a credential or a query string."""
    run_id: str
    results: list[ProbeResult] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    """Why the run could not act (authentication, permission, unreachable): exit 3."""
    leftovers: list[str] = field(default_factory=list)
    """Probe blobs the clean-up could not delete (named, so a person can)."""
    requests: int = 0
    seconds: float = 0.0
    settings: list[Finding] | None = None
    """The settings rules judged on the same account (`--subscription/--account`), if asked."""
    settings_errors: list[str] = field(default_factory=list)

    def outcomes(self, outcome: ProbeOutcome) -> list[ProbeResult]:
        return [r for r in self.results if r.outcome is outcome]


Progress = Callable[[int, int, Probe], None]


def describe_target(target: Target) -> str:
    """`https://host/path` of the container: credentials and query strings never appear."""
    return target.url.split("?", 1)[0]


def run_probes(
    target: Target,
    probes: Sequence[Probe],
    *,
    on_progress: Progress | None = None,
    check_connection: bool = True,
) -> VerificationRun:
    """Run `probes` in order against `target`; TargetMissingError when the container is absent.

    `check_connection=False` leaves out the one request before the probes, for a target whose
    own endpoint is a double that answers only what one probe's judgement needs."""
    started = time.perf_counter()
    run = VerificationRun(target=describe_target(target), run_id=target.run_id)
    blocked = _token_problem(target) or (_connection_problem(target) if check_connection else None)
    if blocked is not None:
        run.incomplete.append(blocked)
    try:
        for number, probe in enumerate(probes, start=1):
            if on_progress is not None:
                on_progress(number, len(probes), probe)
            if blocked is not None:
                # Without a token, an answering endpoint or an accepted key nothing can act;
                # asking again only takes time.
                run.results.append(
                    ProbeResult(probe, ProbeOutcome.NOT_VERIFIABLE, f"not run: {blocked}", 0)
                )
                continue
            before = target.counter.count
            try:
                observation = _run_one(probe, target, run)
            except ClientAuthenticationError as error:
                blocked = f"no credential for the target ({type(error).__name__})"
                run.incomplete.append(f"{probe.id}: {blocked}")
                observation = Observation(ProbeOutcome.NOT_VERIFIABLE, blocked)
            run.results.append(
                ProbeResult(
                    probe,
                    observation.outcome,
                    observation.detail,
                    target.counter.count - before,
                    observation.seconds,
                )
            )
    finally:
        run.leftovers = clean_up(target)
        run.requests = target.counter.count
        run.seconds = time.perf_counter() - started
    return run


STORAGE_SCOPE = "https://storage.azure.com/.default"


def _token_problem(target: Target) -> str | None:
    """Ask a token credential once, before any probe: the SDK would retry a missing credential
    with back-off on every request."""
    credential = target.service.credential
    if not hasattr(credential, "get_token"):
        return None
    try:
        credential.get_token(STORAGE_SCOPE)
    except ClientAuthenticationError as error:
        return f"no credential for the target ({type(error).__name__})"
    return None


REJECTED_KEY_CODES = ("AuthenticationFailed", "AuthorizationFailure")
"""A 403 for a shared key's signature: Azure answers AuthenticationFailed
(https://learn.microsoft.com/en-us/rest/api/storageservices/common-rest-api-error-codes), the
pinned Azurite AuthorizationFailure (measured: a wrong AccountKey, on a container that exists
and on one that does not)."""


def _connection_problem(target: Target) -> str | None:
    """One request before any probe (Get Container Properties): an endpoint that does not answer
    or a shared key the service rejects would only repeat as every probe's NOT_VERIFIABLE, after
    each probe's retries. Anything else is left to the probes; ContainerNotFound is raised."""
    try:
        target.container.get_container_properties()
    except (ServiceRequestError, ServiceResponseError) as error:
        return f"the endpoint did not answer ({type(error).__name__}); is it running, is the URL right?"
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if code == "ContainerNotFound":
            raise TargetMissingError(
                f"{target.container.container_name}: 404 ContainerNotFound"
            ) from None
        if status == 403 and code in REJECTED_KEY_CODES and _shared_key(target):
            return (
                f"the service rejected the shared key ({status} {code}): the AccountKey of the "
                "connection string is likely wrong (`safetynet local` prints the emulator's)"
            )
    return None


def _shared_key(target: Target) -> bool:
    """Whether the run's client signs with an account key (a connection string)."""
    return type(target.service.credential).__name__ == "SharedKeyCredentialPolicy"


def _run_one(probe: Probe, target: Target, run: VerificationRun) -> Observation:
    try:
        return probe.run(target)
    except TargetMissingError:
        raise
    except CouldNotActError as error:
        run.incomplete.append(f"{probe.id}: {error}")
        return not_verifiable(f"the identity in use could not act: {error}")
    except HttpResponseError as error:
        if isinstance(error, ClientAuthenticationError) and error.status_code is None:
            raise  # the credential itself failed: run_probes stops asking it
        status, code = status_and_code(error)
        if code == "ContainerNotFound":
            raise TargetMissingError(f"{probe.id}: 404 ContainerNotFound") from None
        if status in (401, 403):
            run.incomplete.append(f"{probe.id}: {status} {code}")
        return not_verifiable(f"unexpected answer {describe_refusal(error)}")
    except (ServiceRequestError, ServiceResponseError) as error:
        run.incomplete.append(f"{probe.id}: endpoint unreachable ({type(error).__name__})")
        return not_verifiable(f"the endpoint did not answer ({type(error).__name__})")
    except AzureError as error:
        # No HTTP answer to judge (a closed stream, a transport fault): the run could not act,
        # which must exit 3, never crash into the exit code 1 that means FAIL. Only the type is
        # shown: transport messages can carry a request URL with a SAS signature.
        run.incomplete.append(
            f"{probe.id}: the SDK failed without an answer ({type(error).__name__})"
        )
        return not_verifiable(f"the SDK failed without an answer ({type(error).__name__})")


def clean_up(target: Target) -> list[str]:
    """Delete every live blob this run created (canaries excepted); the names it could not.

    Like everything in this project (invariant I3), it deletes only what is tagged pending or
    retired: a probe blob left committed is first set back to pending, under the guard of the
    state this run gave it, then deleted under the pending guard.
    """
    leftovers = []
    for name, state in target.ledger.to_clean():
        blob = target.container.get_blob_client(name)
        try:
            if state not in DELETABLE_STATES:
                blob.set_blob_tags(
                    {STATE_TAG: PENDING}, if_tags_match_condition=tag_condition(state)
                )
                state = PENDING
            blob.delete_blob(
                delete_snapshots="include", if_tags_match_condition=tag_condition(state)
            )
        except HttpResponseError as error:
            if error.status_code == 404:
                target.ledger.deleted(name)
                continue
            leftovers.append(f"{name} ({describe_refusal(error)})")
            continue
        except AzureError as error:
            leftovers.append(f"{name} ({type(error).__name__})")
            continue
        target.ledger.deleted(name)
    return leftovers
