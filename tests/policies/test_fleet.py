"""The fleet audit: Resource Graph listing plus per-account ARM reads, against the fake ARM.

The fake serves Resource Graph's POST (paging by `$skipToken`, 429 with Retry-After on a
schedule) and the per-account reads for a generated fleet over several subscriptions; the real
azure-mgmt-resourcegraph, -storage and -authorization clients talk to it over loopback HTTPS.
"""

from __future__ import annotations

import io
import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blob_safetynet.cli.commands.audit_stream import Stream
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.policies.reports.stream import _record as spool_record
from blob_safetynet.policies.rules import Outcome
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AuditReport, ErrorKind, Scope
from blob_safetynet.policies.sources.throttle import MAX_ATTEMPTS, SharedThrottle
from blob_safetynet.settings.redaction import Redactor
from testkit.arm_fake import TOKEN, FakeArm, fleet_subscription, mixed_fleet
from tests import tree
from tests.policies.arm_env import use_fake_arm

SUBSCRIPTIONS = 3
ACCOUNTS = 23


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeArm]:
    """A fake ARM holding a mixed fleet over three subscriptions, pages of 5 records."""
    with FakeArm(page_size=4) as server:
        server.graph_page_size = 5
        for account in mixed_fleet(ACCOUNTS, SUBSCRIPTIONS):
            server.add(account)
        server.management_groups["mg-all"] = set(server.subscriptions())
        use_fake_arm(server, monkeypatch)
        yield server


def fleet_audit(fake: FakeArm, scope: Scope, **options: Any) -> AuditReport:
    return run_fleet_audit(
        scope,
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        **options,
    )


def verdicts(report: AuditReport) -> dict[tuple[str, str], Outcome]:
    return {(f.resource_id or f.account, f.rule.id): f.outcome for f in report.findings}


def all_subscriptions() -> tuple[str, ...]:
    return tuple(fleet_subscription(n) for n in range(SUBSCRIPTIONS))


def test_fleet_verdicts_equal_the_per_account_path(fake: FakeArm) -> None:
    """Every account of the fleet is judged exactly once, with the verdicts the
    per-subscription path gives the same accounts."""
    report = fleet_audit(fake, Scope("", management_groups=("mg-all",)))
    per_account: dict[tuple[str, str], Outcome] = {}
    for subscription in all_subscriptions():
        one = run_audit(
            Scope(subscription),
            StaticTokenCredential(TOKEN),
            arm_endpoint=fake.endpoint,
            connection_verify=fake.ca_file,
        )
        assert not one.all_errors
        per_account.update(verdicts(one))
    ids = [r.account.resource_id for r in report.results]
    assert sorted(ids) == sorted(a.id for a in fake.accounts.values())
    assert len(set(ids)) == len(ids) == ACCOUNTS
    assert not report.all_errors
    assert verdicts(report) == per_account
    assert {Outcome.PASS, Outcome.FAIL} <= set(per_account.values())


def test_an_account_in_two_scopes_is_judged_once(fake: FakeArm) -> None:
    """A subscription named beside a management group that holds it is not judged twice."""
    scope = Scope("", subscriptions=(fleet_subscription(1),), management_groups=("mg-all",))
    report = fleet_audit(fake, scope)
    ids = [r.account.resource_id for r in report.results]
    assert len(ids) == len(set(ids)) == ACCOUNTS


def test_listing_follows_skip_tokens_page_by_page(fake: FakeArm) -> None:
    """With five records a page, the listing asks for every page and no more."""
    report = fleet_audit(fake, Scope("", management_groups=("mg-all",)))
    assert len(report.results) == ACCOUNTS
    assert fake.served["graph:storageaccounts"] == -(-ACCOUNTS // fake.graph_page_size)


def test_unreadable_subscription_is_unknown_and_the_rest_is_judged(
    fake: FakeArm, tmp_path: Path
) -> None:
    """A subscription the caller cannot read is a read error (exit 3), the others are judged."""
    hidden = fleet_subscription(2)
    fake.unreadable_subscriptions.add(hidden)
    args = [f"--subscription={s}" for s in all_subscriptions()]
    output = tmp_path / "report.json"
    code = main(["audit", *args, "--format", "json", "--fail-on", "none", "--output", str(output)])
    document = json.loads(output.read_text())
    assert code == ExitCode.INCOMPLETE
    assert any(hidden in e["operation"] and e["kind"] == "permission" for e in document["errors"])
    judged = {f["resource_id"].split("/")[2] for f in document["findings"]}
    assert judged == set(all_subscriptions()) - {hidden}


def test_throttled_listing_waits_retry_after_and_finishes(fake: FakeArm) -> None:
    """A 429 on a Resource Graph page is waited out at the shared gate and the page read again."""
    fake.graph_throttle_schedule = {2}
    throttle = SharedThrottle()
    report = fleet_audit(fake, Scope("", management_groups=("mg-all",)), throttle=throttle)
    assert len(report.results) == ACCOUNTS
    assert not report.all_errors
    assert throttle.throttled == 1
    assert throttle.waited_s >= fake.retry_after_s


def test_throttled_account_read_is_retried_once_for_everyone(fake: FakeArm) -> None:
    """Each 429 on a per-account read costs exactly one more request after Retry-After (no
    retry storm from the other workers), and the audit completes without a read error."""
    scope = Scope("", management_groups=("mg-all",))
    fleet_audit(fake, scope, concurrency=4)
    unthrottled = fake.arm_gets
    fake.arm_gets = 0
    fake.arm_throttle_schedule = {3, 4, 5}
    throttle = SharedThrottle()
    report = fleet_audit(fake, scope, throttle=throttle, concurrency=4)
    assert not report.all_errors
    assert len(report.results) == ACCOUNTS
    assert throttle.throttled == 3
    assert fake.arm_gets == unthrottled + 3
    assert throttle.waited_s >= fake.retry_after_s


def test_throttled_beyond_the_bound_is_a_read_error_not_a_hang(fake: FakeArm) -> None:
    """A read refused on every attempt becomes an HTTP read error after MAX_ATTEMPTS tries,
    and the rules that needed it are UNKNOWN."""
    fake.arm_throttle_schedule = set(range(1, 100_000))
    fake.retry_after_s = 0
    scope = Scope("", subscriptions=(fleet_subscription(1),))
    report = fleet_audit(fake, scope, throttle=SharedThrottle(max_wait_s=0.01))
    accounts = [a for a in fake.accounts.values() if a.subscription == fleet_subscription(1)]
    assert len(report.results) == len(accounts)
    assert report.all_errors
    assert {e.kind for e in report.all_errors} == {ErrorKind.HTTP}
    assert any(f.outcome is Outcome.UNKNOWN for f in report.findings)
    # The subscription's atScope() list, its Defender plan and its Backup vaults, refused too:
    # read per account (its lock list, refused once, is a read error of the first account).
    per_subscription = 3
    assert fake.arm_gets == (len(report.all_errors) + per_subscription) * MAX_ATTEMPTS
    assert any(e.operation == "roleAssignments/list" for e in report.all_errors)


def test_quota_header_at_zero_closes_the_gate() -> None:
    """Resource Graph's spent quota waits for its reset; a 429 waits its Retry-After."""
    now = [100.0]
    slept: list[float] = []
    gate = SharedThrottle(clock=lambda: now[0], sleep=slept.append, jitter=lambda: 0.0)
    gate.observe(
        200, {"x-ms-user-quota-remaining": "0", "x-ms-user-quota-resets-after": "00:00:03"}
    )

    def advance(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    gate._sleep = advance
    gate.wait_turn()
    assert slept == [3.0]
    gate.observe(429, {"Retry-After": "7"})
    gate.wait_turn()
    assert slept == [3.0, 7.0]
    assert gate.throttled == 1


def test_fleet_flags_refuse_a_resource_group(
    fake: FakeArm, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fleet scope with --resource-group is bad usage (exit 2), nothing is read."""
    code = main(["audit", "--management-group", "mg-all", "--resource-group", "rg-fleet"])
    assert code == ExitCode.USAGE
    assert "--resource-group" in capsys.readouterr().err
    assert fake.requests == 0


def test_bad_management_group_id_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """A management group id Azure would refuse is exit 2 with the rule named."""
    code = main(["audit", "--management-group", "mg/../x"])
    assert code == ExitCode.USAGE
    assert "management group" in capsys.readouterr().err


def test_all_subscriptions_lists_them_and_judges_each(fake: FakeArm, tmp_path: Path) -> None:
    """--all-subscriptions reads the subscription list, then judges every account in them."""
    output = tmp_path / "report.json"
    code = main(["audit", "--all-subscriptions", "--format", "json", "--output", str(output)])
    document = json.loads(output.read_text())
    assert code == ExitCode.FINDINGS
    assert not document["errors"]
    assert len({f["resource_id"] for f in document["findings"]}) == ACCOUNTS


def test_several_subscriptions_share_one_paged_query(fake: FakeArm) -> None:
    """Readable subscriptions are listed by one query (Resource Graph's quota counts queries);
    an unreadable one among them is found by halving the check of which are readable, reported,
    and left out, and the others are still listed together, not one at a time."""
    report = fleet_audit(fake, Scope("", subscriptions=all_subscriptions()))
    assert len(report.results) == ACCOUNTS
    assert fake.served["graph:storageaccounts"] == -(-ACCOUNTS // fake.graph_page_size)
    fake.served.clear()
    hidden = fleet_subscription(0)
    fake.unreadable_subscriptions.add(hidden)
    report = fleet_audit(fake, Scope("", subscriptions=all_subscriptions()))
    readable = [a for a in fake.accounts.values() if a.subscription != hidden]
    assert [(e.kind, hidden in e.operation) for e in report.errors] == [
        (ErrorKind.PERMISSION, True)
    ]
    assert len(report.results) == len(readable)
    assert fake.served["graph:storageaccounts"] == -(-len(readable) // fake.graph_page_size)
    assert fake.served["graph:subscriptions"] == 3  # all three, then [0] and [1, 2]


def test_stream_writes_every_verdict_as_json_lines(
    fake: FakeArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stream holds one line per finding of every account, the same verdicts as the JSON
    report; with stderr not a terminal no progress line is printed."""
    stream, output = tmp_path / "fleet.jsonl", tmp_path / "report.json"
    reports = ["--stream", str(stream), "--format", "json", "--output", str(output)]
    code = main(["audit", "--management-group", "mg-all", *reports])
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    document = json.loads(output.read_text())
    assert code == ExitCode.FINDINGS
    streamed = {(x["resource_id"], x["rule"]): x["outcome"] for x in lines}
    reported = {(f["resource_id"], f["rule"]): f["outcome"] for f in document["findings"]}
    assert streamed == reported
    assert len(lines) == len(document["findings"])
    assert "accounts judged" not in capsys.readouterr().err


def test_stream_replaces_a_planted_link_and_is_owner_only(fake: FakeArm, tmp_path: Path) -> None:
    """A --stream FILE that is a symlink to another file: the link is replaced by a new file of
    mode 0600 holding the verdicts, and the file it pointed to is left as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    stream = tmp_path / "fleet.jsonl"
    stream.symlink_to(victim)
    code = main(["audit", "--management-group", "mg-all", "--stream", str(stream)])
    assert code == ExitCode.FINDINGS
    assert victim.read_text() == "keep"
    assert not stream.is_symlink()
    assert stat.S_IMODE(stream.stat().st_mode) & 0o077 == 0
    assert json.loads(stream.read_text().splitlines()[0])["type"] in ("finding", "error")


def test_progress_line_on_a_terminal_counts_accounts(fake: FakeArm) -> None:
    """On a terminal the progress line ends with the number of accounts judged."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    throttle = SharedThrottle()
    with Stream(None, Redactor(), throttle, terminal) as stream:
        fleet_audit(fake, Scope("", management_groups=("mg-all",)), on_result=stream.result)
    assert f"{ACCOUNTS} accounts judged" in terminal.getvalue().rsplit("\r", 1)[-1]


def test_stream_needs_a_fleet_scope(fake: FakeArm, tmp_path: Path) -> None:
    """--stream with a single-subscription audit is bad usage (exit 2), nothing is read."""
    code = main(["audit", "--stream", str(tmp_path / "x.jsonl")])
    assert code == ExitCode.USAGE
    assert fake.requests == 0


def test_truncated_listing_without_skip_token_is_incomplete(fake: FakeArm) -> None:
    """A page marked resultTruncated with no $skipToken is a malformed listing (exit 3 read
    error), and the accounts it did list are still judged."""
    fake.graph_truncates = True
    report = fleet_audit(fake, Scope("", management_groups=("mg-all",)))
    assert len(report.results) == fake.graph_page_size
    assert [e.kind for e in report.errors] == [ErrorKind.MALFORMED]
    assert "truncated" in report.errors[0].message


def test_unreadable_management_group_is_a_read_error_beside_the_judged_ones(
    fake: FakeArm,
) -> None:
    """A management group the caller cannot read is a permission error of that group; the
    group beside it is still judged in full."""
    scope = Scope("", management_groups=("mg-hidden", "mg-all"))
    report = fleet_audit(fake, scope)
    assert len(report.results) == ACCOUNTS
    assert [(e.kind, "mg-hidden" in e.operation) for e in report.errors] == [
        (ErrorKind.PERMISSION, True)
    ]


FILE_SIZE_LIMITED = (
    "import resource, sys\n"
    "limit = int(sys.argv.pop(1))\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "from blob_safetynet.cli.main import console_main\n"
    "console_main()\n"
)
"""The console script with RLIMIT_FSIZE set: a write past the limit fails with EFBIG (Python
ignores SIGXFSZ), as a full disk fails one with ENOSPC."""


def test_a_stream_file_that_cannot_be_written_is_an_output_error_and_the_report_is_whole(
    fake: FakeArm, tmp_path: Path
) -> None:
    """A --stream file that meets EFBIG part-way: the fleet is still judged, the JSON report on
    stdout holds every account, and the run exits 2 naming the file, without a traceback."""
    measured = tmp_path / "measured.jsonl"
    spooled: list[int] = []

    def judged(stream: Stream) -> Any:
        return lambda result: (stream.result(result), spooled.append(len(spool_record(result))))

    with Stream(measured, Redactor(), SharedThrottle()) as stream:
        fleet_audit(fake, Scope("", management_groups=("mg-all",)), on_result=judged(stream))
    streamed, spool = measured.stat().st_size, sum(spooled)
    assert streamed > spool * 1.05, "the premise: the stream outgrows the audit's own spool"
    limit = (streamed + spool) // 2
    target = tmp_path / "fleet.jsonl"
    audit = ["audit", "--management-group", "mg-all", "--stream", str(target), "--format", "json"]

    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED, str(limit), *audit],
        capture_output=True,
        text=True,
        env=tree.environment(),
        cwd=tmp_path,
        timeout=300,
        check=False,
    )

    assert done.returncode == ExitCode.USAGE, done.stderr
    assert f"safetynet audit: cannot write --stream '{target}': File too large" in done.stderr
    assert "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert len({f["resource_id"] for f in document["findings"]}) == ACCOUNTS
    assert 0 < target.stat().st_size <= limit
