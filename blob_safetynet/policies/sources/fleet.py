"""The fleet audit: storage accounts of management groups and subscriptions, listed by Resource
Graph with their role assignments (blob_safetynet/policies/sources/fleet_roles.py) and private endpoint
connections, then read per account through ARM for what Resource Graph does not hold.

Resource Graph (POST /providers/Microsoft.ResourceGraph/resources, api-version 2021-03-01, the
one azure-mgmt-resourcegraph 8 sends) answers one KQL query over `subscriptions` or
`managementGroups` in pages of at most 1000 records (`options.$top`), each page after the first
asked for with the previous answer's `$skipToken`; an answer has `totalRecords`, `count`,
`resultTruncated` and `data` (https://docs.azure.cn/en-us/governance/resource-graph/concepts/paging-results).
Which child resources it holds, and why the rest is read per account: docs/policies.md
("A fleet").

A scope whose listing fails is a scope-level read error (exit 3), and the accounts listed
before the failure are still judged; an account listed twice (a subscription inside a listed
management group) is judged once. A scope whose role assignment query fails has its accounts'
roles read per account, as the single-subscription audit reads them (never judged on missing
data). Accounts are dealt to the workers round-robin over their subscriptions
(`interleaved`), so that every subscription's ARM read budget is spent at once.
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
from azure.core.exceptions import DeserializationError
from azure.core.rest import HttpRequest

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.rules.model import Thresholds, arm_fold
from blob_safetynet.policies.sources.connection import (
    READ_ERRORS,
    check_arm_endpoint,
    classify,
    client_options,
)
from blob_safetynet.policies.sources.fleet_roles import (
    ROLE_ASSIGNMENTS_QUERY,
    RoleIndex,
    definitions_query,
)
from blob_safetynet.policies.sources.live import (
    DEFAULT_CONCURRENCY,
    STORAGE_API_VERSION,
    ArmReader,
    FetchedOnce,
    Prefetched,
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

PAGE_SIZE = 1000
"""The most records one Resource Graph page may hold (the pagination page above)."""
ACCOUNTS_QUERY = (
    "resources"
    " | where type =~ 'microsoft.storage/storageaccounts'"
    " | project id, name, type, location, kind, sku, tags, properties"
    " | order by name asc"
)
"""Every column the account rules read, `properties.privateEndpointConnections` included.
Ordered so that pages follow one order (an account name is unique in Azure); by name rather
than id, so that the accounts of different subscriptions come mixed, not one subscription
after the other."""
SUBSCRIPTIONS_API_VERSION = "2022-12-01"
"""Subscriptions - List (https://learn.microsoft.com/rest/api/resources/subscriptions/list)."""
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


class ListingError(Exception):
    """A listing answer that cannot be trusted to be complete."""


LISTING_ERRORS = (*READ_ERRORS, DeserializationError, ValueError, ListingError)


def _listing_error(operation: str, error: Exception) -> ReadError:
    if isinstance(error, ListingError):
        return ReadError(None, operation, ErrorKind.MALFORMED, str(error))
    kind, message = classify(error)
    return ReadError(None, operation, kind, message)


def _graph_client(
    credential: TokenCredential,
    throttle: SharedThrottle,
    arm_endpoint: str | None,
    connection_verify: str | bool | None,
) -> ResourceGraphClient:
    from azure.mgmt.resourcegraph import ResourceGraphClient

    options = client_options(arm_endpoint, 4, connection_verify)
    return ResourceGraphClient(credential, retry_policy=throttle.policy(), **options)


def graph_pages(
    graph: ResourceGraphClient,
    *,
    subscriptions: list[str] | None,
    groups: list[str] | None,
    query: str = ACCOUNTS_QUERY,
) -> Iterator[list[dict[str, Any]]]:
    """The records `query` finds in one scope (by default its storage accounts), a page at a
    time, following `$skipToken`."""
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

    token: str | None = None
    while True:
        options = QueryRequestOptions(top=PAGE_SIZE, skip_token=token, result_format="objectArray")
        request = QueryRequest(
            query=query,
            subscriptions=subscriptions,
            management_groups=groups,
            options=options,
        )
        answer = graph.resources(request)
        rows = answer.data
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise ListingError("Resource Graph answered data that is not a list of objects")
        yield rows
        token = answer.skip_token
        if not token:
            if str(answer.result_truncated).lower() == "true":
                raise ListingError(
                    f"Resource Graph truncated the result ({answer.count} of "
                    f"{answer.total_records} records) and gave no $skipToken"
                )
            return


def list_subscriptions(graph: ResourceGraphClient) -> list[str]:
    """Every subscription the credential can read (Subscriptions - List, paged by nextLink)."""
    ids: list[str] = []
    request: HttpRequest | None = HttpRequest(
        "GET", "/subscriptions", params={"api-version": SUBSCRIPTIONS_API_VERSION}
    )
    while request is not None:
        response = graph._send_request(request)  # azure-mgmt-resourcegraph 8 names it so
        response.raise_for_status()
        body = response.json()
        values = body.get("value") if isinstance(body, dict) else None
        if not isinstance(values, list):
            raise ListingError("the subscription list is not a JSON object with a value list")
        ids.extend(
            str(v["subscriptionId"])
            for v in values
            if isinstance(v, dict) and v.get("subscriptionId")
        )
        link = body.get("nextLink")
        request = HttpRequest("GET", link) if isinstance(link, str) and link else None
    return ids


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
) -> AuditReport:
    """Audit every account of the fleet `scope`; `concurrency` accounts are read at once.

    `on_result` is called with each account's result as soon as it is judged (from the
    calling thread); with `keep_results` False the report keeps none of them (memory stays
    flat in the number of accounts) and its `results` are empty."""
    if arm_endpoint is not None:
        check_arm_endpoint(arm_endpoint, allow_custom=allow_custom_endpoint)
    limits = thresholds or Thresholds()
    gate = throttle or SharedThrottle()
    started = time.perf_counter()
    report = AuditReport(scope=scope, thresholds=limits, results=[])
    graph = _graph_client(credential, gate, arm_endpoint, connection_verify)
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
        )
    )

    def audit_one(body: Mapping[str, Any], roles: ScopeRoles | None) -> AccountResult:
        resource_id = str(body.get("id", ""))
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
        )
        reads, errors = reader.read(body, prefetched)
        account = arm.account(reads)
        return AccountResult(account=account, findings=evaluate(account, limits), errors=errors)

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

    def fresh(
        pages: Iterable[list[dict[str, Any]]], roles: ScopeRoles | None
    ) -> Iterator[tuple[dict[str, Any], ScopeRoles | None]]:
        for page in pages:
            for body in page:
                key = _fingerprint(str(body.get("id", "")))
                if key not in seen:
                    seen.add(key)
                    yield body, roles

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:

        def submit(item: tuple[dict[str, Any], ScopeRoles | None]) -> Future[AccountResult]:
            future = pool.submit(audit_one, *item)
            future.add_done_callback(done.put)
            return future

        dealer: Dealer[tuple[dict[str, Any], ScopeRoles | None]] = Dealer(
            submit,
            key=lambda item: arm_fold(subscription_of(str(item[0].get("id", "")))),
            concurrency=concurrency,
            throttle=gate,
            between=drain,
        )
        targets = list(_targets(scope, graph, report))
        while targets:
            label, subscriptions, groups = targets.pop(0)
            roles = scope_roles(graph, subscriptions=subscriptions, groups=groups)
            pages = graph_pages(graph, subscriptions=subscriptions, groups=groups)
            try:
                dealer.deal(fresh(pages, roles))
            except LISTING_ERRORS as error:
                if subscriptions and len(subscriptions) > 1:
                    targets[:0] = [(f"subscription {s}", [s], None) for s in subscriptions]
                    continue
                report.errors.append(_listing_error(f"resourceGraph/resources {label}", error))
    drain()
    if keep_results:
        report.results.sort(key=lambda r: (r.account.name, r.account.resource_id or ""))
    report.seconds = time.perf_counter() - started
    return report


def _fingerprint(resource_id: str) -> bytes:
    """A 96-bit digest of the lower-case id: what `seen` keeps of each judged account, so that
    a fleet of any size costs a few bytes an account (a collision is below 1 in 10^20 for
    10,000 accounts)."""
    return hashlib.blake2b(arm_fold(resource_id).encode(), digest_size=12).digest()


def _targets(
    scope: Scope, graph: ResourceGraphClient, report: AuditReport
) -> Iterator[tuple[str, list[str] | None, list[str] | None]]:
    """(label, subscriptions, management groups) of each query: one per management group and
    one for all the subscriptions (Resource Graph's quota counts queries); a failed query of
    several subscriptions is asked again one subscription at a time, so that one that cannot
    be read fails alone and the others are still listed."""
    for group in scope.management_groups:
        yield f"managementGroup {group}", None, [group]
    subscriptions = list(scope.subscriptions)
    if scope.all_subscriptions:
        try:
            subscriptions.extend(list_subscriptions(graph))
        except LISTING_ERRORS as error:
            report.errors.append(_listing_error("subscriptions/list", error))
    unique = list(dict.fromkeys(arm_fold(s) for s in subscriptions))
    if unique:
        yield f"subscriptions {', '.join(unique)}", unique, None
