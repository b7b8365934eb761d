"""A fleet over 20 subscriptions: the Resource Graph fleet audit against today's per-subscription
path, in one run, on the fake ARM with a modelled round trip and ARM's default read budget.

The fake ARM (testkit.arm_fake) runs in a process of its own with a 10 ms delay on every
request and `model_arm_throttling`: a read bucket of 250 per subscription refilled at 25 a
second, and Resource Graph's example quota of 15 queries per 5 seconds (sources in
blob_safetynet/policies/throttle.py). Each audit runs in a fresh process, so its peak RSS
(ru_maxrss) is its own. `SAFETYNET_BENCH_FLEET_SIZES` (default "1000,10000") sets the fleet
sizes; on a shared machine run small ones: `SAFETYNET_BENCH_FLEET_SIZES=200,1000 python -m
benchmarks fleet`.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from benchmarks import machine
from blob_safetynet.policies.audit import Scope, StaticTokenCredential, run_audit
from blob_safetynet.policies.fleet import run_fleet_audit
from blob_safetynet.policies.throttle import SharedThrottle
from testkit.arm_fake import TOKEN, FakeArm, fleet, fleet_subscription

SUBSCRIPTIONS = 20
CONCURRENCY = 16
MODELED_LATENCY_S = 0.010
SIZES_ENV = "SAFETYNET_BENCH_FLEET_SIZES"
TARGET_S_AT_10000 = 300.0
TARGET_REQUEST_RATIO = 10.0
TARGET_RSS_MIB = 300.0
TARGET_RSS_GROWTH = 1.2


@dataclass(frozen=True)
class Run:
    seconds: float
    requests: int
    peak_rss_mib: float
    accounts: int
    errors: int
    throttled: int
    waited_s: float


def _serve(conn: Connection, accounts: int) -> None:
    with FakeArm(page_size=100, latency_seconds=MODELED_LATENCY_S) as fake:
        for account in fleet(accounts, subscriptions=SUBSCRIPTIONS):
            fake.add(account)
        conn.send((fake.endpoint, fake.ca_file))
        while conn.recv() == "count":
            conn.send(fake.requests)
            fake.model_arm_throttling()  # a fresh budget for the next audit


def _audit(conn: Connection, kind: str, endpoint: str, ca_file: str) -> None:
    """One audit in this (fresh) process; sends back its figures."""
    throttle = SharedThrottle()
    credential = StaticTokenCredential(TOKEN)
    started = time.perf_counter()
    subscriptions = tuple(fleet_subscription(n) for n in range(SUBSCRIPTIONS))
    options = {
        "arm_endpoint": endpoint,
        "connection_verify": ca_file,
        "concurrency": CONCURRENCY,
        "throttle": throttle,
    }
    accounts = errors = 0
    if kind == "fleet":
        judged = [0]
        report = run_fleet_audit(
            Scope("", subscriptions=subscriptions),
            credential,
            on_result=lambda _: judged.__setitem__(0, judged[0] + 1),
            keep_results=False,
            **options,  # type: ignore[arg-type]
        )
        accounts, errors = judged[0], len(report.all_errors)
    else:
        for subscription in subscriptions:
            report = run_audit(Scope(subscription), credential, **options)  # type: ignore[arg-type]
            accounts += len(report.results)
            errors += len(report.all_errors)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send((seconds, peak, accounts, errors, throttle.throttled, throttle.waited_s))


def _measure(size: int) -> tuple[Run, Run]:
    context = multiprocessing.get_context("spawn")
    conn, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, size), daemon=True)
    server.start()
    endpoint, ca_file = conn.recv()
    runs = []
    try:
        for kind in ("per-account", "fleet"):
            conn.send("count")
            before = conn.recv()
            mine, theirs = context.Pipe()
            worker = context.Process(target=_audit, args=(theirs, kind, endpoint, ca_file))
            worker.start()
            seconds, peak, accounts, errors, throttled, waited = mine.recv()
            worker.join()
            conn.send("count")
            requests = conn.recv() - before
            runs.append(Run(seconds, requests, peak, accounts, errors, throttled, waited))
    finally:
        conn.send("stop")
        server.join(timeout=10)
    return runs[0], runs[1]


def sizes() -> list[int]:
    return [int(part) for part in os.environ.get(SIZES_ENV, "1000,10000").split(",")]


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    measured = {size: _measure(size) for size in sizes()}
    rows = []
    for size, pair in measured.items():
        for label, timing in zip(
            ("per-account (today)", "fleet (Resource Graph)"), pair, strict=True
        ):
            rows.append(
                f"| {size} | {label} | {timing.seconds:.1f} s | {timing.requests} "
                f"| {timing.peak_rss_mib:.0f} MiB | {timing.accounts} | {timing.errors} "
                f"| {timing.throttled} | {timing.waited_s:.1f} s |"
            )
    biggest = max(measured)
    base, fleet_run = measured[biggest]
    ratio = base.requests / max(1, fleet_run.requests)
    smallest = min(measured)
    growth = fleet_run.peak_rss_mib / measured[smallest][1].peak_rss_mib
    checks = [
        f"- request count, per-account / fleet at {biggest}: {ratio:.2f}x "
        f"(target >= {TARGET_REQUEST_RATIO:.0f}x): "
        f"{'PASS' if ratio >= TARGET_REQUEST_RATIO else 'MISS'}; both paths make the same seven "
        "reads an account, because no cited source says Resource Graph holds what they read "
        '(docs/policies.md, "A fleet"): the fleet saves the listing requests only.',
        f"- peak RSS of the fleet audit at {biggest}: {fleet_run.peak_rss_mib:.0f} MiB "
        f"(target < {TARGET_RSS_MIB:.0f}), {growth:.2f}x the {smallest}-account run "
        f"(target <= {TARGET_RSS_GROWTH}x): "
        f"{'PASS' if fleet_run.peak_rss_mib < TARGET_RSS_MIB and growth <= TARGET_RSS_GROWTH else 'MISS'}.",
    ]
    if 10_000 in measured:
        at = measured[10_000][1].seconds
        checks.append(
            f"- 10,000 accounts in {at:.0f} s (target < {TARGET_S_AT_10000:.0f} s): "
            f"{'PASS' if at < TARGET_S_AT_10000 else 'MISS'}."
        )
    else:
        checks.append(
            f"- 10,000 accounts: not measured in this run (sizes: {', '.join(map(str, measured))})."
        )
    return "\n".join(
        [
            f"## Fleet: {SUBSCRIPTIONS} subscriptions, Resource Graph vs per-subscription listing",
            "",
            f"Machine: {machine.describe()}. Command: `make bench` (`{SIZES_ENV}=... "
            "python -m benchmarks fleet` for this section alone).",
            "",
            f"Compliant accounts dealt over {SUBSCRIPTIONS} subscriptions on the fake ARM, "
            f"{MODELED_LATENCY_S * 1000:.0f} ms added to every request, ARM's default read "
            "budget (250 a subscription, refilled at 25 a second) and Resource Graph's example "
            f"quota modelled, {CONCURRENCY} workers. Per-account: `run_audit` for each "
            "subscription in turn (today's path). Fleet: `run_fleet_audit` over the 20 "
            "subscriptions, results streamed (`keep_results=False`). Peak RSS is each audit's "
            "own process. Requests answered excludes the 429s, which are counted beside them.",
            "",
            "| accounts | path | wall time | requests answered | peak RSS | judged | read errors "
            "| 429s | gate waits (summed over threads) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            *checks,
        ]
    )
