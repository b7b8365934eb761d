"""The fleet audit: storage accounts of management groups and subscriptions, listed by Resource
Graph, then read per account through ARM for what Resource Graph does not hold.

Resource Graph (POST /providers/Microsoft.ResourceGraph/resources, api-version 2021-03-01, the
one azure-mgmt-resourcegraph 8 sends) answers one KQL query over `subscriptions` or
`managementGroups` in pages of at most 1000 records (`options.$top`), each page after the first
asked for with the previous answer's `$skipToken`; an answer has `totalRecords`, `count`,
`resultTruncated` and `data` (https://docs.azure.cn/en-us/governance/resource-graph/concepts/paging-results).
Which child resources it holds, and why the rest is read per account: docs/policies.md
("A fleet").

A scope whose listing fails is a scope-level read error (exit 3), and the accounts listed
before the failure are still judged; an account listed twice (a subscription inside a listed
management group) is judged once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import DeserializationError
from azure.core.rest import HttpRequest

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.audit import (
    DEFAULT_CONCURRENCY,
    READ_ERRORS,
    STORAGE_API_VERSION,
    AccountResult,
    ArmReader,
    AuditReport,
    ErrorKind,
    FetchedOnce,
    ReadError,
    Scope,
    check_arm_endpoint,
    classify,
    client_options,
    subscription_of,
)
from blob_safetynet.policies.model import Thresholds
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.throttle import SharedThrottle

if TYPE_CHECKING:
    from azure.mgmt.resourcegraph import ResourceGraphClient

PAGE_SIZE = 1000
"""The most records one Resource Graph page may hold (the pagination page above)."""
ACCOUNTS_QUERY = (
    "resources"
    " | where type =~ 'microsoft.storage/storageaccounts'"
    " | project id, name, type, location, kind, sku, tags, properties"
    " | order by id asc"
)
"""Ordered by id so that pages follow one order; every column the account rules read."""
SUBSCRIPTIONS_API_VERSION = "2022-12-01"
"""Subscriptions - List (https://learn.microsoft.com/rest/api/resources/subscriptions/list)."""
IN_FLIGHT_PER_WORKER = 2
"""Accounts queued per worker: listing runs ahead of judging by this much, no more."""

Judged = Callable[[AccountResult], None]


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
    graph: ResourceGraphClient, *, subscriptions: list[str] | None, groups: list[str] | None
) -> Iterator[list[dict[str, Any]]]:
    """The storage accounts of one scope, a page at a time, following `$skipToken`."""
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

    token: str | None = None
    while True:
        options = QueryRequestOptions(top=PAGE_SIZE, skip_token=token, result_format="objectArray")
        request = QueryRequest(
            query=ACCOUNTS_QUERY,
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
            subscription.lower(), lambda: self._make(subscription, self._definitions)
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

    def audit_one(body: Mapping[str, Any]) -> AccountResult:
        reader = readers.of(subscription_of(str(body.get("id", ""))))
        reads, errors = reader.read(body)
        account = arm.account(reads)
        return AccountResult(account=account, findings=evaluate(account, limits), errors=errors)

    def judged(future: Future[AccountResult]) -> None:
        result = future.result()
        if keep_results:
            report.results.append(result)
        if on_result is not None:
            on_result(result)

    seen: set[str] = set()
    pending: list[Future[AccountResult]] = []
    slots = threading.BoundedSemaphore(max(1, concurrency) * IN_FLIGHT_PER_WORKER)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:

        def submit(body: dict[str, Any]) -> None:
            key = str(body.get("id", "")).lower()
            if key in seen:
                return
            seen.add(key)
            slots.acquire()
            future = pool.submit(audit_one, body)
            future.add_done_callback(lambda _: slots.release())
            pending.append(future)
            _drain(pending, judged, block=False)

        queue = list(_targets(scope, graph, report))
        while queue:
            label, subscriptions, groups = queue.pop(0)
            try:
                for page in graph_pages(graph, subscriptions=subscriptions, groups=groups):
                    for body in page:
                        submit(body)
            except LISTING_ERRORS as error:
                if subscriptions and len(subscriptions) > 1:
                    queue[:0] = [(f"subscription {s}", [s], None) for s in subscriptions]
                    continue
                report.errors.append(_listing_error(f"resourceGraph/resources {label}", error))
        _drain(pending, judged, block=True)
    if keep_results:
        report.results.sort(key=lambda r: (r.account.name, r.account.resource_id or ""))
    report.seconds = time.perf_counter() - started
    return report


def _drain(
    pending: list[Future[AccountResult]],
    judged: Callable[[Future[AccountResult]], None],
    *,
    block: bool,
) -> None:
    """Hands finished results to `judged` in the calling thread, in submission order."""
    while pending and (block or pending[0].done()):
        judged(pending.pop(0))


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
    unique = list(dict.fromkeys(s.lower() for s in subscriptions))
    if unique:
        yield f"subscriptions {', '.join(unique)}", unique, None
