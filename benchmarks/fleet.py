"""A skewed fleet of 24 subscriptions (the three largest hold 15, 14 and 13 % of the accounts:
testkit/fleets.py), audited through Resource Graph on the fake ARM with ARM's documented
per-subscription read bucket modelled, beside the per-account path for its verdicts.

The fake ARM (testkit.arm_fake) runs in a process of its own with a 10 ms delay on every request
and `model_arm_throttling`: a read bucket of 250 per subscription refilled at 25 a second
("Subscription | reads | 250 | 25", applied per subscription, per security principal:
https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling)
and Resource Graph's example quota of 15 queries per 5 seconds. Each audit runs in a fresh
process, so its peak RSS (ru_maxrss) is its own.

ARM's bucket sets a floor no client can beat: a subscription that needs R reads takes at least
(R - 250) / 25 seconds. The largest subscription's floor is the fleet's, whatever the
concurrency; only fewer reads per account lower it.

`SAFETYNET_BENCH_FLEET_SIZES` (default "1000,10000") sets the fleet sizes;
`SAFETYNET_BENCH_FLEET_BASELINE_SIZES` (default "1000") the sizes at which the per-account path
(`run_audit` over each subscription in turn, every read for every account) also runs and the
two verdicts are compared. On a shared machine run small ones:
`SAFETYNET_BENCH_FLEET_SIZES=1000,4000 python -m benchmarks fleet`.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection

from benchmarks import machine
from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.fleet import run_fleet_audit
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import AccountResult, Scope
from blob_safetynet.policies.sources.throttle import SharedThrottle
from testkit.arm_fake import TOKEN, FakeArm, fleet_subscription
from testkit.fleets import MIXED_PLANS, set_plans, sizes, skewed_fleet

SUBSCRIPTIONS = 24
CONCURRENCY = 16
MODELED_LATENCY_S = 0.010
BUCKET, REFILL_PER_S = 250, 25
SIZES_ENV = "SAFETYNET_BENCH_FLEET_SIZES"
BASELINE_SIZES_ENV = "SAFETYNET_BENCH_FLEET_BASELINE_SIZES"
TARGET_S_AT_10000 = 300.0
TARGET_READS = 4
"""Blob service, containers, management policy and (since issue 46) the blob service's
diagnostic settings, which no list beside the account holds; locks and backup instances are
read once per subscription."""


@dataclass(frozen=True)
class Run:
    seconds: float
    requests: int
    """Sent by the audit (its throttle's count: retries and 429s included)."""
    peak_rss_mib: float
    accounts: int
    errors: int
    throttled: int
    verdicts: str
    """An order-free digest of every (account, rule, outcome)."""
    load: float
    """The 1-minute load average when the audit finished (the machine is shared)."""


@dataclass(frozen=True)
class Served:
    """What the fake ARM answered during one audit."""

    reads: dict[str, int]
    """Answered requests under each account."""
    largest: int
    """ARM reads the largest subscription's bucket paid for."""
    classes: dict[str, str]
    """Each account's class: "off" (local users off, plan covers all or none), "users" (local
    users on), "mixed" (its plan reports a mix), "files" (FileStorage)."""


def _serve(conn: Connection, accounts: int) -> None:
    with FakeArm(page_size=100, latency_seconds=MODELED_LATENCY_S) as fake:
        for account in skewed_fleet(accounts, SUBSCRIPTIONS):
            fake.add(account)
        set_plans(fake)
        fake.management_groups["mg-estate"] = set(fake.subscriptions())
        mixed = {fleet_subscription(n) for n in MIXED_PLANS}
        classes = {
            a.name: "files"
            if a.body["kind"] == "FileStorage"
            else "users"
            if a.local_users
            else "mixed"
            if a.subscription in mixed
            else "off"
            for a in fake.accounts.values()
        }
        conn.send((fake.endpoint, fake.ca_file))
        while conn.recv() == "start":
            fake.model_arm_throttling()  # a fresh budget for each audit
            fake.account_reads.clear()
            fake.subscription_reads.clear()
            conn.send("ready")
            conn.recv()
            largest = fleet_subscription(0)
            conn.send(Served(dict(fake.account_reads), fake.subscription_reads[largest], classes))


def _digest(results: list[AccountResult]) -> tuple[int, int]:
    total = 0
    for result in results:
        for finding in result.findings:
            key = f"{result.account.resource_id}|{finding.rule.id}|{finding.outcome.value}"
            total += int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "big")
    return total % (1 << 128), len(results)


def _audit(conn: Connection, kind: str, endpoint: str, ca_file: str) -> None:
    """One audit in this (fresh) process; sends back its figures."""
    throttle = SharedThrottle()
    credential = StaticTokenCredential(TOKEN)
    options = {
        "arm_endpoint": endpoint,
        "connection_verify": ca_file,
        "concurrency": CONCURRENCY,
        "throttle": throttle,
    }
    digest, accounts, errors = 0, 0, 0
    started = time.perf_counter()
    if kind == "fleet":

        def judged(result: AccountResult) -> None:
            nonlocal digest, accounts, errors
            value, _ = _digest([result])
            digest = (digest + value) % (1 << 128)
            accounts += 1
            errors += len(result.errors)

        report = run_fleet_audit(
            Scope("", management_groups=("mg-estate",)),
            credential,
            on_result=judged,
            keep_results=False,
            **options,  # type: ignore[arg-type]
        )
        errors += len(report.errors)
    else:
        for number in range(SUBSCRIPTIONS):
            one = run_audit(Scope(fleet_subscription(number)), credential, **options)  # type: ignore[arg-type]
            value, count = _digest(one.results)
            digest, accounts = (digest + value) % (1 << 128), accounts + count
            errors += len(one.all_errors)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send(
        (seconds, throttle.sent, peak, accounts, errors, throttle.throttled, f"{digest:032x}")
    )


def _measure(size: int, kinds: tuple[str, ...]) -> dict[str, tuple[Run, Served]]:
    context = multiprocessing.get_context("spawn")
    conn, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, size), daemon=True)
    server.start()
    endpoint, ca_file = conn.recv()
    runs: dict[str, tuple[Run, Served]] = {}
    try:
        for kind in kinds:
            conn.send("start")
            conn.recv()
            mine, theirs = context.Pipe()
            worker = context.Process(target=_audit, args=(theirs, kind, endpoint, ca_file))
            worker.start()
            seconds, sent, peak, accounts, errors, throttled, digest = mine.recv()
            worker.join()
            conn.send("count")
            served: Served = conn.recv()
            load = os.getloadavg()[0]
            run = Run(seconds, sent, peak, accounts, errors, throttled, digest, load)
            runs[kind] = (run, served)
    finally:
        conn.send("stop")
        server.join(timeout=10)
    return runs


def sizes_from(env: str, default: str) -> list[int]:
    return [int(part) for part in os.environ.get(env, default).split(",")]


def floor_s(reads: int) -> float:
    """The least time ARM's bucket allows for `reads` reads of one subscription."""
    return max(0.0, (reads - BUCKET) / REFILL_PER_S)


def per_class(served: Served) -> dict[str, tuple[float, int, int]]:
    """(mean, max, accounts) of the answered requests per account, by class."""
    found: dict[str, list[int]] = {}
    for name, kind in served.classes.items():
        found.setdefault(kind, []).append(served.reads.get(name, 0))
    return {k: (sum(v) / len(v), max(v), len(v)) for k, v in sorted(found.items())}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    fleet_sizes = sizes_from(SIZES_ENV, "1000,10000")
    baseline_sizes = sizes_from(BASELINE_SIZES_ENV, "1000")
    runs: dict[tuple[int, str], tuple[Run, Served]] = {}
    for size in sorted(set(fleet_sizes) | set(baseline_sizes)):
        kinds = ("fleet", "per-account") if size in baseline_sizes else ("fleet",)
        for kind, measured in _measure(size, kinds).items():
            runs[(size, kind)] = measured
    return "\n".join(
        [
            *_header(),
            *_rows(runs),
            "",
            *_targets(runs, fleet_sizes, baseline_sizes),
            "",
            *notes(max(fleet_sizes)),
        ]
    )


def _header() -> list[str]:
    largest = sizes(10_000, SUBSCRIPTIONS)[0]
    return [
        f"## Fleet: a skewed estate of {SUBSCRIPTIONS} subscriptions, ARM's read bucket modelled",
        "",
        f"Machine: {machine.describe()}. Command: `make bench` (`{SIZES_ENV}=... "
        f"{BASELINE_SIZES_ENV}=... python -m benchmarks fleet` for this section alone).",
        "",
        "The estate (testkit/fleets.py): the three largest subscriptions hold 15, 14 and 13 % of "
        f"the accounts ({largest} of 10,000 in the largest), the other 21 fewer each; every third "
        "account public, every fifth without a management policy, every eleventh FileStorage, "
        "every twentieth with local users on; the Standard Defender plan inherited everywhere but "
        "two small subscriptions where one account overrides it (plans PartiallyCovered) and one "
        f"on the Free plan. The fake ARM adds {MODELED_LATENCY_S * 1000:.0f} ms to every request "
        f"and models ARM's read bucket ({BUCKET} a subscription, refilled at {REFILL_PER_S} a "
        "second) and Resource Graph's example quota; "
        f"{CONCURRENCY} workers. Fleet: `run_fleet_audit` over a management group holding the "
        "24, results streamed. Per-account: `run_audit` for each subscription in turn, every "
        "read for every account. Requests: what the audit sent (the JSON summary's `requests`: "
        "retries and 429s included). Floor: the least time ARM's bucket allows the largest "
        "subscription for the reads it was answered, (reads - 250) / 25. Load: the 1-minute load "
        "average when the audit ended (2 shared cores).",
        "",
        "| accounts | path | wall time | requests | requests an account | largest subscription's "
        "reads | its floor | peak RSS | judged | read errors | 429s | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]


def _rows(runs: Mapping[tuple[int, str], tuple[Run, Served]]) -> list[str]:
    return [
        f"| {size} | {kind} | {r.seconds:.1f} s | {r.requests} | {r.requests / max(1, size):.2f} "
        f"| {s.largest} | {floor_s(s.largest):.0f} s | {r.peak_rss_mib:.0f} MiB | {r.accounts} "
        f"| {r.errors} | {r.throttled} | {r.load:.2f} |"
        for (size, kind), (r, s) in sorted(runs.items())
    ]


def _targets(
    runs: Mapping[tuple[int, str], tuple[Run, Served]],
    fleet_sizes: list[int],
    baseline_sizes: list[int],
) -> list[str]:
    biggest = max(fleet_sizes)
    fleet, served = runs[(biggest, "fleet")]
    classes = per_class(served)
    off_mean, off_max, off_count = classes["off"]
    equal = [
        (size, runs[(size, "fleet")][0].verdicts == runs[(size, "per-account")][0].verdicts)
        for size in sorted(baseline_sizes)
    ]
    described = {
        "off": "local users off, plan covering all or none",
        "users": "local users on",
        "mixed": "plan reporting a mix (the account's own setting read)",
        "files": "FileStorage (no blob reads)",
    }
    return [
        "| target | measured | load | verdict |",
        "| --- | --- | --- | --- |",
        f"| {biggest} accounts in under {TARGET_S_AT_10000:.0f} s | {fleet.seconds:.0f} s "
        f"(the bucket's floor for the largest subscription: {floor_s(served.largest):.0f} s) "
        f"| {fleet.load:.2f} | {_verdict(fleet.seconds < TARGET_S_AT_10000)} |",
        f"| at most {TARGET_READS} ARM reads an account without local users | mean "
        f"{off_mean:.2f}, max {off_max} over {off_count} accounts | {fleet.load:.2f} "
        f"| {_verdict(off_max <= TARGET_READS)} |",
        *(
            f"| verdicts equal to the per-account path at {size} | "
            f"{'equal' if same else 'DIFFERENT'} (digest of every account, rule and outcome) "
            f"| {runs[(size, 'fleet')][0].load:.2f} | {_verdict(same)} |"
            for size, same in equal
        ),
        "",
        f"ARM reads answered per account at {biggest}, by kind of account:",
        "",
        "| accounts | how many | mean | max |",
        "| --- | --- | --- | --- |",
        *(
            f"| {described[kind]} | {count} | {mean:.2f} | {most} |"
            for kind, (mean, most, count) in classes.items()
        ),
    ]


def notes(size: int) -> list[str]:
    """What the figures mean; the largest subscription's reads before and after counted from
    the estate itself (five reads a blob account before issue 47, one a FileStorage account)."""
    largest = [
        a for a in skewed_fleet(size, SUBSCRIPTIONS) if a.subscription == fleet_subscription(0)
    ]
    files = sum(a.body["kind"] == "FileStorage" for a in largest)
    blob, users = len(largest) - files, sum(bool(a.local_users) for a in largest)
    # The Defender plan, the atScope() role list, the lock list, the Backup vault list and
    # the one vault's instances: read once for the subscription.
    shared = 5
    before, now = 5 * blob + files + shared, TARGET_READS * blob + users + shared
    return [
        f"- The wall time sits just above the largest subscription's floor: ARM's bucket, not the "
        f"client, bounds the run, and only fewer reads per account lower it. That subscription "
        f"({len(largest)} accounts at {size}) needs {now} reads now ({blob} blob accounts at four, "
        f"{users} more for local users, {shared} shared); at the five reads a blob account of "
        f"before it needed {before}, a floor of {floor_s(before):.0f} s.",
        "- An account under a plan that reports a mix (PartiallyCovered) costs one read more, its "
        "own Defender setting, as an account with local users on does (their list). A FileStorage "
        "account needs no blob read; where its Defender setting is read and answers 404, the "
        'account itself is read once, to tell "no setting" from "deleted since the listing".',
        "- Requests an account counts everything the run sent: Resource Graph's pages, its role "
        "and subscription queries, each subscription's plan, atScope() list, lock list and Backup "
        "vaults, retries and 429s; the per-account path reads every facet of every account, ten "
        "reads a blob account (its own lock list holds its lock, so its group's is not read).",
    ]
