"""The sweeper as users run it: `safetynet sweep` in a process of its own, start-up included,
against the raw batch ceiling and the naive loop in the same run; and what a start costs.

Through the 10 ms latency proxy, 1,000 stale rows (SQLite) and their pending blobs are swept
three ways in fresh containers: the seed's naive loop, raw Blob Batch deletes with no database
(the ceiling), and the CLI as a subprocess. Then the interpreter start-ups: `safetynet --help`,
`safetynet sweep` up to its first blob request, and `import function_app` (what the Functions
host pays on a cold start before the first timer tick).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks import machine
from benchmarks.sweep import (
    PROXY_DELAY_S,
    ROWS,
    TARGET_SPEEDUP,
    _new_container,
    _remaining,
    _reserve_stale,
    _sqlite_store,
    _upload_pending,
    naive_sweep,
    raw_batch_delete,
)
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.store.documents import DocumentStore
from testkit.fault_proxy import LatencyProxy

CEILING_SHARE = 0.80
STARTUP_TARGET_S = 0.3
STARTUP_REPEATS = 5
PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIRST_REQUEST = (
    "import os, sys\n"
    "from azure.core.pipeline.transport import RequestsTransport\n"
    "RequestsTransport.send = lambda *_, **__: os._exit(0)\n"
    "from blob_safetynet.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]) or 99)\n"
)
"""Runs `safetynet ARGS` and ends the process (exit 0) at its first blob request; a run that
ends before sending one fails the benchmark."""


def _sweep_process(connection_string: str) -> Callable[[DocumentStore, ContainerClient], None]:
    def sweep(store: DocumentStore, container: ContainerClient) -> None:
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [
                sys.executable,
                "-m",
                "blob_safetynet.cli.main",
                "sweep",
                "--db",
                store.engine.url.render_as_string(hide_password=False),
                "--connection-string",
                connection_string,
                "--container",
                container.container_name,
                "--cutoff",
                "15m",
            ],
            check=True,
            capture_output=True,
            cwd=PROJECT_ROOT,
        )

    return sweep


def _swept(
    direct: BlobServiceClient,
    proxied: BlobServiceClient,
    workdir: Path,
    action: Callable[[DocumentStore, ContainerClient, Sequence[str]], None],
) -> tuple[float, tuple[int, int]]:
    container = _new_container(direct)
    store = _sqlite_store(workdir)
    names = _upload_pending(container, ROWS)
    _reserve_stale(store, names)
    through = proxied.get_container_client(container.container_name)
    started = time.perf_counter()
    action(store, through, names)
    elapsed = time.perf_counter() - started
    left = _remaining(store, container)
    container.delete_container()
    store.engine.dispose()
    return elapsed, left


def _sweeps(azurite: Azurite, workdir: Path) -> dict[str, tuple[float, tuple[int, int]]]:
    direct = BlobServiceClient.from_connection_string(azurite.connection_string)
    with LatencyProxy(azurite.port, PROXY_DELAY_S) as proxy:
        proxied = BlobServiceClient.from_connection_string(proxy.connection_string)
        process = _sweep_process(proxy.connection_string)
        actions: dict[str, Callable[[DocumentStore, ContainerClient, Sequence[str]], None]] = {
            "naive loop": lambda store, container, _: naive_sweep(store, container),
            "raw batch ceiling": lambda _, container, names: raw_batch_delete(container, names),
            "safetynet sweep (process)": lambda store, container, _: process(store, container),
        }
        return {label: _swept(direct, proxied, workdir, a) for label, a in actions.items()}


def _interpreter(arguments: Sequence[str]) -> tuple[float, float]:
    """Median (wall, CPU) seconds of `python ARGUMENTS` from spawn to exit. CPU (user +
    system, the child's own counters) is what a quiet machine's wall time comes close to."""
    walls, cpus = [], []
    for _ in range(STARTUP_REPEATS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [sys.executable, *arguments], check=True, capture_output=True, cwd=PROJECT_ROOT
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def _startups(connection_string: str, workdir: Path) -> dict[str, tuple[float, float]]:
    store = _sqlite_store(workdir)
    database = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    return {
        "python -c pass (the interpreter alone)": _interpreter(["-c", "pass"]),
        "safetynet --help": _interpreter(["-m", "blob_safetynet.cli.main", "--help"]),
        "safetynet sweep, to its first blob request": _interpreter(
            [
                "-c",
                FIRST_REQUEST,
                "sweep",
                "--db",
                database,
                "--connection-string",
                connection_string,
                "--container",
                "startup",
            ]
        ),
        "import function_app (the Function's cold start)": _interpreter(
            ["-c", "import sys; sys.path.insert(0, 'sweeper'); import function_app"]
        ),
    }


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    started = time.perf_counter()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, Azurite() as azurite:
        workdir = Path(tmp)
        runs = _sweeps(azurite, workdir)
        startups = _startups(azurite.connection_string, workdir)
    end_load = os.getloadavg()[0]
    naive = runs["naive loop"][0]
    ceiling = runs["raw batch ceiling"][0]
    process = runs["safetynet sweep (process)"][0]
    share, speedup = ceiling / process, naive / process
    cli = [
        startups["safetynet --help"][0],
        startups["safetynet sweep, to its first blob request"][0],
    ]
    cli_cpu = [
        startups["safetynet --help"][1],
        startups["safetynet sweep, to its first blob request"][1],
    ]

    def verdict(passed: bool) -> str:
        return "PASS" if passed else "MISS"

    return "\n".join(
        [
            "## The sweeper as a process, and start-up",
            "",
            f"`python -m benchmarks startup` ({time.perf_counter() - started:.0f} s) on "
            f"{machine.describe()}; 1-minute load average {load:.1f} at the start, "
            f"{end_load:.1f} at the end (the machine is shared: start-up times grow with it).",
            "",
            "| target | measured | verdict |",
            "| --- | --- | --- |",
            f"| the sweep as a process >= {CEILING_SHARE:.0%} of the raw batch ceiling's rate | "
            f"{share:.0%} ({process:.2f} s vs {ceiling:.2f} s) | "
            f"{verdict(share >= CEILING_SHARE)} |",
            f"| the sweep as a process >= {TARGET_SPEEDUP:.0f}x the naive loop | {speedup:.1f}x "
            f"({process:.2f} s vs {naive:.2f} s) | {verdict(speedup >= TARGET_SPEEDUP)} |",
            f"| `safetynet --help` and `safetynet sweep` start in <= {STARTUP_TARGET_S} s | "
            f"{cli[0]:.2f} s, {cli[1]:.2f} s (CPU {cli_cpu[0]:.2f} s, {cli_cpu[1]:.2f} s) | "
            f"{verdict(max(cli) <= STARTUP_TARGET_S)} on wall time |",
            "",
            f"{ROWS:,} stale rows (SQLite) and their pending blobs, each way in a fresh container, "
            f"every blob request through the {PROXY_DELAY_S * 1000:.0f} ms latency proxy. The "
            "process run is `python -m blob_safetynet.cli.main sweep --db ... --connection-string ... "
            "--container ... --cutoff 15m` timed from spawn to exit: start-up, the first sweep's "
            "binding proof, the lease, the heartbeat and the sweep itself.",
            "",
            "| run | wall time | rows, blobs left |",
            "| --- | ---: | --- |",
            *(f"| {label} | {s:.2f} s | {left} |" for label, (s, left) in runs.items()),
            "",
            f"Start-up, median of {STARTUP_REPEATS} fresh interpreters (the sweep is stopped at "
            "its first blob request; the Function's figure is the import of "
            "`sweeper/function_app.py`, what the host pays before the first timer tick):",
            "",
            "| start | wall seconds | CPU seconds (user + system) |",
            "| --- | ---: | ---: |",
            *(f"| {label} | {w:.2f} | {c:.2f} |" for label, (w, c) in startups.items()),
        ]
    )
