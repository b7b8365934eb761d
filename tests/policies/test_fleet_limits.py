"""What the fleet audit cannot see, said: Resource Graph's own throttling headers honoured, waits
honoured up to a bound and reported past it, pages that would never end stopped, rows without
an id refused, subscriptions Resource Graph leaves out named, accounts deleted since the listing
reported as deleted, and what the run cost in the JSON summary. Against the fake ARM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.rules import Outcome
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.graph import MAX_EMPTY_PAGES
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AuditReport, ErrorKind, Scope
from blob_safetynet.policies.sources.throttle import SharedThrottle
from testkit.arm_fake import (
    SUBSCRIPTION,
    TOKEN,
    Failure,
    FakeArm,
    file_storage_account,
    fleet_subscription,
    mixed_fleet,
)
from tests.policies.arm_env import use_fake_arm

SUBSCRIPTIONS = 3
ACCOUNTS = 15
PAGE = 5


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A mixed fleet of 15 accounts over three subscriptions under mg-all; pages of 5."""
    with FakeArm(page_size=PAGE) as server:
        server.graph_page_size = PAGE
        for account in mixed_fleet(ACCOUNTS, SUBSCRIPTIONS):
            server.add(account)
        server.management_groups["mg-all"] = set(server.subscriptions())
        use_fake_arm(server, monkeypatch)
        yield server


def fleet_audit(fake: FakeArm, scope: Scope | None = None, **options: Any) -> AuditReport:
    return run_fleet_audit(
        scope or Scope("", management_groups=("mg-all",)),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        **options,
    )


def cli_json(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    output = tmp_path / "report.json"
    code = main(["audit", *args, "--format", "json", "--fail-on", "none", "--output", str(output)])
    return code, json.loads(output.read_text())


def test_a_quota_429_without_retry_after_waits_for_the_quota_reset(fake: FakeArm) -> None:
    """A Resource Graph 429 with only x-ms-user-quota-remaining 0 and resets-after 2 s is
    retried after the reset, and no query is sent inside the window: every account judged."""
    fake.graph_quota_only = True
    fake.retry_after_s = 2
    fake.graph_throttle_schedule = {2}
    fake.arrivals = []
    throttle = SharedThrottle()
    report = fleet_audit(fake, throttle=throttle)
    queries = [at for at, method, _ in fake.arrivals if method == "POST"]
    assert not report.all_errors
    assert len(report.results) == ACCOUNTS
    assert throttle.throttled == 1
    assert queries[2] - queries[1] >= fake.retry_after_s


def test_retry_after_is_honoured_beyond_the_backoff_bound(fake: FakeArm) -> None:
    """A Retry-After of 2 s is waited in full although the backoff bound is 0.5 s (the old
    60 s cut sent requests inside the window): the subscription's next read comes after it."""
    slow = fleet_subscription(1)
    fake.retry_after_s = 2
    fake.throttled_subscriptions[slow] = 1
    fake.arrivals = []
    report = fleet_audit(fake, throttle=SharedThrottle(max_wait_s=0.5), concurrency=4)
    reads = [at for at, method, path in fake.arrivals if method == "GET" and slow in path]
    assert not report.all_errors
    assert reads[1] - reads[0] >= fake.retry_after_s


def test_retry_after_beyond_the_bound_is_reported_and_nothing_sent_inside_it(
    fake: FakeArm,
) -> None:
    """A Retry-After longer than the audit's bound is not waited: the subscription's reads in
    the window are read errors that name the wait and the bound, none of them is sent, and the
    other subscriptions are judged in full."""
    slow = fleet_subscription(1)
    fake.retry_after_s = 3
    fake.throttled_subscriptions[slow] = 1
    fake.arrivals = []
    throttle = SharedThrottle(max_retry_after_s=1)
    report = fleet_audit(fake, throttle=throttle, concurrency=4)
    reads = [at for at, method, path in fake.arrivals if method == "GET" and slow in path]
    refused = [e for e in report.all_errors if "longer than the audit waits (1 s)" in e.message]
    assert refused
    assert all("3 s" in e.message and e.kind is ErrorKind.HTTP for e in refused)
    assert {e.account for e in report.all_errors} <= {
        a.name for a in fake.accounts.values() if a.subscription == slow
    }
    assert all(at - reads[0] >= fake.retry_after_s for at in reads[1:])
    assert throttle.beyond_bound >= 1


def test_a_skip_token_answered_twice_ends_the_listing_with_an_error(fake: FakeArm) -> None:
    """A $skipToken Resource Graph had given before is an error of the scope as soon as it
    comes back, not a listing that never ends; the accounts of the pages read are judged once."""
    fake.graph_repeats_token = True
    report = fleet_audit(fake)
    assert [e.kind for e in report.errors] == [ErrorKind.MALFORMED]
    assert "$skipToken it had given before" in report.errors[0].message
    assert fake.served["graph:storageaccounts"] == 2
    assert len(report.results) == 2 * PAGE


def test_empty_pages_with_a_token_end_the_listing_with_an_error(fake: FakeArm) -> None:
    """Empty pages that keep carrying a fresh $skipToken end the listing after a few, as an
    error of the scope."""
    fake.graph_empty_pages = True
    report = fleet_audit(fake)
    assert [e.kind for e in report.errors] == [ErrorKind.MALFORMED]
    assert "empty pages" in report.errors[0].message
    assert fake.served["graph:storageaccounts"] == 1 + MAX_EMPTY_PAGES
    assert len(report.results) == PAGE


def test_rows_without_an_id_are_an_input_error_not_one_account(fake: FakeArm) -> None:
    """Two rows without an id are one input error of the scope that counts them; neither is
    judged, and they do not collapse into a judged account."""
    fake.graph_rows_without_id = 2
    report = fleet_audit(fake)
    assert [(e.kind, e.message.startswith("2 row(s)")) for e in report.errors] == [
        (ErrorKind.MALFORMED, True)
    ]
    assert len(report.results) == ACCOUNTS - 2
    assert all(r.account.resource_id for r in report.results)


def test_a_subscription_the_group_holds_and_graph_leaves_out_is_named(
    fake: FakeArm, tmp_path: Path
) -> None:
    """A subscription under the management group that Resource Graph leaves out (the caller
    cannot read it) is a permission read error naming it, exit 3; the others are judged."""
    hidden = fleet_subscription(2)
    fake.unreadable_subscriptions.add(hidden)
    code, document = cli_json(tmp_path, "--management-group", "mg-all")
    judged = {f["resource_id"].split("/")[2] for f in document["findings"]}
    assert code == ExitCode.INCOMPLETE
    assert [(e["kind"], hidden in e["operation"]) for e in document["errors"]] == [
        ("permission", True)
    ]
    assert "under management group mg-all" in document["errors"][0]["message"]
    assert judged == set(fake.subscriptions()) - {hidden}


def test_a_listed_subscription_graph_leaves_out_is_named(fake: FakeArm, tmp_path: Path) -> None:
    """--all-subscriptions names a subscription the tenant lists and Resource Graph cannot
    read, exit 3; the others are judged."""
    hidden = fleet_subscription(1)
    fake.unreadable_subscriptions.add(hidden)
    code, document = cli_json(tmp_path, "--all-subscriptions")
    assert code == ExitCode.INCOMPLETE
    assert [(e["kind"], hidden in e["operation"]) for e in document["errors"]] == [
        ("permission", True)
    ]
    assert "listed by the tenant" in document["errors"][0]["message"]
    assert len({f["resource_id"] for f in document["findings"]}) == ACCOUNTS - len(
        [a for a in fake.accounts.values() if a.subscription == hidden]
    )


def test_descendants_unreadable_is_said_and_the_group_still_judged(fake: FakeArm) -> None:
    """A management group whose descendants cannot be listed is a read error that says the
    unreadable subscriptions could not be named and how to fix it; its accounts are judged."""
    fake.descendants_failure = Failure(403)
    report = fleet_audit(fake)
    assert [e.kind for e in report.errors] == [ErrorKind.PERMISSION]
    assert "could not be named" in report.errors[0].message
    assert len(report.results) == ACCOUNTS


@pytest.mark.parametrize("audit", ["fleet", "single"])
def test_an_account_deleted_since_the_listing_is_deleted_never_pass(
    fake: FakeArm, audit: str
) -> None:
    """An account that Resource Graph (or the ARM list) still lists and ARM answers 404 for,
    a FileStorage one under a Standard plan included (the plan alone would PASS Defender), is
    reported as deleted: every rule NOT_APPLICABLE, no read error."""
    fake.defender_plan = "Standard"
    fake.plan_reports_coverage = False
    blob = fake.accounts["fleet00000"]
    files = fake.add(file_storage_account("gonefiles", "rg-fleet", SUBSCRIPTION))
    files.defender = None
    for account in (blob, files):
        account.deleted = True
    report = (
        fleet_audit(fake)
        if audit == "fleet"
        else run_audit(
            Scope(SUBSCRIPTION),
            StaticTokenCredential(TOKEN),
            arm_endpoint=fake.endpoint,
            connection_verify=fake.ca_file,
        )
    )
    gone = {r.account.name: r for r in report.results if r.deleted}
    assert set(gone) == {"fleet00000", "gonefiles"}
    for result in gone.values():
        assert {f.outcome for f in result.findings} == {Outcome.NOT_APPLICABLE}
        assert not result.errors
    assert not report.all_errors


def test_the_json_summary_counts_requests_and_deleted_accounts(
    fake: FakeArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON summary holds the requests the run sent, the requests per account judged and
    the accounts deleted since the listing; the stderr says how many were deleted."""
    fake.accounts["fleet00001"].deleted = True
    before = fake.requests
    code, document = cli_json(tmp_path, "--management-group", "mg-all")
    summary = document["summary"]
    assert summary["requests"] == fake.requests - before
    assert summary["requests_per_account"] == round(summary["requests"] / ACCOUNTS, 2)
    assert summary["deleted"] == 1
    assert summary["accounts"] == ACCOUNTS
    assert "1 account(s) deleted after they were listed" in capsys.readouterr().err
    assert code == ExitCode.OK
