"""A skewed estate for the fake ARM: subscriptions of very different sizes, as real estates are
(the fleet benchmark, benchmarks/fleet.py).

`SKEW` gives the three largest subscriptions 15, 14 and 13 % of the accounts and spreads the
rest over the others, fewer in each; the accounts are varied as `arm_fake.mixed_fleet` varies
them, and every twentieth has local users on (with one). The Defender for Storage plans are
those of an estate that requires it: the Standard plan inherited everywhere, except two small
subscriptions where one account overrides it off (their plans report PartiallyCovered, so the
fleet reads those accounts' own settings) and one on the Free plan with nothing on.
"""

from __future__ import annotations

from collections.abc import Iterator

from testkit.arm_fake import (
    FakeAccount,
    FakeArm,
    compliant_account,
    defender_setting,
    file_storage_account,
    fleet_subscription,
    local_user,
    set_path,
)

SKEW = (0.15, 0.14, 0.13)
"""The shares of the three largest subscriptions."""
LOCAL_USERS_EVERY = 20
MIXED_PLANS = (20, 21)
"""Subscriptions (by number) whose plan reports PartiallyCovered."""
FREE_PLAN = 23


def sizes(count: int, subscriptions: int) -> list[int]:
    """Accounts per subscription: the three largest at `SKEW`, the rest falling off linearly;
    they add up to `count`."""
    largest = [round(count * share) for share in SKEW]
    rest = subscriptions - len(largest)
    weights = [rest - n for n in range(rest)]
    left = count - sum(largest)
    spread = [left * w // sum(weights) for w in weights]
    spread[0] += left - sum(spread)
    return largest + spread


def skewed_fleet(count: int, subscriptions: int = 24) -> Iterator[FakeAccount]:
    """`count` accounts over `subscriptions` subscriptions of `sizes`, names interleaved so that
    a listing in name order mixes them as a real one does."""
    number = 0
    for subscription, size in enumerate(sizes(count, subscriptions)):
        for _ in range(size):
            yield _account(number, fleet_subscription(subscription))
            number += 1


def _account(number: int, subscription: str) -> FakeAccount:
    name = f"f{(number * 7919) % 1_000_003:07d}{number % 10}"
    account = (
        file_storage_account(name, "rg-fleet", subscription)
        if number % 11 == 10
        else compliant_account(name, "rg-fleet", subscription)
    )
    if number % 3 == 0:
        set_path(account.body, "properties.allowBlobPublicAccess", True)
    if number % 5 == 0:
        account.management_policy = None
    if number % LOCAL_USERS_EVERY == 7 and account.body["kind"] != "FileStorage":
        set_path(account.body, "properties.isLocalUserEnabled", True)
        account.local_users = [local_user(account.id)]
    account.defender = None
    return account


def set_plans(fake: FakeArm, subscriptions: int = 24) -> None:
    """The plans of an estate that requires Defender for Storage (module docstring)."""
    fake.defender_plan = "Standard"
    fake.plans[fleet_subscription(FREE_PLAN)] = "Free"
    for number in MIXED_PLANS:
        subscription = fleet_subscription(number)
        first = next(a for a in fake.accounts.values() if a.subscription == subscription)
        first.defender = defender_setting(first.id, enabled=False)
        first.defender["properties"]["overrideSubscriptionLevelSettings"] = True
