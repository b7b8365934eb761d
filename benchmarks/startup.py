"""The sweeper as users run it: `safetynet sweep` in a process of its own, start-up included,
against the raw batch ceiling and the naive loop in the same run; and what a start costs.

Through the 10 ms latency proxy, 1,000 stale rows (SQLite) and their pending blobs are swept
three ways in fresh containers: the seed's naive loop, raw Blob Batch deletes with no database
(the ceiling), and the CLI as a subprocess (ceiling and CLI alternated, median of
SWEEP_REPEATS). Then the interpreter start-ups: `safetynet --help`, `safetynet sweep` up to its
first blob request, and `import function_app` (what the Functions host pays on a cold start
before the first timer tick), each after one untimed run that writes the bytecode caches an
installed package has, and a `-X importtime` profile of the sweep's start.
"""

from __future__ import annotations

import os
import re
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
    _azurite_cpu,
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

CEILING_SHARE = 0.85
TARGET_NAIVE_SPEEDUP = 8.0
STARTUP_TARGET_S = 0.25
STARTUP_REPEATS = 5
SWEEP_REPEATS = 3
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


def _child_environment() -> dict[str, str]:
    """The environment with bytecode caches allowed: a deployed package has them, and without
    them every start compiles the SDKs anew (several times slower)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


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
            env=_child_environment(),
        )

    return sweep


Run = tuple[float, tuple[int, int], float, float]
"""Wall seconds, (rows, blobs) left, the 1-minute load average when the run began, and the
emulator's CPU seconds during the run (its share of a 2-core machine is not the sweeper's)."""


def _swept(
    direct: BlobServiceClient,
    proxied: BlobServiceClient,
    workdir: Path,
    action: Callable[[DocumentStore, ContainerClient, Sequence[str]], None],
    emulator_cpu: Callable[[], float],
) -> Run:
    container = _new_container(direct)
    store = _sqlite_store(workdir)
    names = _upload_pending(container, ROWS)
    _reserve_stale(store, names)
    through = proxied.get_container_client(container.container_name)
    load = os.getloadavg()[0]
    cpu_before = emulator_cpu()
    started = time.perf_counter()
    action(store, through, names)
    elapsed = time.perf_counter() - started
    emulator = emulator_cpu() - cpu_before
    left = _remaining(store, container)
    container.delete_container()
    store.engine.dispose()
    return elapsed, left, load, emulator


def _median_run(runs: Sequence[Run]) -> Run:
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2]


def _sweeps(azurite: Azurite, workdir: Path) -> dict[str, list[Run]]:
    direct = BlobServiceClient.from_connection_string(azurite.connection_string)
    with LatencyProxy(azurite.port, PROXY_DELAY_S) as proxy:
        proxied = BlobServiceClient.from_connection_string(proxy.connection_string)
        process = _sweep_process(proxy.connection_string)
        cpu = _azurite_cpu(azurite.port)
        runs: dict[str, list[Run]] = {
            "naive loop": [
                _swept(direct, proxied, workdir, lambda store, c, _: naive_sweep(store, c), cpu)
            ],
            "raw batch ceiling": [],
            "safetynet sweep (process)": [],
        }
        for _ in range(SWEEP_REPEATS):
            runs["raw batch ceiling"].append(
                _swept(
                    direct, proxied, workdir, lambda _, c, names: raw_batch_delete(c, names), cpu
                )
            )
            runs["safetynet sweep (process)"].append(
                _swept(direct, proxied, workdir, lambda store, c, _: process(store, c), cpu)
            )
        return runs


Start = tuple[float, float, float]
"""Median wall and CPU seconds, and the 1-minute load average before the first timed run."""


def _interpreter(arguments: Sequence[str]) -> Start:
    """Median (wall, CPU) seconds of `python ARGUMENTS` from spawn to exit, after one untimed
    run. CPU (user + system, the child's own counters) is what a quiet machine's wall time
    comes close to."""

    def once() -> None:
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [sys.executable, *arguments],
            check=True,
            capture_output=True,
            cwd=PROJECT_ROOT,
            env=_child_environment(),
        )

    once()
    load = os.getloadavg()[0]
    walls, cpus = [], []
    for _ in range(STARTUP_REPEATS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        once()
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), load


FUNCTION_ENTRY = "import sys; sys.path.insert(0, 'sweeper'); import function_app"
FIRST_TICK = FUNCTION_ENTRY + "; import blob_safetynet.function.sweep"
SDK_FLOOR = (
    "import sqlalchemy, sqlalchemy.dialects.sqlite, azure.storage.blob, "
    "azure.core.pipeline.transport._requests_basic"
)
"""What any sweep must import: SQLAlchemy with the SQLite dialect, the Blob SDK and its HTTP
transport, and nothing of this project. Timed ending with `os._exit`, as the sweep's
first-request figure ends, and with a normal exit (the interpreter's teardown of those
modules, which the process run no longer pays: the console script ends with `os._exit` after
its atexit handlers, docs/cli.md)."""


def _sweep_arguments(database: str, connection_string: str) -> list[str]:
    return [
        "sweep",
        "--db",
        database,
        "--connection-string",
        connection_string,
        "--container",
        "startup",
    ]


def _startups(connection_string: str, workdir: Path) -> dict[str, Start]:
    store = _sqlite_store(workdir)
    database = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    return {
        "python -c pass (the interpreter alone)": _interpreter(["-c", "pass"]),
        "the SDKs a sweep needs, imported alone (no project code)": _interpreter(
            ["-c", SDK_FLOOR + "; import os; os._exit(0)"]
        ),
        "the same, with the interpreter's normal exit": _interpreter(["-c", SDK_FLOOR]),
        "safetynet --help": _interpreter(["-m", "blob_safetynet.cli.main", "--help"]),
        "safetynet sweep, to its first blob request": _interpreter(
            ["-c", FIRST_REQUEST, *_sweep_arguments(database, connection_string)]
        ),
        "import azure.functions alone (what the programming model needs)": _interpreter(
            ["-c", "import azure.functions"]
        ),
        "import function_app (the Function's cold start)": _interpreter(["-c", FUNCTION_ENTRY]),
        "import function_app, then what the first sweep tick imports": _interpreter(
            ["-c", FIRST_TICK]
        ),
    }


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)$")
THIRD_PARTY = (
    "sqlalchemy",
    "azure",
    "requests",
    "urllib3",
    "charset_normalizer",
    "idna",
    "certifi",
    "cryptography",
    "cffi",
    "isodate",
    "typing_extensions",
)


def _import_profile(connection_string: str, workdir: Path) -> dict[str, float]:
    """Milliseconds of `-X importtime` self time of the sweep's start, by who owns the module:
    this project, the third-party packages it uses, the standard library."""
    store = _sqlite_store(workdir)
    database = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            FIRST_REQUEST,
            *_sweep_arguments(database, connection_string),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=_child_environment(),
    )
    owners = {"blob_safetynet": 0.0, "third-party": 0.0, "standard library and site": 0.0}
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match is None:
            continue
        root = match[2].split(".")[0]
        owner = (
            "blob_safetynet"
            if root == "blob_safetynet"
            else "third-party"
            if root in THIRD_PARTY or root.startswith("_cffi")
            else "standard library and site"
        )
        owners[owner] += int(match[1]) / 1000
    return owners


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    started = time.perf_counter()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, Azurite() as azurite:
        workdir = Path(tmp)
        runs = _sweeps(azurite, workdir)
        startups = _startups(azurite.connection_string, workdir)
        profile = _import_profile(azurite.connection_string, workdir)
    end_load = os.getloadavg()[0]
    naive = _median_run(runs["naive loop"])
    ceiling = _median_run(runs["raw batch ceiling"])
    process = _median_run(runs["safetynet sweep (process)"])
    share, speedup = ceiling[0] / process[0], naive[0] / process[0]
    interpreter = startups["python -c pass (the interpreter alone)"]

    def start_row(target: str, label: str) -> str:
        wall, cpu, at = startups[label]
        return (
            f"| {target} <= {STARTUP_TARGET_S} s | {wall:.2f} s (CPU {cpu:.2f} s) | "
            f"`python -c pass` {interpreter[0]:.2f} s (CPU {interpreter[1]:.2f} s) | {at:.1f} | "
            f"{_verdict(wall <= STARTUP_TARGET_S)} |"
        )

    sweep_start = startups["safetynet sweep, to its first blob request"]
    first_tick = startups["import function_app, then what the first sweep tick imports"]
    entry = startups["import function_app (the Function's cold start)"]
    floor = startups["the SDKs a sweep needs, imported alone (no project code)"]
    teardown = startups["the same, with the interpreter's normal exit"]
    imports_total = sum(profile.values())
    return "\n".join(
        [
            "## The sweeper as a process, and start-up",
            "",
            f"`python -m benchmarks startup` ({time.perf_counter() - started:.0f} s) on "
            f"{machine.describe()}; 1-minute load average {load:.1f} at the start, "
            f"{end_load:.1f} at the end (the machine is shared: wall times grow with it, CPU "
            "times much less).",
            "",
            "| target | measured | baseline (same run) | load average | result |",
            "| --- | --- | --- | ---: | --- |",
            f"| the sweep as a process >= {CEILING_SHARE:.0%} of the raw batch ceiling's rate | "
            f"{share:.0%} ({process[0]:.2f} s) | raw batch ceiling {ceiling[0]:.2f} s | "
            f"{process[2]:.1f} | {_verdict(share >= CEILING_SHARE)} |",
            f"| the sweep as a process >= {TARGET_NAIVE_SPEEDUP:.0f}x the naive loop | "
            f"{speedup:.1f}x ({process[0]:.2f} s) | naive loop {naive[0]:.2f} s | "
            f"{process[2]:.1f} | {_verdict(speedup >= TARGET_NAIVE_SPEEDUP)} |",
            start_row("`safetynet --help`", "safetynet --help"),
            start_row(
                "`safetynet sweep`, start-up to its first blob request",
                "safetynet sweep, to its first blob request",
            ),
            start_row(
                "the Function's cold start (import of `sweeper/function_app.py`)",
                "import function_app (the Function's cold start)",
            ),
            "",
            f"{ROWS:,} stale rows (SQLite) and their pending blobs, each way in a fresh container, "
            f"every blob request through the {PROXY_DELAY_S * 1000:.0f} ms latency proxy. The "
            "process run is `python -m blob_safetynet.cli.main sweep --db ... --connection-string ... "
            "--container ... --cutoff 15m` timed from spawn to exit: start-up, the first sweep's "
            "binding proof, the heartbeat and the sweep itself. The naive loop runs once, the "
            f"ceiling and the process {SWEEP_REPEATS} times each, alternated (the median is used). "
            f"The raw batch ceiling is itself {naive[0] / ceiling[0]:.1f}x the naive loop, and "
            f"Azurite's CPU at it is {ceiling[3]:.2f} s of its {ceiling[0]:.2f} s: the emulator's "
            "handling of the batches sets that bound, so a sweep paying nothing but its batches "
            f"would reach {naive[0] / ceiling[0]:.1f}x, not {TARGET_NAIVE_SPEEDUP:.0f}x.",
            "",
            "| run | wall times | Azurite CPU at each | rows, blobs left | load average at each |",
            "| --- | --- | --- | --- | --- |",
            *(
                f"| {label} | {', '.join(f'{r[0]:.2f} s' for r in each)} | "
                f"{', '.join(f'{r[3]:.2f} s' for r in each)} | "
                f"{', '.join(str(r[1]) for r in each)} | "
                f"{', '.join(f'{r[2]:.1f}' for r in each)} |"
                for label, each in runs.items()
            ),
            "",
            f"Start-up, median of {STARTUP_REPEATS} fresh interpreters after one untimed run that "
            "writes the bytecode caches (the sweep is stopped at its first blob request; the "
            "Function's figure is the import of `sweeper/function_app.py`, what the host pays "
            "to index the timers; the work's modules load on the first tick):",
            "",
            "| start | wall seconds | CPU seconds (user + system) | load average |",
            "| --- | ---: | ---: | ---: |",
            *(
                f"| {label} | {w:.2f} | {c:.2f} | {a:.1f} |"
                for label, (w, c, a) in startups.items()
            ),
            "",
            "Where `safetynet sweep`'s start goes (`python -X importtime`, self time of every "
            f"module imported before the first blob request, {imports_total:.0f} ms in all, "
            "inflated by the profiler itself): "
            + ", ".join(
                f"{owner} {ms:.0f} ms ({ms / imports_total:.0%})" for owner, ms in profile.items()
            )
            + f". The process run's {process[0] - ceiling[0]:.2f} s over the ceiling hold its "
            "start-up to the first blob request, the binding proof, the claim and finish "
            "queries, the heartbeat and the interpreter's exit; in CPU seconds, which the load "
            f"inflates less: the SDKs' imports alone take {floor[1]:.2f} s of the start's "
            f"{sweep_start[1]:.2f} s, and tearing their modules down at a normal exit "
            f"{teardown[1] - floor[1]:.2f} s, which `safetynet` skips (it ends with `os._exit` "
            "once its atexit handlers have run)"
            f"; the interpreter alone takes {interpreter[1]:.2f} s. The first sweep tick of "
            f"the Function adds {first_tick[0] - entry[0]:.2f} s of imports to the entry's.",
        ]
    )
