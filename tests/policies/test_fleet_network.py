"""A network that drops, refuses and stalls: every transport error azure-core raises is a read
error of the page or account it hit, retried first (a Resource Graph query is a read), never an
exit 5; the rest of the scope is judged. One test per error class on each path: the fleet's
Resource Graph listing, the fleet's per-account ARM reads, the single-subscription audit's ARM
reads.

The fake ARM makes the faults on loopback HTTPS: it closes a new connection before its TLS
handshake (azure-core: ServiceRequestError), resets the connection of a request it has read
(ServiceResponseError), or holds an answer past the client's read timeout
(ServiceResponseTimeoutError).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AuditReport, ErrorKind, Scope
from blob_safetynet.policies.sources.throttle import MAX_ATTEMPTS, SharedThrottle
from testkit.arm_fake import TOKEN, FakeArm, NetworkFault, fleet_subscription, mixed_fleet
from tests.policies.arm_env import use_fake_arm

SUBSCRIPTIONS = 3
ACCOUNTS = 12
PAGE = 4
READ_TIMEOUT_S = 0.5
STALL_S = 1.2
CLASSES = ("ServiceRequestError", "ServiceResponseError", "ServiceResponseTimeoutError")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A mixed fleet of 12 accounts over three subscriptions; Resource Graph pages of 4; group
    mg-a holds subscriptions 0 and 1, mg-b subscription 2."""
    with FakeArm(page_size=PAGE) as server:
        server.graph_page_size = PAGE
        for account in mixed_fleet(ACCOUNTS, SUBSCRIPTIONS):
            server.add(account)
        server.management_groups["mg-a"] = {fleet_subscription(0), fleet_subscription(1)}
        server.management_groups["mg-b"] = {fleet_subscription(2)}
        server.management_groups["mg-all"] = set(server.subscriptions())
        use_fake_arm(server, monkeypatch)
        yield server


def options(fake: FakeArm) -> dict[str, Any]:
    return {
        "arm_endpoint": fake.endpoint,
        "connection_verify": fake.ca_file,
        "concurrency": 1,
        "throttle": SharedThrottle(max_wait_s=0.01),
        "read_timeout_s": READ_TIMEOUT_S,
    }


def fleet(fake: FakeArm, *groups: str) -> AuditReport:
    scope = Scope("", management_groups=groups or ("mg-all",))
    return run_fleet_audit(scope, StaticTokenCredential(TOKEN), **options(fake))


def single(fake: FakeArm) -> AuditReport:
    return run_audit(Scope(fleet_subscription(0)), StaticTokenCredential(TOKEN), **options(fake))


def fault(kind: str, where: Callable[[str, str], bool], times: int) -> NetworkFault:
    return NetworkFault(
        "drop" if kind == "ServiceResponseError" else "stall", where, times, STALL_S
    )


def network_errors(report: AuditReport, kind: str) -> list[str]:
    return [
        e.operation
        for e in report.all_errors
        if e.kind is ErrorKind.NETWORK and e.message.startswith(f"{kind}:")
    ]


def after_first_page(fake: FakeArm) -> Callable[[str, str], bool]:
    return lambda method, _: method == "POST" and fake.served.get("graph:storageaccounts", 0) >= 1


def blob_service_of(fake: FakeArm, name: str) -> Callable[[str, str], bool]:
    target = f"{fake.accounts[name].id}/blobServices/default".lower()
    return lambda method, path: method == "GET" and path.lower() == target


def listed_first(fake: FakeArm, audit: str) -> Callable[[], bool]:
    """Whether the audit's account listing is done: Resource Graph's first page served (one
    page here), or the subscription's ARM list answered."""
    if audit == "fleet":
        return lambda: fake.served.get("graph:storageaccounts", 0) >= 1
    return lambda: fake.arm_gets >= 1


def accounts_in(fake: FakeArm, *subscriptions: str) -> set[str]:
    return {a.id for a in fake.accounts.values() if a.subscription in subscriptions}


@pytest.mark.parametrize("kind", CLASSES)
def test_a_graph_page_without_answer_is_retried(fake: FakeArm, kind: str) -> None:
    """A Resource Graph query that gets no answer once is sent again (azure-core would not
    retry a POST): every account judged, no error."""
    if kind == "ServiceRequestError":
        fake.refuse_connections = lambda: fake.refused_connections < 1
    else:
        fake.network_faults.append(fault(kind, after_first_page(fake), 1))
    report = fleet(fake)
    assert not report.all_errors
    assert len(report.results) == ACCOUNTS
    assert fake.refused_connections + sum(f.times == 0 for f in fake.network_faults) == 1


@pytest.mark.parametrize("kind", CLASSES)
def test_a_graph_page_never_answered_is_a_read_error_of_its_scope(fake: FakeArm, kind: str) -> None:
    """A Resource Graph query that gets no answer on every attempt is a network read error of
    its scope, named with the error class; the other scope, and the accounts of the pages read
    before it, are still judged."""
    if kind == "ServiceRequestError":
        # The run's first query (mg-a's subscriptions) meets only refused connections.
        fake.refuse_connections = lambda: fake.refused_connections < MAX_ATTEMPTS
        report = fleet(fake, "mg-a", "mg-b")
        judged = {r.account.resource_id for r in report.results}
        assert judged == accounts_in(fake, fleet_subscription(2))
        assert network_errors(report, kind) == ["resourceGraph/resources managementGroup mg-a"]
        return
    fake.network_faults.append(fault(kind, after_first_page(fake), MAX_ATTEMPTS))
    report = fleet(fake)
    assert len(report.results) == PAGE
    assert network_errors(report, kind) == ["resourceGraph/resources managementGroup mg-all"]


@pytest.mark.parametrize("kind", CLASSES)
@pytest.mark.parametrize("audit", ["fleet", "single"])
def test_an_account_read_without_answer_is_retried(fake: FakeArm, kind: str, audit: str) -> None:
    """A per-account ARM read that gets no answer once is sent again: every account judged
    as without the fault."""
    name = "fleet00000"
    if kind == "ServiceRequestError":
        fake.graph_page_size = ACCOUNTS
        before = listed_first(fake, audit)
        fake.refuse_connections = lambda: before() and fake.refused_connections < 1
    else:
        fake.network_faults.append(fault(kind, blob_service_of(fake, name), 1))
    report = fleet(fake) if audit == "fleet" else single(fake)
    assert not report.all_errors
    expected = ACCOUNTS if audit == "fleet" else len(accounts_in(fake, fleet_subscription(0)))
    assert len(report.results) == expected


@pytest.mark.parametrize("kind", CLASSES)
@pytest.mark.parametrize("audit", ["fleet", "single"])
def test_an_account_read_never_answered_is_a_read_error_of_that_account(
    fake: FakeArm, kind: str, audit: str
) -> None:
    """A per-account ARM read that gets no answer on every attempt is a network read error of
    that account, named with the error class; every account is still judged."""
    name = "fleet00000"
    if kind == "ServiceRequestError":
        # One page and concurrency 1: after the listing, the subscription's shared reads come
        # first (the fleet's role list and Defender plan fall back to per-account reads when
        # refused), then the first account's first read, refused on every attempt.
        fake.graph_page_size = ACCOUNTS
        shared = 2 if audit == "fleet" else 0
        before = listed_first(fake, audit)
        limit = (shared + 1) * MAX_ATTEMPTS
        fake.refuse_connections = lambda: before() and fake.refused_connections < limit
    else:
        fake.network_faults.append(fault(kind, blob_service_of(fake, name), MAX_ATTEMPTS))
    report = fleet(fake) if audit == "fleet" else single(fake)
    expected = ACCOUNTS if audit == "fleet" else len(accounts_in(fake, fleet_subscription(0)))
    assert len(report.results) == expected
    failed = [e for e in report.all_errors if e.kind is ErrorKind.NETWORK]
    assert failed
    assert {e.account for e in failed} == {name}
    assert all(e.message.startswith(f"{kind}:") for e in failed)


def test_a_stalled_page_through_the_cli_is_exit_3_with_every_report_written(
    fake: FakeArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`safetynet audit --read-timeout 1` over a Resource Graph page that stalls on every
    attempt exits 3, with the JSON report and the stream complete and no traceback."""
    fake.network_faults.append(
        NetworkFault("stall", after_first_page(fake), MAX_ATTEMPTS, seconds=2.5)
    )
    stream, output = tmp_path / "fleet.jsonl", tmp_path / "report.json"
    code = main(
        [
            "audit",
            "--management-group",
            "mg-all",
            "--read-timeout",
            "1",
            "--fail-on",
            "none",
            "--stream",
            str(stream),
            "--format",
            "json",
            "--output",
            str(output),
        ]
    )
    err = capsys.readouterr().err
    document = json.loads(output.read_text())
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    assert code == ExitCode.INCOMPLETE
    assert "Traceback" not in err
    assert [e["kind"] for e in document["errors"]] == ["network"]
    assert "ServiceResponseTimeoutError" in document["errors"][0]["message"]
    assert [x for x in lines if x["type"] == "error"] == [
        {"type": "error", **e} for e in document["errors"]
    ]
    assert document["summary"]["accounts"] == PAGE
