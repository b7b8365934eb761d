"""The fleet audit: storage accounts of management groups and subscriptions, listed by Resource
Graph (blob_safetynet/policies/sources/graph.py) with their role assignments
(blob_safetynet/policies/sources/fleet_roles.py) and private endpoint connections, then read per
account through ARM for what Resource Graph does not hold.

Which child resources Resource Graph holds, and why the rest is read per account:
docs/policies.md ("A fleet"). Per account, the fleet reads the blob service, the containers and
the management policy; the local users only where the account's settings leave its rule to them
(`Prefetched.local_users_from_settings`); the Defender for Storage setting only where the
subscription's plan does not report every account covered or none
(`Prefetched.defender_from_plan`); the management locks from one lock list per subscription
(`Prefetched.locks_from_subscription`), the backup instances from the subscription's Backup
vaults (`Prefetched.backups_from_subscription`), the blob diagnostic settings per account
(`extensions.py`). Each of these leaves the verdicts of the per-account path
(`live.run_audit`) unchanged (tests/policies/test_fleet_reads.py).

The subscriptions a scope should hold and Resource Graph does not return are reported before
its accounts are listed (`fleet_scope.py`). A scope whose listing fails is a scope-level read
error (exit 3), and the accounts listed before the failure are still judged; a row without a
storage account id is an input error of its scope, never judged; an account listed twice (a
subscription inside a listed management group) is judged once. A scope whose role assignment
query fails has its accounts' roles read per account, as the single-subscription audit reads
them (never judged on missing data). Accounts are dealt to the workers round-robin over their
subscriptions (`Dealer`), so that every subscription's ARM read budget is spent at once.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from azure.core.credentials import TokenCredential

from blob_safetynet.policies.rules.model import Thresholds, arm_fold
from blob_safetynet.policies.sources.connection import READ_TIMEOUT_S, check_arm_endpoint
from blob_safetynet.policies.sources.fleet_roles import (
    ROLE_ASSIGNMENTS_QUERY,
    RoleIndex,
    definitions_query,
)
from blob_safetynet.policies.sources.fleet_scope import Target, targets
from blob_safetynet.policies.sources.graph import (
    LISTING_ERRORS,
    graph_client,
    graph_pages,
    listing_error,
)
from blob_safetynet.policies.sources.live import DEFAULT_CONCURRENCY, STORAGE_API_VERSION, ArmReader
from blob_safetynet.policies.sources.reads import (
    FetchedOnce,
    Prefetched,
    is_account_id,
    judge,
    subscription_of,
)
from blob_safetynet.policies.sources.results import (
    AccountResult,
    AuditReport,
    ErrorKind,
    ReadError,
    Scope,
)
from blob_safetynet.policies.sources.throttle import SharedThrottle

if TYPE_CHECKING:
    from azure.mgmt.resourcegraph import ResourceGraphClient

IN_FLIGHT_PER_WORKER = 2
"""Accounts queued per worker: listing runs ahead of judging by this much, no more."""
LOOKAHEAD = 250
"""Listed accounts held back to deal them round-robin over their subscriptions (a bound on
memory whatever the fleet's size); the listing's name order already mixes subscriptions, so
a few hundred give every subscription of a large fleet some accounts at once."""
DEALER_POLL_S = 0.05
"""How often a dealer that holds only accounts of closed gates looks again."""

Judged = Callable[[AccountResult], None]
T = TypeVar("T")


class Dealer(Generic[T]):
    """Hands listed accounts to the pool round-robin over their subscriptions, so that every
    subscription's ARM read budget is spent at once: an account whose subscription's gate is
    closed (a 429) waits while another subscription's can go, and no subscription holds more
    than its share of the workers (a worker waiting at a closed gate is a worker lost to the
    other subscriptions). At most `lookahead` listed accounts are held, whatever the fleet's
    size."""

    def __init__(
        self,
        submit: Callable[[T], Future[Any]],
        *,
        key: Callable[[T], str],
        concurrency: int,
        throttle: SharedThrottle,
        lookahead: int = LOOKAHEAD,
        between: Callable[[], None] = lambda: None,
    ) -> None:
        self._submit = submit
        self._key = key
        self._between = between
        self._throttle = throttle
        self._workers = max(1, concurrency)
        self._limit = self._workers * IN_FLIGHT_PER_WORKER
        self._lookahead = max(1, lookahead)
        self._queues: dict[str, deque[T]] = {}
        self._held = 0
        self._in_flight: dict[str, int] = {}
        self._total = 0
        self._changed = threading.Condition()

    def deal(self, rows: Iterable[T]) -> None:
        """Submits every row; when `rows` fails, the rows held are submitted before the
        failure is raised (the accounts listed before a failed page are still judged)."""
        failure: Exception | None = None
        try:
            for row in rows:
                self._queues.setdefault(self._key(row), deque()).append(row)
                self._held += 1
                while self._held >= self._lookahead:
                    self._dispatch()
        except Exception as error:
            failure = error
        while self._queues:
            self._dispatch()
        if failure is not None:
            raise failure

    def _dispatch(self) -> None:
        while True:
            self._between()
            with self._changed:
                key = self._next()
                if key is None:
                    self._changed.wait(DEALER_POLL_S)
                    continue
                self._in_flight[key] = self._in_flight.get(key, 0) + 1
                self._total += 1
                break
        waiting = self._queues.pop(key)
        row = waiting.popleft()
        self._held -= 1
        if waiting:
            self._queues[key] = waiting  # to the back of the round
        future = self._submit(row)
        future.add_done_callback(lambda _: self._finished(key))

    def _next(self) -> str | None:
        """The first subscription of the round under its share, one whose gate is open
        first; None while the pool is full or every held subscription has its share."""
        if self._total >= self._limit:
            return None
        active = set(self._queues) | {k for k, n in self._in_flight.items() if n}
        share = -(-self._workers // max(1, len(active)))
        under = [k for k in self._queues if self._in_flight.get(k, 0) < share]
        ready = [k for k in under if self._throttle.is_open(k)]
        return (ready or under)[0] if under else None

    def _finished(self, key: str) -> None:
        with self._changed:
            self._in_flight[key] -= 1
            self._total -= 1
            self._changed.notify_all()


@dataclass
class ScopeRoles:
    """The role assignments and definitions Resource Graph gave for one fleet scope."""

    index: RoleIndex
    definitions: dict[str, dict[str, Any]]
    lock: threading.Lock


def scope_roles(
    graph: ResourceGraphClient, *, subscriptions: list[str] | None, groups: list[str] | None
) -> ScopeRoles | None:
    """One paged query for the scope's assignments, one for the definitions they name; None
    when the assignments cannot be read (the accounts' roles are then read per account). A
    definition missing here is read through ARM (cached per run)."""
    index = RoleIndex()
    try:
        for page in graph_pages(
            graph, subscriptions=subscriptions, groups=groups, query=ROLE_ASSIGNMENTS_QUERY
        ):
            index.add(page)
    except LISTING_ERRORS:
        return None
    definitions: dict[str, dict[str, Any]] = {}
    if index.guids:
        try:
            query = definitions_query(index.guids)
            for page in graph_pages(graph, subscriptions=subscriptions, groups=groups, query=query):
                for row in page:
                    definitions[arm_fold(str(row.get("name", "")))] = row
        except LISTING_ERRORS:
            definitions = {}
    return ScopeRoles(index, definitions, threading.Lock())


class _Readers:
    """One ArmReader per subscription, made when its first account arrives; they share the
    throttle and the role definition cache."""

    def __init__(
        self, make: Callable[[str, FetchedOnce[dict[str, Any] | None]], ArmReader]
    ) -> None:
        self._make = make
        self._definitions: FetchedOnce[dict[str, Any] | None] = FetchedOnce()
        self._readers: FetchedOnce[ArmReader] = FetchedOnce()

    def of(self, subscription: str) -> ArmReader:
        return self._readers.get(
            arm_fold(subscription), lambda: self._make(subscription, self._definitions)
        )


def run_fleet_audit(
    scope: Scope,
    credential: TokenCredential,
    *,
    thresholds: Thresholds | None = None,
    arm_endpoint: str | None = None,
    allow_custom_endpoint: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    connection_verify: str | bool | None = None,
    storage_api_version: str = STORAGE_API_VERSION,
    throttle: SharedThrottle | None = None,
    on_result: Judged | None = None,
    keep_results: bool = True,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> AuditReport:
    """Audit every account of the fleet `scope`; `concurrency` accounts are read at once.

    `on_result` is called with each account's result as soon as it is judged (from the
    calling thread); with `keep_results` False the report keeps none of them (memory stays
    flat in the number of accounts) and its `results` are empty."""
    if arm_endpoint is not None:
        check_arm_endpoint(arm_endpoint, allow_custom=allow_custom_endpoint)
    limits = thresholds or Thresholds()
    gate = throttle or SharedThrottle()
    sent = gate.sent
    started = time.perf_counter()
    report = AuditReport(scope=scope, thresholds=limits, results=[])
    graph = graph_client(credential, gate, arm_endpoint, connection_verify, read_timeout_s)
    readers = _Readers(
        lambda subscription, definitions: ArmReader(
            credential,
            subscription,
            arm_endpoint=arm_endpoint,
            allow_custom_endpoint=allow_custom_endpoint,
            concurrency=concurrency,
            connection_verify=connection_verify,
            storage_api_version=storage_api_version,
            throttle=gate,
            definitions=definitions,
            read_timeout_s=read_timeout_s,
        )
    )

    def audit_one(body: Mapping[str, Any], roles: ScopeRoles | None) -> AccountResult:
        resource_id = str(body["id"])
        subscription = subscription_of(resource_id)
        reader = readers.of(subscription)
        assignments = None
        inherited = None if roles is None else reader.inherited_assignments(subscription)
        if roles is not None and inherited is not None:
            with roles.lock:
                assignments = roles.index.take(resource_id, inherited)
        prefetched = Prefetched(
            role_assignments=assignments,
            role_definitions={} if roles is None else roles.definitions,
            connections_in_body=True,
            local_users_from_settings=True,
            defender_from_plan=True,
            locks_from_subscription=True,
            backups_from_subscription=True,
        )
        return judge(reader.read(body, prefetched), limits)

    def judged(future: Future[AccountResult]) -> None:
        result = future.result()
        if keep_results:
            report.results.append(result)
        if on_result is not None:
            on_result(result)

    seen: set[bytes] = set()
    done: queue.SimpleQueue[Future[AccountResult]] = queue.SimpleQueue()

    def drain() -> None:
        """Hands finished results to `judged` in the calling thread."""
        while True:
            try:
                future = done.get_nowait()
            except queue.Empty:
                return
            judged(future)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:

        def submit(item: tuple[dict[str, Any], ScopeRoles | None]) -> Future[AccountResult]:
            future = pool.submit(audit_one, *item)
            future.add_done_callback(done.put)
            return future

        dealer: Dealer[tuple[dict[str, Any], ScopeRoles | None]] = Dealer(
            submit,
            key=lambda item: arm_fold(subscription_of(str(item[0]["id"]))),
            concurrency=concurrency,
            throttle=gate,
            between=drain,
        )
        for target in targets(scope, graph, report):
            _list(target, graph, dealer, seen, report)
    drain()
    if keep_results:
        report.results.sort(key=lambda r: (r.account.name, r.account.resource_id or ""))
    report.seconds = time.perf_counter() - started
    report.requests = gate.sent - sent
    return report


def _list(
    target: Target,
    graph: ResourceGraphClient,
    dealer: Dealer[tuple[dict[str, Any], ScopeRoles | None]],
    seen: set[bytes],
    report: AuditReport,
) -> None:
    """Deals the accounts of one target not dealt before; its listing's failure, and its
    rows without an account id, are read errors of the target."""
    roles = scope_roles(graph, subscriptions=target.subscriptions, groups=target.groups)
    pages = graph_pages(graph, subscriptions=target.subscriptions, groups=target.groups)
    nameless = [0]

    def fresh() -> Iterator[tuple[dict[str, Any], ScopeRoles | None]]:
        for page in pages:
            for body in page:
                if not is_account_id(body.get("id")):
                    nameless[0] += 1
                    continue
                key = _fingerprint(str(body["id"]))
                if key not in seen:
                    seen.add(key)
                    yield body, roles

    operation = f"resourceGraph/resources {target.label}"
    try:
        dealer.deal(fresh())
    except LISTING_ERRORS as error:
        report.errors.append(listing_error(operation, error))
    if nameless[0]:
        report.errors.append(
            ReadError(
                None,
                operation,
                ErrorKind.MALFORMED,
                f"{nameless[0]} row(s) of Resource Graph's answer have no storage account id: "
                "not judged (an account is told from another by its id)",
            )
        )


def _fingerprint(resource_id: str) -> bytes:
    """A 96-bit digest of the lower-case id: what `seen` keeps of each judged account, so that
    a fleet of any size costs a few bytes an account (a collision is below 1 in 10^20 for
    10,000 accounts)."""
    return hashlib.blake2b(arm_fold(resource_id).encode(), digest_size=12).digest()
