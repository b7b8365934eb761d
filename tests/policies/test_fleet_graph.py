"""The fleet audit's reads from Resource Graph (role assignments, private endpoint connections),
its throttle gates per subscription and the subscription listing, against the fake ARM.

The fake serves `authorizationresources` from the same role assignments it lists per account,
and each subscription's `atScope()` list from the assignments at or above the subscription.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.rules import RULES, Outcome
from blob_safetynet.policies.rules.model import Facet
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import Dealer, run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, Scope
from blob_safetynet.policies.sources.throttle import MAX_ATTEMPTS, SharedThrottle, gate_of
from testkit.arm_fake import (
    OWNER,
    TOKEN,
    UPLOADER,
    Failure,
    FakeArm,
    assignment,
    compliant_account,
    fleet_subscription,
    mixed_fleet,
)
from tests.policies.arm_env import use_fake_arm

SUBSCRIPTIONS = 3
ACCOUNTS = 23
APP = "44444444-0000-0000-0000-00000000a990"
FENCED_TAG_WRITE = (
    "((!(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/"
    "tags/write'})) OR (@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/"
    "blobs:path] StringStartsWith '.safetynet/verify/'))"
)
ROLE_RULES = {r.id for r in RULES if Facet.ROLES in r.facets}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A mixed fleet over three subscriptions with role assignments at every level: an app
    Owner at subscription 1, an Owner at a management group over subscription 2, a tag writer
    fenced by a condition on one account, a tag writer at a resource group of subscription 2
    (listed for every account in it, as ARM lists it)."""
    with FakeArm(page_size=4) as server:
        server.graph_page_size = 5
        for account in mixed_fleet(ACCOUNTS, SUBSCRIPTIONS):
            server.add(account)
        server.management_groups["mg-all"] = set(server.subscriptions())
        one, two = fleet_subscription(1), fleet_subscription(2)
        at_subscription = assignment(f"/subscriptions/{one}", APP, OWNER, 7)
        at_group = assignment("/providers/Microsoft.Management/managementGroups/mg-two", APP, OWNER)
        accounts = list(server.accounts.values())
        for account in accounts:
            if account.subscription == one:
                account.role_assignments.append(at_subscription)
            if account.subscription == two:
                account.role_assignments.append(at_group)
        fenced, in_group = accounts[4], accounts[5]
        for account in (fenced, in_group):
            account.role_assignments = [
                a for a in account.role_assignments if a["properties"]["scope"] != account.id
            ]
        fenced.role_assignments.append(
            assignment(fenced.id, APP, UPLOADER, 3, condition=FENCED_TAG_WRITE)
        )
        at_resource_group = assignment(in_group.id.split("/providers/")[0], APP, UPLOADER, 4)
        for account in accounts:
            if account.resource_group == in_group.resource_group and account.subscription == two:
                account.role_assignments.append(at_resource_group)
        use_fake_arm(server, monkeypatch)
        yield server


def fleet_audit(fake: FakeArm, **options: Any) -> AuditReport:
    return run_fleet_audit(
        Scope("", management_groups=("mg-all",)),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        **options,
    )


def verdicts(report: AuditReport, rules: set[str] | None = None) -> dict[tuple[str, str], Outcome]:
    return {
        (f.resource_id or f.account, f.rule.id): f.outcome
        for f in report.findings
        if rules is None or f.rule.id in rules
    }


def per_account_verdicts(fake: FakeArm) -> dict[tuple[str, str], Outcome]:
    found: dict[tuple[str, str], Outcome] = {}
    for number in range(SUBSCRIPTIONS):
        one = run_audit(
            Scope(fleet_subscription(number)),
            StaticTokenCredential(TOKEN),
            arm_endpoint=fake.endpoint,
            connection_verify=fake.ca_file,
        )
        assert not one.all_errors
        found.update(verdicts(one))
    return found


def test_roles_from_resource_graph_judge_as_the_per_account_reads(fake: FakeArm) -> None:
    """Assignments from Resource Graph and the subscriptions' atScope() lists give every rule
    the verdict the per-account reads give, with no per-account role or private endpoint read
    and only the definitions Resource Graph did not give read through ARM, once each."""
    expected = per_account_verdicts(fake)
    fake.served.clear()
    report = fleet_audit(fake)
    assert not report.all_errors
    assert verdicts(report) == expected
    assert "roleAssignments" not in fake.served
    assert "privateEndpointConnections" not in fake.served
    assert fake.served["roleAssignments:atScope"] == SUBSCRIPTIONS
    assert fake.served["roleDefinitions"] == 1  # Owner, named only above the subscriptions
    accounts = list(fake.accounts.values())
    owner_rule = "SN-NO-BROAD-APP-ROLES"
    by_subscription = {a.subscription: expected[(a.id, owner_rule)] for a in accounts[:3]}
    assert by_subscription[fleet_subscription(0)] is Outcome.PASS
    assert by_subscription[fleet_subscription(1)] is Outcome.FAIL  # Owner at the subscription
    assert by_subscription[fleet_subscription(2)] is Outcome.FAIL  # Owner at a management group
    assert expected[(accounts[4].id, "SN-TAG-WRITE-ROLE")] is Outcome.FAIL  # fenced by condition
    assert expected[(accounts[5].id, "SN-TAG-WRITE-ROLE")] is Outcome.PASS  # at resource group


def test_connections_absent_from_the_row_are_read_per_account(fake: FakeArm) -> None:
    """Rows without privateEndpointConnections have them read through ARM, same verdicts."""
    expected = per_account_verdicts(fake)
    fake.graph_omits_connections = True
    fake.served.clear()
    report = fleet_audit(fake)
    assert verdicts(report) == expected
    assert fake.served["privateEndpointConnections"] == ACCOUNTS


@pytest.mark.parametrize("status", [403, 429])
def test_failed_role_query_falls_back_to_per_account_reads(fake: FakeArm, status: int) -> None:
    """An authorizationresources query refused (403, or 429 with Retry-After on every attempt)
    has the roles of its scope's accounts read per account: the same verdicts, never a PASS
    unread."""
    expected = per_account_verdicts(fake)
    fake.served.clear()
    fake.retry_after_s = 0
    if status == 429:
        # The role query is the second query, after the subscriptions the group holds.
        fake.graph_throttle_schedule = set(range(2, MAX_ATTEMPTS + 2))
    else:
        fake.graph_failures["roleassignments"] = Failure(status)
    throttle = SharedThrottle(max_wait_s=0.01)
    report = fleet_audit(fake, throttle=throttle)
    assert not report.all_errors
    assert verdicts(report) == expected
    assert fake.served["roleAssignments"] == ACCOUNTS
    assert fake.throttled == (MAX_ATTEMPTS if status == 429 else 0)


def test_failed_definition_query_reads_each_definition_once(fake: FakeArm) -> None:
    """A refused roledefinitions query has each definition read through ARM once per run."""
    expected = per_account_verdicts(fake)
    fake.graph_failures["roledefinitions"] = Failure(403)
    fake.served.clear()
    report = fleet_audit(fake)
    assert verdicts(report) == expected
    assert not report.all_errors
    assert fake.served["roleDefinitions"] == 2  # the uploader and Owner roles


def test_roles_unreadable_everywhere_are_unknown_and_exit_3(fake: FakeArm, tmp_path: Path) -> None:
    """With the role query and the per-account reads refused, every role rule is UNKNOWN (or
    not applicable) and the audit exits 3: none PASSes on missing data."""
    fake.graph_failures["roleassignments"] = Failure(403)
    for account in fake.accounts.values():
        account.failures["roleAssignments"] = Failure(403)
    output = tmp_path / "report.json"
    reports = ["--format", "json", "--fail-on", "none", "--output", str(output)]
    code = main(["audit", "--management-group", "mg-all", *reports])
    document = json.loads(output.read_text())
    roles = [f for f in document["findings"] if f["rule"] in ROLE_RULES]
    assert code == ExitCode.INCOMPLETE
    assert roles
    assert Outcome.PASS.value not in {f["outcome"] for f in roles}
    assert Outcome.UNKNOWN.value in {f["outcome"] for f in roles}


def test_a_429_on_one_subscription_does_not_stall_another(fake: FakeArm) -> None:
    """While subscription 1's gate waits out its Retry-After, the accounts of subscription 0
    are all judged; subscription 1's are judged after the wait."""
    fake.retry_after_s = 2
    slow, fast = fleet_subscription(1), fleet_subscription(0)
    fake.throttled_subscriptions[slow] = 1
    finished: dict[str, list[float]] = {slow: [], fast: []}
    started = time.monotonic()
    lock = threading.Lock()

    def record(result: AccountResult) -> None:
        subscription = (result.account.resource_id or "").split("/")[2]
        with lock:
            finished.setdefault(subscription, []).append(time.monotonic() - started)

    report = run_fleet_audit(
        Scope("", subscriptions=(slow, fast)),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        concurrency=4,
        on_result=record,
        keep_results=False,
    )
    assert not report.all_errors
    assert finished[fast]
    assert finished[slow]
    assert max(finished[fast]) < fake.retry_after_s <= min(finished[slow])


def test_gates_are_per_subscription_and_one_for_resource_graph() -> None:
    """A request's gate is its subscription's (any case), Resource Graph's, or the tenant's."""
    sub = "/subscriptions/AbC/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/a"
    assert gate_of("GET", sub) == gate_of("GET", "/subscriptions/abc") == "abc"
    assert gate_of("POST", "/providers/Microsoft.ResourceGraph/resources") != "abc"
    assert gate_of("GET", "/subscriptions") == gate_of("GET", "/providers/x") == ""


def deal(
    rows: Iterable[dict[str, Any]],
    lookahead: int,
    closed: str = "",
    submitted: list[str] | None = None,
) -> list[str]:
    """The ids in the order a dealer with 4 workers submits `rows` (each judged at once)."""
    throttle = SharedThrottle()
    if closed:
        throttle.close_for(0.3, closed)
    submitted = [] if submitted is None else submitted

    def submit(row: dict[str, Any]) -> Future[None]:
        submitted.append(row["id"])
        future: Future[None] = Future()
        future.set_result(None)
        return future

    dealer: Dealer[dict[str, Any]] = Dealer(
        submit,
        key=lambda row: row["id"].split("/")[2],
        concurrency=4,
        throttle=throttle,
        lookahead=lookahead,
    )
    dealer.deal(rows)
    return submitted


ROWS = [{"id": f"/subscriptions/{s}/x/{n}"} for s in "abc" for n in range(3)]


def test_accounts_are_dealt_round_robin_over_subscriptions() -> None:
    """Rows sorted by subscription are submitted interleaved, none lost, whatever the
    lookahead; a subscription whose gate is closed goes after the open ones."""
    assert [i.split("/")[2] for i in deal(ROWS, lookahead=9)] == list("abc" * 3)
    assert sorted(deal(ROWS, lookahead=2)) == sorted(r["id"] for r in ROWS)
    assert [i.split("/")[2] for i in deal(ROWS, lookahead=9, closed="a")][:6] == list("bc" * 3)


def test_rows_held_back_are_dealt_when_the_listing_fails() -> None:
    """A listing that fails after some rows still has them submitted before the error."""

    def failing() -> Iterator[dict[str, Any]]:
        yield {"id": "/subscriptions/a/x/1"}
        yield {"id": "/subscriptions/b/x/1"}
        raise ValueError("page 2 unreadable")

    submitted: list[str] = []
    with pytest.raises(ValueError, match="page 2"):
        deal(failing(), lookahead=10, submitted=submitted)
    assert len(submitted) == 2


@pytest.mark.parametrize("status", [500, 403])
def test_subscription_list_refused_is_a_clear_exit_3(
    fake: FakeArm, status: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """GET /subscriptions answered 500 (every retry) or 403 is a read error of
    subscriptions/list and exit 3, with no traceback."""
    fake.subscription_list_answers = [Failure(status)] * MAX_ATTEMPTS
    output = tmp_path / "report.json"
    code = main(["audit", "--all-subscriptions", "--format", "json", "--output", str(output)])
    err = capsys.readouterr().err
    document = json.loads(output.read_text())
    assert code == ExitCode.INCOMPLETE
    assert "Traceback" not in err
    assert [e["operation"] for e in document["errors"]] == ["subscriptions/list"]
    assert str(status) in document["errors"][0]["message"]


def test_subscription_list_throttled_is_retried(fake: FakeArm, tmp_path: Path) -> None:
    """A 429 with Retry-After on GET /subscriptions is waited out and the list read again."""
    fake.subscription_list_answers = [Failure(429)]
    output = tmp_path / "report.json"
    code = main(["audit", "--all-subscriptions", "--format", "json", "--output", str(output)])
    document = json.loads(output.read_text())
    assert code == ExitCode.FINDINGS
    assert not document["errors"]
    assert len({f["resource_id"] for f in document["findings"]}) == ACCOUNTS
    assert fake.served["subscriptions/list"] == 1


def test_subscription_list_follows_next_link(fake: FakeArm) -> None:
    """A subscription list of one subscription a page is followed to its last page."""
    fake.page_size = 1
    fake.add(compliant_account("lone", subscription=fleet_subscription(9)))
    report = run_fleet_audit(
        Scope("", all_subscriptions=True),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
    )
    assert fake.served["subscriptions/list"] == SUBSCRIPTIONS + 1
    assert len(report.results) == ACCOUNTS + 1
    assert not report.all_errors
