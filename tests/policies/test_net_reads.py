"""The live reads of the nets beside an account (sources/extensions.py), through the real SDK
pipeline against the fake ARM: locks at the account, its group and its subscription, the blob
service's diagnostic settings, the backup instances; and the fleet's one lock list per
subscription."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from blob_safetynet.policies.rules import Finding, Outcome
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AuditReport, ErrorKind, Scope
from blob_safetynet.policies.sources.throttle import MAX_ATTEMPTS, SharedThrottle
from testkit.arm_fake import (
    SUBSCRIPTION,
    TOKEN,
    Failure,
    FakeAccount,
    FakeArm,
    NetworkFault,
    blob_diagnostic_setting,
    compliant_account,
    fleet_subscription,
    management_lock,
)

GROUP = "rg-nets"
GROUP_ID = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}"


@pytest.fixture
def fake() -> Iterator[FakeArm]:
    with FakeArm() as server:
        yield server


def unlocked(name: str, group: str = GROUP, subscription: str = SUBSCRIPTION) -> FakeAccount:
    account = compliant_account(name, group, subscription)
    account.locks = []
    return account


def audit(
    fake: FakeArm, *, subscription_reads: bool = True, group: str | None = None
) -> AuditReport:
    return run_audit(
        Scope(SUBSCRIPTION, group),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        subscription_reads=subscription_reads,
        throttle=SharedThrottle(max_wait_s=0.01),
        concurrency=1,
    )


def finding(report: AuditReport, rule: str, account: str = "acct") -> Finding:
    return next(f for f in report.findings if f.rule.id == rule and f.account == account)


def delete_lock(fake: FakeArm, *, subscription_reads: bool = True) -> Finding:
    """SN-DELETE-LOCK on `acct` from one audit of the fake."""
    return finding(audit(fake, subscription_reads=subscription_reads), "SN-DELETE-LOCK")


def lock_group(fake: FakeArm, *locks: dict[str, Any]) -> None:
    """`locks` in GROUP's lock list."""
    fake.group_locks[f"{SUBSCRIPTION}/{GROUP}".lower()] = list(locks)


def test_every_net_passes_on_the_compliant_account(fake: FakeArm) -> None:
    """The recorded lock, diagnostic setting and backup instance pass the three rules."""
    fake.add(compliant_account("acct", GROUP))
    report = audit(fake)
    for rule in ("SN-DELETE-LOCK", "SN-BLOB-LOGGING", "SN-BACKUP-PROTECTED"):
        assert finding(report, rule).outcome is Outcome.PASS, rule
    assert "CanNotDelete lock 'keep' at the account." in finding(report, "SN-DELETE-LOCK").message
    assert "locks:resourceGroup" not in fake.served


def test_a_group_lock_is_reported_at_the_group(fake: FakeArm) -> None:
    """A lock at the account's resource group passes, named as the group's."""
    fake.add(unlocked("acct"))
    lock_group(fake, management_lock(GROUP_ID, "rg-keep"))
    found = delete_lock(fake)
    assert found.outcome is Outcome.PASS
    assert "lock 'rg-keep' at the resource group" in found.message
    assert "locks:subscription" not in fake.served


def test_a_subscription_lock_is_reported_as_the_subscriptions(fake: FakeArm) -> None:
    """A lock at the subscription passes, reported at the subscription, not the account."""
    fake.add(unlocked("acct"))
    sub_id = f"/subscriptions/{SUBSCRIPTION}"
    fake.subscription_locks[SUBSCRIPTION.lower()] = [management_lock(sub_id, "estate", "ReadOnly")]
    found = delete_lock(fake)
    assert found.outcome is Outcome.PASS
    assert "ReadOnly lock 'estate' at the subscription" in found.message
    assert "at the account" not in found.message


def test_no_lock_anywhere_fails(fake: FakeArm) -> None:
    """No lock at any of the three scopes, or only another account's, fails the rule."""
    fake.add(unlocked("acct"))
    other = fake.add(compliant_account("other", "rg-other"))
    fake.group_locks[f"{SUBSCRIPTION}/rg-other".lower()] = [
        management_lock(other.id.rsplit("/providers/", 1)[0], "theirs")
    ]
    assert delete_lock(fake).outcome is Outcome.FAIL


@pytest.mark.parametrize("status", [403, 404])
def test_an_unreadable_scope_without_a_lock_elsewhere_is_unknown(
    fake: FakeArm, status: int
) -> None:
    """The group's lock list refused, no lock at the other scopes: UNKNOWN naming the group and
    the reason, never a PASS; the refusal is a read error."""
    fake.add(unlocked("acct"))
    fake.lock_failures["resourceGroup"] = Failure(status)
    report = audit(fake)
    found = finding(report, "SN-DELETE-LOCK")
    assert found.outcome is Outcome.UNKNOWN
    kind = "permission" if status == 403 else "not-found"
    assert f"the resource group: management locks not read ({kind}" in found.message
    assert any(e.operation == "locks/list at the resource group" for e in report.all_errors)


def test_a_lock_at_a_readable_scope_passes_though_another_failed(fake: FakeArm) -> None:
    """The account's own lock list refused, its group's lock found: PASS."""
    account = fake.add(unlocked("acct"))
    account.failures["locks"] = Failure(403)
    lock_group(fake, management_lock(GROUP_ID))
    assert delete_lock(fake).outcome is Outcome.PASS


def test_a_dropped_lock_read_is_a_network_read_error(fake: FakeArm) -> None:
    """A lock list that gets no answer through every retry is a network read error, and the
    rule UNKNOWN, never a FAIL."""
    account = fake.add(unlocked("acct"))
    target = f"{account.id}/providers/Microsoft.Authorization/locks".lower()
    fake.network_faults.append(
        NetworkFault("drop", lambda method, path: path.lower() == target, MAX_ATTEMPTS)
    )
    report = audit(fake)
    assert finding(report, "SN-DELETE-LOCK").outcome is Outcome.UNKNOWN
    assert any(e.kind is ErrorKind.NETWORK for e in report.all_errors)


def test_without_subscription_reads_the_subscription_scope_is_named(fake: FakeArm) -> None:
    """An identity whose roles stop at the group leaves the subscription's locks unread: with
    no lock below, UNKNOWN says so."""
    fake.add(unlocked("acct"))
    found = delete_lock(fake, subscription_reads=False)
    assert found.outcome is Outcome.UNKNOWN
    assert "the subscription: a subscription-scope read" in found.message
    assert "locks:subscription" not in fake.served


def test_a_group_lock_list_is_read_once_for_its_accounts(fake: FakeArm) -> None:
    """Two unlocked accounts of one group share one read of the group's and the
    subscription's lock lists."""
    fake.add(unlocked("acct"))
    fake.add(unlocked("bcct"))
    audit(fake)
    assert fake.served["locks"] == 2
    assert (fake.served["locks:resourceGroup"], fake.served["locks:subscription"]) == (1, 1)


@pytest.mark.parametrize(
    ("categories", "workspace", "outcome", "says"),
    [
        (("StorageRead", "StorageWrite", "StorageDelete"), True, Outcome.PASS, "logs every"),
        (("allLogs",), True, Outcome.PASS, "logs every"),
        (("StorageWrite", "StorageDelete"), True, Outcome.FAIL, "sends StorageRead to"),
        (("StorageRead", "StorageWrite", "StorageDelete"), False, Outcome.FAIL, "sends"),
    ],
)
def test_the_blob_diagnostic_setting_is_judged(
    fake: FakeArm, categories: tuple[str, ...], workspace: bool, outcome: Outcome, says: str
) -> None:
    """The setting's categories and destination decide SN-BLOB-LOGGING; a FAIL names what is
    missing."""
    account = fake.add(compliant_account("acct", GROUP))
    account.diagnostic_settings = [
        blob_diagnostic_setting(account.id, categories, workspace=workspace)
    ]
    found = finding(audit(fake), "SN-BLOB-LOGGING")
    assert found.outcome is outcome
    assert says in found.message


def test_no_diagnostic_setting_fails_and_a_refused_read_is_unknown(fake: FakeArm) -> None:
    """No setting on the blob service fails; a refused list is UNKNOWN with a read error."""
    fake.add(compliant_account("acct", GROUP)).diagnostic_settings = []
    refused = fake.add(compliant_account("bcct", GROUP))
    refused.failures["diagnosticSettings"] = Failure(403)
    report = audit(fake)
    assert finding(report, "SN-BLOB-LOGGING").outcome is Outcome.FAIL
    assert finding(report, "SN-BLOB-LOGGING", "bcct").outcome is Outcome.UNKNOWN
    assert "diagnosticSettings/list" in finding(report, "SN-BLOB-LOGGING", "bcct").message


def test_backup_instances_decide_the_backup_rule(fake: FakeArm) -> None:
    """An instance passes, none fails, a failed list (500) is UNKNOWN."""
    fake.add(compliant_account("acct", GROUP))
    fake.add(compliant_account("bcct", GROUP)).backup_instances = []
    fake.add(compliant_account("ccct", GROUP)).failures["backupInstances"] = Failure(500)
    report = audit(fake)
    outcomes = [finding(report, "SN-BACKUP-PROTECTED", n).outcome for n in ("acct", "bcct", "ccct")]
    assert outcomes == [Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN]


def fleet(fake: FakeArm) -> AuditReport:
    return run_fleet_audit(
        Scope("", subscriptions=(SUBSCRIPTION, fleet_subscription(1))),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
        throttle=SharedThrottle(max_wait_s=0.01),
    )


def test_the_fleet_lists_locks_once_per_subscription(fake: FakeArm) -> None:
    """Six accounts in two subscriptions cost two lock lists, none per account or group, and
    each lock is matched to its accounts by scope: the group's, the subscription's."""
    second = fleet_subscription(1)
    for number in range(3):
        fake.add(unlocked(f"a{number}"))
        fake.add(unlocked(f"b{number}", "rg-b", second))
    lock_group(fake, management_lock(GROUP_ID, "rg"))
    fake.subscription_locks[second] = [management_lock(f"/subscriptions/{second}", "sub")]
    report = fleet(fake)
    assert fake.served["locks:subscription"] == 2
    assert "locks" not in fake.served
    assert "locks:resourceGroup" not in fake.served
    for number in range(3):
        assert (
            "'rg' at the resource group" in finding(report, "SN-DELETE-LOCK", f"a{number}").message
        )
        assert (
            "'sub' at the subscription" in finding(report, "SN-DELETE-LOCK", f"b{number}").message
        )


def test_a_fleet_whose_subscription_list_fails_reads_per_account(fake: FakeArm) -> None:
    """A subscription lock list refused: each account's and its group's lists are read
    instead, and a lock there still passes; without one, UNKNOWN names the subscription."""
    fake.add(compliant_account("acct", GROUP))
    fake.add(unlocked("bcct", "rg-bare"))
    fake.lock_failures["subscription"] = Failure(403)
    report = fleet(fake)
    assert finding(report, "SN-DELETE-LOCK").outcome is Outcome.PASS
    bare = finding(report, "SN-DELETE-LOCK", "bcct")
    assert bare.outcome is Outcome.UNKNOWN
    assert "the subscription: management locks not read (permission" in bare.message


def test_the_fleet_takes_backup_instances_from_the_subscriptions_vaults(fake: FakeArm) -> None:
    """Accounts a vault of their subscription protects cost no backup read of their own; one no
    vault names has its own list read (a vault elsewhere may hold it), and so do all when the
    vault list is refused."""
    for name in ("acct", "bcct"):
        fake.add(compliant_account(name, GROUP))
    fake.add(compliant_account("ccct", GROUP)).backup_instances = []
    report = fleet(fake)
    assert (fake.served["backupVaults"], fake.served["backupInstances"]) == (1, 1)
    outcomes = [finding(report, "SN-BACKUP-PROTECTED", n).outcome for n in ("acct", "bcct", "ccct")]
    assert outcomes == [Outcome.PASS, Outcome.PASS, Outcome.FAIL]
    fake.served.clear()
    fake.lock_failures["backupVaults"] = Failure(403)
    report = fleet(fake)
    assert fake.served["backupInstances"] == 3
    assert finding(report, "SN-BACKUP-PROTECTED").outcome is Outcome.PASS


def test_a_refused_subscription_lock_list_is_asked_once_in_a_fleet(fake: FakeArm) -> None:
    """Three accounts of a subscription whose lock list is refused: it is asked once, and each
    account's UNKNOWN still names the subscription."""
    for name in ("acct", "bcct", "ccct"):
        fake.add(unlocked(name))
    fake.lock_failures["subscription"] = Failure(403)
    report = fleet(fake)
    assert fake.served["locks:subscription"] == 1
    for name in ("acct", "bcct", "ccct"):
        assert "the subscription: management locks not read" in (
            finding(report, "SN-DELETE-LOCK", name).message
        )
