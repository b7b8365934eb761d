"""The peak RSS of `safetynet audit` over a fleet on the fake ARM (no latency), every report
format written to a file, measured by /usr/bin/time -v: the figure of docs/policies.md ("A
fleet"). `python -m tests.policies.fleet_rss 1000 10000`; the load average is printed beside
each figure, since the machine may be shared."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from testkit.arm_fake import TOKEN, FakeArm, fleet_subscription, mixed_fleet
from tests import tree

SUBSCRIPTIONS = 20
FORMATS = ("json", "sarif", "junit", "csv", "table", "markdown", "html")


def _serve(conn: Connection, accounts: int) -> None:
    with FakeArm(page_size=100) as fake:
        for account in mixed_fleet(accounts, SUBSCRIPTIONS):
            fake.add(account)
        fake.management_groups["mg-all"] = set(fake.subscriptions())
        conn.send((fake.endpoint, fake.ca_file))
        conn.recv()


def command(folder: Path) -> list[str]:
    outputs = [f"--output={name}={folder / ('report.' + name)}" for name in FORMATS]
    return [
        "/usr/bin/time",
        "-v",
        str(tree.CONSOLE_SCRIPT),
        "audit",
        "--management-group",
        "mg-all",
        *outputs,
    ]


def measure(accounts: int) -> str:
    context = multiprocessing.get_context("spawn")
    conn, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, accounts), daemon=True)
    server.start()
    endpoint, ca_file = conn.recv()
    env = tree.environment(
        {
            **os.environ,
            "SAFETYNET_ARM_TOKEN": TOKEN,
            "REQUESTS_CA_BUNDLE": ca_file,
            "AZURE_SUBSCRIPTION_ID": fleet_subscription(0),
            "SAFETYNET_ARM_ENDPOINT": endpoint,
        }
    )
    try:
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            done = subprocess.run(command(Path(folder)), env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            sizes = {p.suffix: p.stat().st_size for p in Path(folder).iterdir()}
    finally:
        conn.send("stop")
        server.join(timeout=10)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    load = Path("/proc/loadavg").read_text().split()[0]
    return (
        f"{accounts} accounts: exit {done.returncode}, peak RSS "
        f"{int(peak[1]) / 1024 if peak else float('nan'):.0f} MiB, {seconds:.0f} s, "
        f"load average (1 min) {load}, report bytes {sizes}"
    )


if __name__ == "__main__":
    for size in sys.argv[1:]:
        print(measure(int(size)), flush=True)
