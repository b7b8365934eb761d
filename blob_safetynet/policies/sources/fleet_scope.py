"""What a fleet audit should see, what Resource Graph lets it see, and the difference named.

Resource Graph answers only for the subscriptions the caller can read and leaves the others
out without a word, so an audit that trusted its answer would pass over them in silence. Before
a scope's accounts are listed, the audit knows which subscriptions it should see:

- for `--management-group G`, every subscription under G at any depth (Management Groups - Get
  Descendants, `graph.descendant_subscriptions`), which a Reader on G may list;
- for `--subscription`, the ones named;
- for `--all-subscriptions`, the ones the tenant lists to the credential (Subscriptions - List,
  which lists those it holds any role in).

It then asks Resource Graph which of them it reads (`resourcecontainers`,
`graph.readable_subscriptions`) and reports each one missing as a permission read error of the
scope (exit 3). A query over named subscriptions that one of them makes fail is split in two,
and so on down to the one that fails, so a single unreadable subscription costs a few small
queries instead of sending the whole run one subscription at a time. What role and scope make
the list complete: docs/policies.md ("A fleet").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.policies.sources.graph import (
    LISTING_ERRORS,
    descendant_subscriptions,
    list_subscriptions,
    listing_error,
    readable_subscriptions,
)
from blob_safetynet.policies.sources.results import AuditReport, ErrorKind, ReadError, Scope

if TYPE_CHECKING:
    from azure.mgmt.resourcegraph import ResourceGraphClient

T = TypeVar("T")
_REFUSED = (ErrorKind.PERMISSION, ErrorKind.NOT_FOUND, ErrorKind.AUTH)
GRANT = (
    "give the credential Reader on it, or on a management group above it "
    '(docs/policies.md, "A fleet")'
)


@dataclass(frozen=True)
class Target:
    """One Resource Graph scope to list: a management group, or readable subscriptions."""

    label: str
    subscriptions: list[str] | None
    groups: list[str] | None


def missing(subscription: str, where: str) -> ReadError:
    return ReadError(
        None,
        f"resourceGraph/resources subscription {subscription}",
        ErrorKind.PERMISSION,
        f"Resource Graph returns nothing of this subscription ({where}): the credential cannot "
        f"read it, so none of its accounts were judged; {GRANT}",
    )


def _attempt(
    report: AuditReport, operation: str, call: Callable[[], T], hint: str = ""
) -> T | None:
    try:
        return call()
    except LISTING_ERRORS as error:
        failed = listing_error(operation, error)
        if hint:
            failed = ReadError(None, operation, failed.kind, f"{failed.message}; {hint}")
        report.errors.append(failed)
        return None


def targets(scope: Scope, graph: ResourceGraphClient, report: AuditReport) -> list[Target]:
    """The scopes to list, after every subscription the audit should see and cannot is
    reported in `report`: one target per management group, one for the readable subscriptions
    named or listed (Resource Graph's quota counts queries, not subscriptions)."""
    found: list[Target] = []
    for group in scope.management_groups:
        label = f"managementGroup {group}"
        readable = _attempt(
            report,
            f"resourceGraph/resources {label}",
            functools.partial(readable_subscriptions, graph, subscriptions=None, groups=[group]),
        )
        if readable is None:
            continue  # the group itself cannot be read: one error says so
        expected = _attempt(
            report,
            f"managementGroups/descendants {group}",
            functools.partial(descendant_subscriptions, graph, group),
            "the subscriptions under the group that the credential cannot read could not be "
            "named; give it Reader (or Management Group Reader) on the group",
        )
        if expected is not None:
            where = f"under management group {group}"
            report.errors.extend(missing(s, where) for s in sorted(expected - readable))
        found.append(Target(label, None, [group]))
    named = [arm_fold(s) for s in scope.subscriptions]
    if scope.all_subscriptions:
        named.extend(
            _attempt(report, "subscriptions/list", lambda: list_subscriptions(graph)) or []
        )
    expected_list = list(dict.fromkeys(named))
    if not expected_list:
        return found
    where = "listed by the tenant" if scope.all_subscriptions else "named by --subscription"
    readable_set, refused = _readable(graph, expected_list, report)
    report.errors.extend(missing(s, where) for s in refused)
    query = [s for s in expected_list if s in readable_set]
    if query:
        found.append(Target(f"subscriptions {', '.join(query)}", query, None))
    return found


def _readable(
    graph: ResourceGraphClient, subscriptions: list[str], report: AuditReport
) -> tuple[set[str], list[str]]:
    """(the subscriptions to list, the ones refused): a query refused for its subscriptions is
    split in halves down to the one refused; one that fails otherwise leaves its subscriptions
    to be listed (their listing reports its own failure) and is reported."""
    try:
        readable = readable_subscriptions(graph, subscriptions=subscriptions, groups=None)
    except LISTING_ERRORS as error:
        failed = listing_error("resourceGraph/resourcecontainers", error)
        if failed.kind not in _REFUSED:
            report.errors.append(failed)
            return set(subscriptions), []
        if len(subscriptions) == 1:
            return set(), subscriptions
        half = len(subscriptions) // 2
        first, refused_first = _readable(graph, subscriptions[:half], report)
        second, refused_second = _readable(graph, subscriptions[half:], report)
        return first | second, refused_first + refused_second
    return readable, [s for s in subscriptions if s not in readable]
