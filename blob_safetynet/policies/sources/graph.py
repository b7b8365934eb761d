"""What the fleet audit asks of Resource Graph and of the tenant-level lists beside it: the
query client, pages bounded against an answer that never ends, the subscription list, a
management group's descendants, and the subscriptions Resource Graph can read.

Resource Graph (POST /providers/Microsoft.ResourceGraph/resources, api-version 2021-03-01, the
one azure-mgmt-resourcegraph 8 sends) answers one KQL query over `subscriptions` or
`managementGroups` in pages of at most 1000 records (`options.$top`), each page after the first
asked for with the previous answer's `$skipToken`; an answer has `totalRecords`, `count`,
`resultTruncated` and `data` (https://docs.azure.cn/en-us/governance/resource-graph/concepts/paging-results).
Resource Graph returns only what the caller may read, so a subscription it cannot read is left
out of an answer, not refused (the fleet compares against the management group's descendants:
`fleet_scope.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import DeserializationError
from azure.core.rest import HttpRequest

from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.policies.sources.connection import (
    READ_ERRORS,
    READ_TIMEOUT_S,
    classify,
    client_options,
)
from blob_safetynet.policies.sources.results import ErrorKind, ReadError
from blob_safetynet.policies.sources.throttle import SharedThrottle

if TYPE_CHECKING:
    from azure.mgmt.resourcegraph import ResourceGraphClient

PAGE_SIZE = 1000
"""The most records one Resource Graph page may hold (the pagination page above)."""
MAX_EMPTY_PAGES = 3
"""Empty pages in a row that still carry a `$skipToken` before the listing is called broken."""
ACCOUNTS_QUERY = (
    "resources"
    " | where type =~ 'microsoft.storage/storageaccounts'"
    " | project id, name, type, location, kind, sku, tags, properties"
    " | order by name asc"
)
"""Every column the account rules read, `properties.privateEndpointConnections`,
`isLocalUserEnabled` and `isSftpEnabled` included. Ordered so that pages follow one order (an
account name is unique in Azure); by name rather than id, so that the accounts of different
subscriptions come mixed, not one subscription after the other."""
SUBSCRIPTIONS_QUERY = (
    "resourcecontainers"
    " | where type =~ 'microsoft.resources/subscriptions'"
    " | project subscriptionId"
    " | order by subscriptionId asc"
)
"""The subscriptions of a scope the caller can read (`resourcecontainers` holds
`microsoft.resources/subscriptions`: the table reference,
https://learn.microsoft.com/azure/governance/resource-graph/reference/supported-tables-resources)."""
SUBSCRIPTIONS_API_VERSION = "2022-12-01"
"""Subscriptions - List (https://learn.microsoft.com/rest/api/resources/subscriptions/list)."""
DESCENDANTS_API_VERSION = "2020-05-01"
"""Management Groups - Get Descendants: every management group and subscription under a group,
nested ones included, paged by nextLink; a subscription's `type` is "/subscriptions"
(https://learn.microsoft.com/rest/api/managementgroups/management-groups/get-descendants)."""


class ListingError(Exception):
    """A listing answer that cannot be trusted to be complete."""


LISTING_ERRORS = (*READ_ERRORS, DeserializationError, ValueError, ListingError)


def listing_error(operation: str, error: Exception) -> ReadError:
    """A scope-level read error for a failed listing, in words safe to print."""
    if isinstance(error, ListingError):
        return ReadError(None, operation, ErrorKind.MALFORMED, str(error))
    kind, message = classify(error)
    return ReadError(None, operation, kind, message)


def graph_client(
    credential: TokenCredential,
    throttle: SharedThrottle,
    arm_endpoint: str | None,
    connection_verify: str | bool | None,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> ResourceGraphClient:
    from azure.mgmt.resourcegraph import ResourceGraphClient

    options = client_options(
        arm_endpoint,
        4,
        connection_verify,
        read_timeout_s=read_timeout_s,
        on_send=throttle.count_sent,
    )
    return ResourceGraphClient(credential, retry_policy=throttle.policy(queries=True), **options)


def graph_pages(
    graph: ResourceGraphClient,
    *,
    subscriptions: list[str] | None,
    groups: list[str] | None,
    query: str = ACCOUNTS_QUERY,
) -> Iterator[list[dict[str, Any]]]:
    """The records `query` finds in one scope (by default its storage accounts), a page at a
    time, following `$skipToken`; a token answered twice, or `MAX_EMPTY_PAGES` empty pages in
    a row that still carry one, is a ListingError (the listing would never end)."""
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

    token: str | None = None
    seen: set[str] = set()
    empty = 0
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
        if token in seen:
            raise ListingError(
                f"Resource Graph answered a $skipToken it had given before, after {len(seen)} "
                "pages: the listing would never end, so it stopped there"
            )
        seen.add(token)
        empty = 0 if rows else empty + 1
        if empty >= MAX_EMPTY_PAGES:
            raise ListingError(
                f"Resource Graph answered {empty} empty pages in a row that each carried a "
                "$skipToken: the listing stopped there"
            )


def _get_pages(graph: ResourceGraphClient, path: str, api_version: str) -> Iterator[Any]:
    """The `value` items of an ARM list, following `nextLink` (each link followed once)."""
    request: HttpRequest | None = HttpRequest("GET", path, params={"api-version": api_version})
    followed: set[str] = set()
    while request is not None:
        response = graph._send_request(request)  # azure-mgmt-resourcegraph 8 names it so
        response.raise_for_status()
        body = response.json()
        values = body.get("value") if isinstance(body, dict) else None
        if not isinstance(values, list):
            raise ListingError(f"the answer to {path} is not a JSON object with a value list")
        yield from values
        link = body.get("nextLink")
        if not (isinstance(link, str) and link):
            return
        if link in followed:
            raise ListingError(f"the answer to {path} repeated a nextLink: stopped there")
        followed.add(link)
        request = HttpRequest("GET", link)


def list_subscriptions(graph: ResourceGraphClient) -> list[str]:
    """Every subscription the tenant lists to the credential (Subscriptions - List), lower-case."""
    return [
        arm_fold(str(item["subscriptionId"]))
        for item in _get_pages(graph, "/subscriptions", SUBSCRIPTIONS_API_VERSION)
        if isinstance(item, dict) and item.get("subscriptionId")
    ]


def descendant_subscriptions(graph: ResourceGraphClient, group: str) -> set[str]:
    """The lower-case ids of every subscription under management group `group`, at any depth."""
    path = f"/providers/Microsoft.Management/managementGroups/{group}/descendants"
    return {
        arm_fold(str(item["name"]))
        for item in _get_pages(graph, path, DESCENDANTS_API_VERSION)
        if isinstance(item, dict)
        and arm_fold(str(item.get("type", ""))) == "/subscriptions"
        and item.get("name")
    }


def readable_subscriptions(
    graph: ResourceGraphClient, *, subscriptions: list[str] | None, groups: list[str] | None
) -> set[str]:
    """The lower-case ids of the subscriptions of a scope that Resource Graph reads for the caller."""
    found: set[str] = set()
    for page in graph_pages(
        graph, subscriptions=subscriptions, groups=groups, query=SUBSCRIPTIONS_QUERY
    ):
        found.update(arm_fold(str(row.get("subscriptionId", ""))) for row in page)
    found.discard("")
    return found
