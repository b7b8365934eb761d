"""What a probe is, and the target it acts on.

A probe is one small unit like a rule: an id, a title, the catalogue rule ids it proves, what it
does, and a function that acts on the data plane and returns PASS, FAIL or NOT_VERIFIABLE with
the fact it observed. Unlike the rules, probes use the Blob SDK; the rules stay SDK-free.

Hygiene (enforced here, not left to each probe): every blob a probe creates is named under
`.safetynet/verify/<run id>/`, created create-only and tagged `state=pending` (so the lifecycle
rule collects it if the run dies), and recorded in the run's ledger with the state it was last
given; the run deletes them at the end under that state's tag guard, canaries excepted. A probe
gets blob clients only through `Target.blob`, which refuses names outside the run's prefix.
"""

from __future__ import annotations

import enum
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import (
    BlobClient,
    BlobServiceClient,
    BlobType,
    ContainerClient,
    ExponentialRetry,
)

from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.settings.endpoints import is_loopback_host
from blob_safetynet.settings.vocabulary import PENDING, STATE_TAG, VERIFY_PREFIX, tag_condition

if TYPE_CHECKING:
    from blob_safetynet.policies.probes.drill import RecoveryDrill

EXISTS_REFUSALS = frozenset({(409, "BlobAlreadyExists"), (412, "ConditionNotMet")})
"""A create-only write refused because the blob exists. Azurite answers 409 BlobAlreadyExists;
Azure documents 409 for If-None-Match: * on an existing blob in some operations and 412
ConditionNotMet in others
(https://learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations,
error codes: https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes).
Any other 409/412 (BlobImmutableDueToPolicy, LeaseIdMissing, ...) is a refusal for another
reason and proves nothing about the condition."""

CONDITION_NOT_MET = (412, "ConditionNotMet")
"""x-ms-if-tags that does not hold (Delete Blob, Set Blob Tags)."""

DEFAULT_SWEEPER_PERIOD = timedelta(minutes=5)
"""The infra program's default schedule, `0 */5 * * * *`."""


class ProbeOutcome(enum.StrEnum):
    PASS = "PASS"  # noqa: S105 (an outcome, not a password)
    FAIL = "FAIL"
    NOT_VERIFIABLE = "NOT_VERIFIABLE"


@dataclass(frozen=True)
class Observation:
    """What a probe saw: an outcome and the fact behind it, in the target's own terms."""

    outcome: ProbeOutcome
    detail: str
    seconds: float | None = None
    """How long the act the probe times took (the recovery drill's time to recover)."""


def passed(detail: str, seconds: float | None = None) -> Observation:
    return Observation(ProbeOutcome.PASS, detail, seconds)


def failed(detail: str) -> Observation:
    return Observation(ProbeOutcome.FAIL, detail)


def not_verifiable(detail: str) -> Observation:
    return Observation(ProbeOutcome.NOT_VERIFIABLE, detail)


class CouldNotActError(RuntimeError):
    """The identity in use could not do what every probe needs (write, tag or delete its own
    probe blobs): the run is incomplete, which is never a PASS and never a rule's FAIL."""


class TargetMissingError(RuntimeError):
    """The container does not exist: bad usage, not a finding."""


@dataclass(frozen=True)
class Probe:
    """One behavioural check: metadata plus the function that acts and judges."""

    id: str
    title: str
    proves: tuple[str, ...]
    """Rule ids of the catalogue (blob_safetynet/policies/rules) whose effect this probe shows; empty for the
    protocol's own guarantees, which no settings rule covers."""
    action: str
    """What it does, in one sentence (docs, SARIF help)."""
    reference: str
    """Where the expected statuses and error codes come from."""
    requests: int
    """Requests it makes on a live account (the run's budget is about 100)."""
    on_emulator: str
    """Its outcome on the embedded Azurite, and why (docs/verification.md)."""
    on_live: str
    """What it shows on a live Azure account (docs/verification.md)."""
    run: Callable[[Target], Observation]


@dataclass
class LedgerEntry:
    state: str | None
    """The state tag this run last gave the blob; None once deleted."""
    canary: bool = False


@dataclass
class Ledger:
    """Every blob this run created, with the state it last gave it."""

    entries: dict[str, LedgerEntry] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def created(self, name: str, *, canary: bool = False) -> None:
        with self.lock:
            self.entries[name] = LedgerEntry(PENDING, canary)

    def forget(self, name: str) -> None:
        """The create was refused outright: there is nothing to clean up."""
        with self.lock:
            self.entries.pop(name, None)

    def tagged(self, name: str, state: str) -> None:
        with self.lock:
            self.entries[name].state = state

    def deleted(self, name: str) -> None:
        with self.lock:
            self.entries[name].state = None

    def to_clean(self) -> list[tuple[str, str]]:
        """(name, state) of every live, non-canary blob of this run."""
        with self.lock:
            return [
                (name, entry.state)
                for name, entry in self.entries.items()
                if entry.state is not None and not entry.canary
            ]


class RequestCounter:
    """Counts every HTTP request the run's clients send (retries included), through the Blob
    SDK's `raw_request_hook`."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> None:
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        with self._lock:
            return self._count


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by time: `20261130T081200Z-1a2b3c`."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def loopback_host(url: str) -> str | None:
    """The host when `url` points at this machine (a local emulator), else None."""
    host = urlsplit(url).hostname or ""
    return host if is_loopback_host(host) else None


def status_and_code(error: HttpResponseError) -> tuple[int, str]:
    """The HTTP status and the service's own x-ms-error-code ('' when absent).

    The header comes first: the SDK rewrites `error_code` on some paths (a refused
    `upload_blob(overwrite=False)` is relabelled BlobAlreadyExists whatever the service said),
    and a probe must judge what the service answered."""
    response: Any = error.response
    code = str(response.headers.get("x-ms-error-code") or "") if response is not None else ""
    if not code:
        raw = getattr(error, "error_code", None)
        code = str(getattr(raw, "value", raw) or "")
    return error.status_code or 0, code


def describe_refusal(error: HttpResponseError) -> str:
    status, code = status_and_code(error)
    return f"{status} {code}".strip()


@dataclass(frozen=True)
class ProbeSettings:
    pending_days: int = Thresholds().max_pending_days
    """The lifecycle rule's days (the rule's own value when the audit read it, else the policy's
    maximum): a pending canary older than this plus two days must be gone."""
    sweeper_period: timedelta = DEFAULT_SWEEPER_PERIOD
    """The sweeper's schedule period: its heartbeat must be younger than three of them."""
    sweeper_table: str | None = None
    """The documents table the heartbeat must name (`schema.name` or `name`); None: any."""


class Target:
    """The container the probes act on, how to build more clients for it, and the run's ledger.

    `service` is the client of the identity in use; `second` an optional client of a second
    identity that lacks the uploader role; `client_options` are the transport options (request
    counter, TLS trust) every client of the run is built with, so raw probes (anonymous, a
    made-up key, plain HTTP) are counted and trusted the same way. `recovery` is the recovery
    drill's acts (the upload protocol and `safetynet recover`'s code), handed in by a layer that
    may import them (blob_safetynet/function/drill.py): the probes never import them.
    """

    def __init__(
        self,
        service: BlobServiceClient,
        container_name: str,
        *,
        run_id: str | None = None,
        second: BlobServiceClient | None = None,
        settings: ProbeSettings | None = None,
        counter: RequestCounter | None = None,
        client_options: dict[str, Any] | None = None,
        now: Callable[[], datetime] | None = None,
        recovery: RecoveryDrill | None = None,
    ) -> None:
        self.counter = counter or RequestCounter()
        self.recovery = recovery
        self.client_options = {
            "raw_request_hook": self.counter,
            # Two quick retries heal a transient fault; the SDK's default back-off (15 s and
            # more) would only make an unreachable or refusing target slow to report.
            "retry_policy": quick_retry(2),
            "connection_timeout": 10,
            **(client_options or {}),
        }
        self.service = rebuild(service, self.client_options)
        self.container: ContainerClient = self.service.get_container_client(container_name)
        self.second = (
            rebuild(second, self.client_options).get_container_client(container_name)
            if second is not None
            else None
        )
        self.now = now or (lambda: datetime.now(UTC))
        # Dated by the run's clock, so run ids (and history records) sort as the runs happened.
        self.run_id = run_id or new_run_id(self.now())
        self.prefix = f"{VERIFY_PREFIX}{self.run_id}/"
        self.settings = settings or ProbeSettings()
        self.ledger = Ledger()

    @property
    def url(self) -> str:
        return self.container.url

    @property
    def account_name(self) -> str:
        return str(self.service.account_name or "")

    @property
    def emulator_host(self) -> str | None:
        """The loopback host when the target is a local emulator."""
        return loopback_host(self.url)

    @property
    def uses_shared_key(self) -> bool:
        """True when the identity in use is the account key (a connection string)."""
        return not hasattr(self.service.credential, "get_token")

    def emulator_reason(self) -> str:
        return f"the endpoint {self.emulator_host} is a loopback address, a local emulator"

    def blob(self, suffix: str) -> BlobClient:
        """A client for `<prefix><suffix>`: probes can name nothing outside their run."""
        if not suffix or suffix.startswith("/") or ".." in suffix.split("/"):
            raise ValueError(f"bad probe blob suffix {suffix!r}")
        return self.container.get_blob_client(f"{self.prefix}{suffix}")

    def other_client(
        self, blob: BlobClient, credential: Any, url: str | None = None, *, retries: int = 2
    ) -> BlobClient:
        """The same blob through another credential (None: anonymous), same transport options."""
        options = {**self.client_options, "retry_policy": quick_retry(retries)}
        return BlobClient.from_blob_url(url or blob.url, credential=credential, **options)

    def service_once(self) -> BlobServiceClient:
        """The identity in use without retries, for calls whose failure is itself the answer."""
        return rebuild(self.service, {**self.client_options, "retry_policy": quick_retry(0)})

    def create(self, blob: BlobClient, data: bytes, *, canary: bool = False) -> dict[str, Any]:
        """Create the probe blob create-only, tagged pending; CouldNotActError when refused.

        The name enters the ledger before the request: when an answer is lost (a dropped
        connection, an interrupt) the blob may exist, and clean-up must still find it (a 404
        there is fine). Only an outright refusal takes it out again; a 409 may be this run's
        own earlier attempt, retried by the SDK."""
        self.ledger.created(blob.blob_name, canary=canary)
        try:
            answer = put_pending_if_missing(blob, data)
        except HttpResponseError as error:
            if error.status_code != 409:
                self.ledger.forget(blob.blob_name)
            raise_if_cannot_act(error, f"create {blob.blob_name}")
            raise
        return answer

    def set_state(self, blob: BlobClient, expected: str, state: str) -> None:
        """The protocol's guarded transition on a probe blob (the guard is what seal probes test)."""
        try:
            blob.set_blob_tags({STATE_TAG: state}, if_tags_match_condition=tag_condition(expected))
        except HttpResponseError as error:
            raise_if_cannot_act(error, f"tag {blob.blob_name}")
            raise
        self.ledger.tagged(blob.blob_name, state)

    def delete(self, blob: BlobClient, state: str) -> None:
        """Delete a probe blob under its state's tag guard."""
        try:
            blob.delete_blob(
                delete_snapshots="include", if_tags_match_condition=tag_condition(state)
            )
        except HttpResponseError as error:
            raise_if_cannot_act(error, f"delete {blob.blob_name}")
            raise
        self.ledger.deleted(blob.blob_name)


def raise_if_cannot_act(error: HttpResponseError, what: str) -> None:
    """401/403 on the run's own probe blobs: the identity cannot do what verification needs;
    404 ContainerNotFound: the target is wrong."""
    status, code = status_and_code(error)
    if status in (401, 403):
        raise CouldNotActError(f"{what}: {status} {code}".strip()) from None
    if code == "ContainerNotFound":
        raise TargetMissingError(f"{what}: 404 ContainerNotFound") from None


def put_pending_if_missing(blob: BlobClient, data: bytes) -> dict[str, Any]:
    """The protocol's create step: one Put Blob, tagged pending, refused if the name exists."""
    answer: dict[str, Any] = blob.upload_blob(
        data,
        blob_type=BlobType.BLOCKBLOB,
        overwrite=False,
        tags={STATE_TAG: PENDING},
        match_condition=MatchConditions.IfMissing,
    )
    return answer


def quick_retry(retries: int) -> ExponentialRetry:
    return ExponentialRetry(
        initial_backoff=1,
        increment_base=2,
        retry_total=retries,
        retry_connect=retries,
        retry_read=retries,
        retry_status=retries,
    )


def rebuild(service: BlobServiceClient, options: dict[str, Any]) -> BlobServiceClient:
    """The same endpoint and credential with the run's transport options added."""
    return BlobServiceClient(service.url, credential=service.credential, **options)


def payload(label: str) -> bytes:
    """Distinct small bytes for one write, so a later read shows which write won."""
    return f"safetynet verify {label} {secrets.token_hex(16)}\n".encode()
