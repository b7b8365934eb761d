"""The fleet's fewer reads per account, each proved to leave every verdict of the per-account
path (`run_audit`, which reads everything for every account) unchanged: local users read only
where the account's settings leave the rule to them, the Defender for Storage setting only where
the subscription's plan reports a mix, and three ARM reads for an account that needs neither.

The fake ARM reports each plan's `resourcesCoverageStatus` from the accounts' own settings and
the tier, as Pricings - Get (2024-01-01) describes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AuditReport, Scope
from testkit.arm_fake import (
    TOKEN,
    FakeAccount,
    FakeArm,
    compliant_account,
    defender_setting,
    file_storage_account,
    fleet_subscription,
    local_user,
)

FULL_STANDARD, FULL_OWN, NONE, MIXED = (fleet_subscription(n) for n in range(4))
"""Standard plan inherited by all; Free plan, each account on by its own setting; Free plan,
none on; Standard plan, one account overriding it off."""
SETTINGS_ONLY = (
    "blobServices/default",
    "blobServices/default/containers",
    "managementPolicies/default",
    "blobServices/default/providers/Microsoft.Insights/diagnosticSettings",
)


def account(name: str, subscription: str) -> FakeAccount:
    return compliant_account(name, "rg-reads", subscription)


def with_local_users(
    item: FakeAccount, enabled: bool | None, sftp: bool, users: int
) -> FakeAccount:
    props = item.body["properties"]
    if enabled is None:
        props.pop("isLocalUserEnabled", None)
    else:
        props["isLocalUserEnabled"] = enabled
    props["isSftpEnabled"] = sftp
    item.local_users = [local_user(item.id, f"user{n}") for n in range(users)]
    return item


@pytest.fixture
def fake() -> Iterator[FakeArm]:
    """Four subscriptions, one per Defender plan state, each with accounts whose local user
    settings take every value (off, on with and without users, absent, SFTP on), and a
    FileStorage account."""
    with FakeArm(page_size=50) as server:
        server.plans = {
            FULL_STANDARD: "Standard",
            FULL_OWN: "Free",
            NONE: "Free",
            MIXED: "Standard",
        }
        for number, subscription in enumerate((FULL_STANDARD, FULL_OWN, NONE, MIXED)):
            made = [
                account(f"s{number}off", subscription),
                with_local_users(account(f"s{number}users", subscription), True, False, 2),
                with_local_users(account(f"s{number}nousers", subscription), True, False, 0),
                with_local_users(account(f"s{number}absent", subscription), None, False, 1),
                with_local_users(account(f"s{number}sftp", subscription), True, True, 1),
                with_local_users(account(f"s{number}sftponly", subscription), False, True, 0),
                file_storage_account(f"s{number}files", "rg-reads", subscription),
            ]
            for item in made:
                item.defender = (
                    defender_setting(item.id, enabled=True) if subscription == FULL_OWN else None
                )
                server.add(item)
        override = server.accounts["s3off"]
        override.defender = defender_setting(override.id, enabled=False)
        override.defender["properties"]["overrideSubscriptionLevelSettings"] = True
        server.management_groups["mg-reads"] = set(server.subscriptions())
        yield server


def verdicts(report: AuditReport) -> dict[tuple[str, str], tuple[str, str]]:
    return {
        (f.resource_id or f.account, f.rule.id): (f.outcome.value, f.message)
        for f in report.findings
    }


def per_account(fake: FakeArm) -> dict[tuple[str, str], tuple[str, str]]:
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for subscription in fake.subscriptions():
        report = run_audit(
            Scope(subscription),
            StaticTokenCredential(TOKEN),
            arm_endpoint=fake.endpoint,
            connection_verify=fake.ca_file,
        )
        assert not report.all_errors
        found.update(verdicts(report))
    return found


def fleet(fake: FakeArm) -> AuditReport:
    return run_fleet_audit(
        Scope("", management_groups=("mg-reads",)),
        StaticTokenCredential(TOKEN),
        arm_endpoint=fake.endpoint,
        connection_verify=fake.ca_file,
    )


def reads_by_account(fake: FakeArm) -> dict[str, list[str]]:
    """The ARM paths each account's reads asked for, relative to the account's id."""
    assert fake.arrivals is not None
    found: dict[str, list[str]] = {a.name: [] for a in fake.accounts.values()}
    for item in fake.accounts.values():
        prefix = item.id.lower() + "/"
        found[item.name] = [
            path[len(prefix) :]
            for _, method, path in fake.arrivals
            if method == "GET" and path.lower().startswith(prefix)
        ]
    return found


def test_fewer_reads_give_every_verdict_of_the_per_account_path(fake: FakeArm) -> None:
    """Every rule on every account gets the same outcome and message from the fleet as from
    the per-account path, which reads local users and the Defender setting everywhere."""
    expected = per_account(fake)
    report = fleet(fake)
    assert not report.all_errors
    assert verdicts(report) == expected
    outcomes = Counter(
        expected[(a.id, "SN-DEFENDER-FOR-STORAGE")][0] for a in fake.accounts.values()
    )
    assert outcomes == {"PASS": 20, "FAIL": 8}  # NONE's seven and MIXED's override
    local = {
        name: expected[(fake.accounts[name].id, "SN-NO-LOCAL-USERS")][0]
        for name in ("s0off", "s0users", "s0nousers", "s0absent", "s0sftp", "s0sftponly")
    }
    assert local == {
        "s0off": "PASS",
        "s0users": "FAIL",
        "s0nousers": "PASS",
        "s0absent": "FAIL",
        "s0sftp": "FAIL",
        "s0sftponly": "FAIL",
    }


def test_an_account_without_local_users_costs_four_reads(fake: FakeArm) -> None:
    """Under a plan that covers every account or none, an account with local users off is read
    four times (blob service, containers, management policy, blob diagnostic settings); local
    users are read only where the settings leave the rule to them; the Defender setting only
    under the mixed plan; the plan, the lock list and the Backup vaults once per subscription,
    never an account's lock or backup list."""
    fake.arrivals = []
    fleet(fake)
    reads = reads_by_account(fake)
    for number in range(3):
        assert sorted(reads[f"s{number}off"]) == sorted(SETTINGS_ONLY)
        assert reads[f"s{number}files"] == []
        for name in ("users", "nousers", "absent", "sftp", "sftponly"):
            assert sorted(reads[f"s{number}{name}"]) == sorted([*SETTINGS_ONLY, "localUsers"])
    defender = "providers/Microsoft.Security/defenderForStorageSettings/current"
    assert sorted(reads["s3off"]) == sorted([*SETTINGS_ONLY, defender])
    assert reads["s3files"] == [defender]
    assert fake.served["pricings"] == 4
    assert fake.served["locks:subscription"] == 4
    assert "locks" not in fake.served
    assert "locks:resourceGroup" not in fake.served
    assert (fake.served["backupVaults"], fake.served["backupVaults/instances"]) == (4, 4)
    assert "backupInstances" not in fake.served
