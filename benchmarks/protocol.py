"""The protocol's cost under load: N concurrent writers through reserve -> upload -> seal ->
publish on PostgreSQL, against bare create-only uploads of the same sizes, in one run.

Every blob request goes through a double in front of Azurite that adds 10 ms per request (a
modeled cloud round trip), counts them by kind, and evaluates `x-ms-if-tags` on Set Blob Tags
as Azure does (testkit/service_doubles.py), so the round trips the protocol pays where the
condition is honoured are named, not guessed. The double runs in a process of its own
(testkit/double_process.py) and times its own work, so this process holds only the writers:
each step's time splits into the modeled delay, Azurite, the double and the client. The
database is the local PostgreSQL server, reached directly (no modeled latency): its statements
are counted and timed per step instead.

Two such doubles run: one reads the blob's tags from Azurite for each condition (a request
Azure never makes), the other evaluates it on the tags it saw written (testkit/tag_mirror.py),
so Azurite serves a put's two requests only; the verdicts read that one. A two-request floor
(the bare upload, then an unconditional Set Blob Tags) shows what two sequential requests cost
on this machine and emulator without the protocol's code.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from azure.storage.blob import BlobClient, BlobServiceClient, ContainerClient
from sqlalchemy.engine import Engine

from benchmarks import machine
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from testkit.double_process import OutOfProcessDouble, Timings
from testkit.scratch_db import admin_url_from_environment, scratch_database

WRITERS = 8
KIB, MIB = 1024, 1024 * 1024
SIZES = ((4 * KIB, 8), (4 * MIB, 2))
"""(bytes per upload, uploads per writer per round) for each size."""
SINGLE_WRITER_UPLOADS = {4 * KIB: 12, 4 * MIB: 4}
"""Uploads per round of the one-writer profile runs, per size."""
ROUNDS = 3
"""Bare and protocol runs take turns this many times (the order flipped each round), so a
change in the shared machine's load falls on both alike."""
PROXY_DELAY_S = 0.010
TARGET_RATIO = 1.1
"""Goal: protocol p50 <= 1.1 x (bare 4 MiB upload p50 + one round trip)."""
SMALL_EXTRA_S = 0.015
"""Goal: protocol p50 at 4 KiB <= bare p50 + 15 ms."""
THROUGHPUT_SHARE = 0.45
"""Goal: at 4 KiB under 8 writers, protocol uploads/s >= 45 % of bare."""
PUT_REQUESTS, REPLACE_REQUESTS = 2, 3
REPLACES = 20
STEPS = ("reserve", "upload", "seal", "publish")
UPLOAD_KIND, SEAL_KIND = "PUT", "PUT comp=tags"
POSTGRES_ADMIN_URL = admin_url_from_environment()


def _load() -> float:
    return os.getloadavg()[0]


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used, from /proc; 0 where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # Fields 14 and 15 of proc(5) (utime, stime), counted from after the command's ")".
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> float:
    """CPU seconds all cores have spent busy since boot (every /proc/stat `cpu` field but idle
    and iowait); 0 where unreadable."""
    try:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass
class Run:
    label: str
    size: int
    writers: int = WRITERS
    mirror: bool = True
    """Through the double that evaluates x-ms-if-tags on its mirror (no tag read of its own)."""
    latencies_s: list[float] = field(default_factory=list)
    steps_s: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    double: Timings = field(default_factory=dict)
    double_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    azurite_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    """CPU seconds all the machine's processes used meanwhile (/proc/stat)."""
    statements: int = 0
    checkouts: int = 0
    load: tuple[float, float] = (99.0, 0.0)
    """(lowest load average at a round's start, highest at a round's end)."""

    @property
    def uploads(self) -> int:
        return len(self.latencies_s)

    @property
    def others_cpu_s(self) -> float:
        """What the machine's other processes (PostgreSQL's among them) used meanwhile."""
        return self.machine_cpu_s - self.client_cpu_s - self.double_cpu_s - self.azurite_cpu_s

    @property
    def rate(self) -> float:
        return self.uploads / self.seconds

    def p(self, q: int) -> float:
        return statistics.quantiles(self.latencies_s, n=100, method="inclusive")[q - 1]

    def per_upload_count(self, count: float) -> float:
        return count / self.uploads

    def azurite_requests(self) -> float:
        """Requests Azurite served per upload: the client's, and the double's own tag reads."""
        reads = sum(sum(m.get("tag_reads", [])) for m in self.double.values())
        return (sum(self.requests.values()) + reads) / self.uploads

    def in_double(self, kind: str, measure: str) -> float:
        """The median of one of the double's measures for requests of `kind`."""
        return _median(self.double.get(kind, {}).get(measure, []))


def _label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


@contextmanager
def _scratch_store() -> Iterator[DocumentStore]:
    """A PostgreSQL database made for this run and dropped afterwards, through the engine
    `DocumentStore.from_url` gives an application (pre-ping on checkout), one connection per
    writer."""
    with scratch_database(POSTGRES_ADMIN_URL, prefix="safetynet_bench") as url:
        store = DocumentStore.from_url(url, pool_size=WRITERS)
        store.init_schema()
        try:
            yield store
        finally:
            store.engine.dispose()


class StatementCounter:
    """Counts the SQL statements an engine sends, and its connection checkouts (each one a
    pre-ping: `SELECT 1`); each is a database round trip. A transaction's BEGIN and COMMIT,
    when there are any, are two more (the store sends none for a single statement)."""

    def __init__(self, engine: Engine) -> None:
        self.statements = 0
        self.checkouts = 0
        sa.event.listen(engine, "before_cursor_execute", self._count)
        sa.event.listen(engine, "checkout", self._checkout)

    def _count(self, *_: object) -> None:
        self.statements += 1

    def _checkout(self, *_: object) -> None:
        self.checkouts += 1


@dataclass
class Bench:
    """What every measured run shares: the doubles (reading Azurite's tags for each condition,
    and evaluating it on their mirror), the store and its statement counter."""

    reading: OutOfProcessDouble
    mirroring: OutOfProcessDouble
    store: DocumentStore
    counter: StatementCounter
    azurite_pid: int | None

    def measure(self, run: Run, upload_one: Callable[[int, int], None], per_writer: int) -> Run:
        """`run.writers` threads each call `upload_one(writer, i)` `per_writer` times; the
        figures are added to `run`'s, so several rounds make one run."""

        def writer(w: int) -> list[float]:
            times = []
            for i in range(per_writer):
                started = time.perf_counter()
                upload_one(w, i)
                times.append(time.perf_counter() - started)
            return times

        double = self.mirroring if run.mirror else self.reading
        double.reset()
        statements, checkouts = self.counter.statements, self.counter.checkouts
        load = _load()
        azurite_cpu, machine = process_cpu_s(self.azurite_pid), machine_cpu_s()
        cpu, started = time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(run.writers) as pool:
            for times in pool.map(writer, range(run.writers)):
                run.latencies_s += times
        run.seconds += time.perf_counter() - started
        run.client_cpu_s += time.process_time() - cpu
        run.azurite_cpu_s += process_cpu_s(self.azurite_pid) - azurite_cpu
        run.machine_cpu_s += machine_cpu_s() - machine
        run.load = (min(run.load[0], load), max(run.load[1], _load()))
        run.statements += self.counter.statements - statements
        run.checkouts += self.counter.checkouts - checkouts
        run.requests += double.counts()
        for kind, measures in double.timings().items():
            for measure, values in measures.items():
                run.double.setdefault(kind, {}).setdefault(measure, []).extend(values)
        run.double_cpu_s += double.cpu_used_s
        return run

    def release(self, run: Run, container: str) -> None:
        """Before `container` is deleted directly: the mirror's tags checked against Azurite's
        (a run whose mirror diverged measured verdicts the service would not give)."""
        if not run.mirror:
            return
        checked, stale = self.mirroring.audit(container)
        if stale:
            raise RuntimeError(
                f"the double's tag mirror differed from Azurite for {len(stale)} of {checked} "
                f"blobs of the {run.label} run (first: {stale[0]}): a write bypassed the double"
            )


def _bare(bench: Bench, container: ContainerClient, run: Run, per_writer: int) -> Run:
    data = os.urandom(run.size)

    def upload(w: int, i: int) -> None:
        blobs.upload_create_only(container.get_blob_client(f"bare-{w}-{i}.bin"), data)

    return bench.measure(run, upload, per_writer)


def two_bare_requests(blob: BlobClient, data: bytes) -> None:
    """The floor: the bare create-only upload, then an unconditional Set Blob Tags writing what
    the seal writes: two sequential blob requests, no database, no condition."""
    blobs.upload_create_only(blob, data)
    blob.set_blob_tags({STATE_TAG: COMMITTED})


def _floor(bench: Bench, container: ContainerClient, run: Run, per_writer: int) -> Run:
    data = os.urandom(run.size)

    def upload(w: int, i: int) -> None:
        two_bare_requests(container.get_blob_client(f"floor-{w}-{i}.bin"), data)

    return bench.measure(run, upload, per_writer)


def _protocol(
    bench: Bench, container: ContainerClient, run: Run, per_writer: int, guards: blobs.TagGuards
) -> Run:
    data = os.urandom(run.size)

    def upload(w: int, i: int) -> None:
        last = time.perf_counter()
        steps: list[tuple[str, float]] = []

        def checkpoint(step: str) -> None:
            nonlocal last
            now = time.perf_counter()
            steps.append((step, now - last))
            last = now

        UploadProtocol(bench.store, container, checkpoint=checkpoint, guards=guards).put(
            f"doc-{uuid.uuid4().hex}", data, ".bin"
        )
        for step, seconds in steps:
            run.steps_s.setdefault(step, []).append(seconds)

    return bench.measure(run, upload, per_writer)


@dataclass
class Sequential:
    """One writer's operations one after the other: requests and statements per operation."""

    label: str
    latencies_s: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    statements: int = 0

    def per(self, count: float) -> float:
        return count / len(self.latencies_s)


def _sequential(label: str, operation: Callable[[int], object], bench: Bench) -> Sequential:
    result = Sequential(label)
    bench.reading.reset()
    before = bench.counter.statements
    for i in range(REPLACES):
        started = time.perf_counter()
        operation(i)
        result.latencies_s.append(time.perf_counter() - started)
    result.requests = bench.reading.counts()
    result.statements = bench.counter.statements - before
    return result


def _operations(
    bench: Bench, through: ContainerClient, guards: blobs.TagGuards
) -> list[Sequential]:
    """A put, the same steps as a resumed put (reserve, then complete: the statements a put
    sent before issue 24), and a replace of a put document, each REPLACES times at 4 KiB."""
    protocol = UploadProtocol(bench.store, through, guards=guards)
    data = os.urandom(4 * KIB)
    documents = []

    def put(i: int) -> None:
        documents.append(protocol.put(f"seq-{i}", data, ".bin"))

    def resumed(i: int) -> None:
        protocol.complete(protocol.reserve(f"resumed-{i}", ".bin").id, data)

    def replace(i: int) -> None:
        protocol.replace(documents[i].id, data, ".bin")

    read_back = UploadProtocol(bench.store, through, guards=_ReadBack())
    old_documents = []

    def put_read_back(i: int) -> None:
        old_documents.append(read_back.put(f"old-{i}", data, ".bin"))

    def replace_read_back(i: int) -> None:
        read_back.replace(old_documents[i].id, data, ".bin")

    return [
        _sequential("put", put, bench),
        _sequential("put, seal read back (the seal before issue 24)", put_read_back, bench),
        _sequential("reserve + complete (a resumed put)", resumed, bench),
        _sequential("replace", replace, bench),
        _sequential("replace, read back (before issue 24)", replace_read_back, bench),
    ]


class _ReadBack(blobs.TagGuards):
    """Treats every endpoint as one that ignores x-ms-if-tags: the emulator workaround, which
    is the seal and retire every endpoint got before issue 24."""

    def enforced(self, container: ContainerClient) -> bool:
        return False


LABELS = {
    "bare": "bare create-only upload",
    "floor": "two bare requests (upload + Set Blob Tags)",
    "mirror": "protocol put (double's tag mirror)",
    "protocol": "protocol put (double reads tags)",
}
"""The runs of each size and writer count, in the order one round runs them (flipped the next)."""


@dataclass
class Pair:
    """One size's runs under WRITERS writers and under one: the bare upload, the two-request
    floor, and the put through each double."""

    bare: Run
    floor: Run
    mirror: Run
    protocol: Run
    bare_single: Run
    floor_single: Run
    mirror_single: Run
    protocol_single: Run

    def runs(self) -> tuple[Run, ...]:
        return (
            self.bare_single,
            self.floor_single,
            self.mirror_single,
            self.protocol_single,
            self.bare,
            self.floor,
            self.mirror,
            self.protocol,
        )


def _measure(
    bench: Bench, proxied: BlobServiceClient, mirrored: BlobServiceClient, direct: BlobServiceClient
) -> tuple[list[Pair], list[Sequential]]:
    pairs = []
    guards = blobs.TagGuards()
    for size, per_writer in SIZES:
        runs = {
            (label, writers): Run(name, size, writers, mirror=label != "protocol")
            for label, name in LABELS.items()
            for writers in (WRITERS, 1)
        }
        single = SINGLE_WRITER_UPLOADS[size]
        for writers, uploads in ((WRITERS, per_writer), (1, single)):
            for round_ in range(ROUNDS):
                for label in list(LABELS)[:: 1 if round_ % 2 else -1]:
                    run = runs[label, writers]
                    # A container per round, warmed up (connections) before it is measured.
                    container = direct.create_container(f"bench{uuid.uuid4().hex[:20]}")
                    client = mirrored if run.mirror else proxied
                    through = client.get_container_client(container.container_name)
                    blobs.upload_create_only(through.get_blob_client("warm-up"), b"w")
                    guards.enforced(through)
                    if label == "bare":
                        _bare(bench, through, run, uploads)
                    elif label == "floor":
                        _floor(bench, through, run, uploads)
                    else:
                        _protocol(bench, through, run, uploads, guards)
                    bench.release(run, container.container_name)
                    container.delete_container()
        pairs.append(Pair(*(runs[label, n] for n in (WRITERS, 1) for label in LABELS)))
    container = direct.create_container(f"bench{uuid.uuid4().hex[:20]}")
    sequential = _operations(bench, proxied.get_container_client(container.container_name), guards)
    container.delete_container()
    return pairs, sequential


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _ms1(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def _kinds(requests: Counter[str], per: Callable[[float], float]) -> str:
    return ", ".join(f"`{k}` {per(n):.2f}" for k, n in sorted(requests.items()))


def _loads(*runs: Run) -> str:
    return f"{min(r.load[0] for r in runs):.1f} / {max(r.load[1] for r in runs):.1f}"


def _targets(pairs: list[Pair], sequential: list[Sequential]) -> list[str]:
    """The verdicts, read on the mirror runs: there Azurite serves a put's two requests, as
    Azure would; the read-through run's figure is shown beside each."""
    small, large = pairs
    replace_run = next(op for op in sequential if op.label == "replace")
    put_requests = sum(small.mirror.requests.values()) / small.mirror.uploads
    large_requests = sum(large.mirror.requests.values()) / large.mirror.uploads
    replace_requests = replace_run.per(sum(replace_run.requests.values()))
    small_budget = small.bare.p(50) + SMALL_EXTRA_S
    large_budget = TARGET_RATIO * (large.bare.p(50) + PROXY_DELAY_S)
    share = small.mirror.rate / small.bare.rate
    bare_requests = sum(small.bare.requests.values()) / small.bare.uploads
    return [
        "| target | run the verdict reads | measured | baseline (same run) | load average "
        "(start / end) | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| put = {PUT_REQUESTS} blob requests | mirror | {put_requests:.2f} at 4 KiB, "
        f"{large_requests:.2f} at 4 MiB (Azurite served {small.mirror.azurite_requests():.2f}; "
        f"read-through run {small.protocol.azurite_requests():.2f}) | bare upload "
        f"{bare_requests:.2f} | {_loads(small.mirror, large.mirror)} | "
        f"{_verdict(put_requests == PUT_REQUESTS == large_requests)} |",
        f"| {WRITERS} writers, 4 KiB p50 <= bare p50 + {SMALL_EXTRA_S * 1000:.0f} ms | mirror | "
        f"{_ms(small.mirror.p(50))} (budget {_ms(small_budget)}; read-through run "
        f"{_ms(small.protocol.p(50))}) | bare {_ms(small.bare.p(50))}, two-request floor "
        f"{_ms(small.floor.p(50))} | {_loads(small.bare, small.mirror)} | "
        f"{_verdict(small.mirror.p(50) <= small_budget)} |",
        f"| {WRITERS} writers, 4 MiB p50 <= {TARGET_RATIO} x (bare p50 + "
        f"{PROXY_DELAY_S * 1000:.0f} ms) | mirror | {_ms(large.mirror.p(50))} "
        f"(budget {_ms(large_budget)}; read-through run {_ms(large.protocol.p(50))}) | bare "
        f"{_ms(large.bare.p(50))}, two-request floor {_ms(large.floor.p(50))} | "
        f"{_loads(large.bare, large.mirror)} | {_verdict(large.mirror.p(50) <= large_budget)} |",
        f"| replace = {REPLACE_REQUESTS} blob requests | read-through (one writer) | "
        f"{replace_requests:.2f} | read-back replace {_read_back_replace(sequential):.2f} | "
        f"{_loads(small.protocol)} | {_verdict(replace_requests == REPLACE_REQUESTS)} |",
        f"| {WRITERS} writers at 4 KiB: protocol uploads/s >= {THROUGHPUT_SHARE:.0%} of bare | "
        f"mirror | {share:.0%} ({small.mirror.rate:.1f}/s; read-through run "
        f"{small.protocol.rate / small.bare.rate:.0%}) | bare {small.bare.rate:.1f}/s, "
        f"two-request floor {small.floor.rate / small.bare.rate:.0%} of bare | "
        f"{_loads(small.bare, small.mirror)} | {_verdict(share >= THROUGHPUT_SHARE)} |",
    ]


def _floor_rows(pairs: list[Pair]) -> list[str]:
    """Per size and writer count: what the put adds to the two sequential requests the
    machine and the emulator charge for anyway."""
    rows = []
    for pair in pairs:
        for floor, mirror, reading in (
            (pair.floor, pair.mirror, pair.protocol),
            (pair.floor_single, pair.mirror_single, pair.protocol_single),
        ):
            rows.append(
                f"| {_label(floor.size)} | {floor.writers} | {_ms(floor.p(50))} | "
                f"{_ms(mirror.p(50))} | {(mirror.p(50) - floor.p(50)) * 1000:+.0f} ms | "
                f"{mirror.rate / floor.rate:.0%} | {_ms(reading.p(50))} | "
                f"{(reading.p(50) - floor.p(50)) * 1000:+.0f} ms | "
                f"{reading.rate / floor.rate:.0%} | {_loads(floor, mirror, reading)} |"
            )
    return rows


def _read_back_replace(sequential: list[Sequential]) -> float:
    op = next(op for op in sequential if op.label.startswith("replace, read back"))
    return op.per(sum(op.requests.values()))


def _profile_rows(pairs: list[Pair]) -> list[str]:
    """Per run: each step's median (a bare upload is one upload step), and the upload's and
    the seal's time split by who spends it."""
    rows = []
    for pair in pairs:
        for run in pair.runs():
            steps = [_median(run.steps_s.get(step, [])) for step in STEPS]
            if not run.steps_s:
                steps[1] = run.p(50)
            cells = ["-" if not s else _ms1(s) for s in steps]
            upload_double = run.in_double(UPLOAD_KIND, "handler_s")
            upload_azurite = run.in_double(UPLOAD_KIND, "upstream_s")
            rows.append(
                f"| {_label(run.size)} | {run.writers} | {run.label} | {_ms1(run.p(50))} | "
                + " | ".join(cells)
                + f" | {_ms1(upload_azurite)} / {_ms1(upload_double - upload_azurite)} / "
                f"{_ms1(steps[1] - PROXY_DELAY_S - upload_double)} | "
                f"{_seal_split(run, steps[2])} | "
                f"{run.statements / run.uploads:.1f} + {run.checkouts / run.uploads:.1f} | "
                f"{_ms1(run.client_cpu_s / run.uploads)} ({run.client_cpu_s / run.seconds:.2f}) | "
                f"{_ms1(run.double_cpu_s / run.uploads)} | "
                f"{_ms1(run.azurite_cpu_s / run.uploads)} ({run.azurite_cpu_s / run.seconds:.2f}) | "
                f"{_loads(run)} |"
            )
    return rows


def _seal_split(run: Run, seal_s: float) -> str:
    """The seal's double's tag read / Azurite's write / the double's other work / the client."""
    if not seal_s:
        return "-"
    seal_double = run.in_double(SEAL_KIND, "handler_s")
    seal_read = run.in_double(SEAL_KIND, "tag_read_s")
    seal_azurite = run.in_double(SEAL_KIND, "upstream_s") - seal_read
    return (
        f"{_ms1(seal_read)} / {_ms1(seal_azurite)} / "
        f"{_ms1(seal_double - seal_read - seal_azurite)} / "
        f"{_ms1(seal_s - PROXY_DELAY_S - seal_double)}"
    )


def _run_rows(pairs: list[Pair]) -> list[str]:
    rows = []
    for pair in pairs:
        for r in pair.runs():
            rows.append(
                f"| {_label(r.size)} | {r.writers} | {r.label} | {r.uploads} | {r.rate:.1f} "
                f"| {r.uploads * r.size / MIB / r.seconds:.1f} | {_ms(r.p(50))} | {_ms(r.p(99))} "
                f"| {_ms1(r.client_cpu_s / r.uploads)} ({r.client_cpu_s / r.seconds:.2f}) "
                f"| {_ms1(r.azurite_cpu_s / r.uploads)} ({r.azurite_cpu_s / r.seconds:.2f}) "
                f"| {r.machine_cpu_s / r.seconds:.2f} / {r.others_cpu_s / r.seconds:.2f} "
                f"| {_kinds(r.requests, r.per_upload_count)} | {_loads(r)} |"
            )
    return rows


def _hash_s(size: int) -> float:
    """The median time of SHA-256 over `size` random bytes, as the put computes it."""
    data = os.urandom(size)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _seal_parts(run: Run) -> tuple[float, float, float, float]:
    """The seal's median: (the double's tag read, Azurite's write, the double's other work,
    the client), the modeled delay being the rest."""
    seal = _median(run.steps_s.get("seal", []))
    handler = run.in_double(SEAL_KIND, "handler_s")
    read = run.in_double(SEAL_KIND, "tag_read_s")
    azurite = run.in_double(SEAL_KIND, "upstream_s") - read
    return read, azurite, handler - read - azurite, seal - PROXY_DELAY_S - handler


def _where_it_goes(pairs: list[Pair]) -> list[str]:
    """The paragraph that reads the profile: where each target's remaining time goes."""
    small, large = pairs
    lines = []
    for pair, budget in (
        (small, small.bare.p(50) + SMALL_EXTRA_S),
        (large, TARGET_RATIO * (large.bare.p(50) + PROXY_DELAY_S)),
    ):
        for proto, bare, floor in (
            (pair.mirror_single, pair.bare_single, pair.floor_single),
            (pair.mirror, pair.bare, pair.floor),
        ):
            read, azurite, double, client = _seal_parts(proto)
            database = _median(proto.steps_s.get("reserve", [])) + _median(
                proto.steps_s.get("publish", [])
            )
            upload = _median(proto.steps_s.get("upload", []))
            lines.append(
                f"- {_label(proto.size)}, {proto.writers} writer(s): the put's p50 is "
                f"{_ms(proto.p(50))}, the bare upload's {_ms(bare.p(50))} "
                f"(+{_ms(proto.p(50) - bare.p(50))}"
                + (f"; the target's budget is {_ms(budget)}" if proto.writers == WRITERS else "")
                + f"; the two-request floor's p50 is {_ms(floor.p(50))}, so the protocol's own "
                f"code adds {(proto.p(50) - floor.p(50)) * 1000:+.0f} ms to it"
                + f"). The seal is {PROXY_DELAY_S * 1000:.0f} ms of modeled delay, "
                f"{_ms1(read)} ms of the double's own tag read (the mirror run: none), "
                f"{_ms1(azurite)} ms of Azurite's tag write, {_ms1(double)} ms of the double's "
                f"other work and {_ms1(client)} ms in the client; reserve and publish together "
                f"{_ms1(database)} ms (hashing and 2 statements, each one round trip, plus 2 "
                f"pre-pings); the upload {_ms1(upload)} ms against the bare upload's "
                f"{_ms1(bare.p(50))} ms. Client CPU per put {_ms1(proto.client_cpu_s / proto.uploads)}"
                f" ms (bare {_ms1(bare.client_cpu_s / bare.uploads)} ms), the client process "
                f"{proto.client_cpu_s / proto.seconds:.2f} cores busy; Azurite "
                f"{_ms1(proto.azurite_cpu_s / proto.uploads)} ms CPU per put (bare "
                f"{_ms1(bare.azurite_cpu_s / bare.uploads)} ms), "
                f"{proto.azurite_cpu_s / proto.seconds:.2f} cores busy (one Node.js thread "
                f"serves its requests); the machine's {os.cpu_count()} cores "
                f"{proto.machine_cpu_s / proto.seconds:.2f} busy, "
                f"{proto.others_cpu_s / proto.seconds:.2f} of them other processes."
            )
    share = small.mirror.rate / small.bare.rate
    azurite_share = (small.bare.azurite_cpu_s / small.bare.uploads) / (
        small.mirror.azurite_cpu_s / small.mirror.uploads
    )
    client_share = (small.bare.client_cpu_s / small.bare.uploads) / (
        small.mirror.client_cpu_s / small.mirror.uploads
    )
    lines.append(
        f"- Throughput at 4 KiB, {WRITERS} writers (mirror run): the protocol reaches "
        f"{share:.0%} of bare, the two-request floor {small.floor.rate / small.bare.rate:.0%}, "
        f"the read-through run {small.protocol.rate / small.bare.rate:.0%}. Azurite spends "
        f"{azurite_share:.0%} as much CPU on a bare upload as on a put (its upload and the "
        f"seal's write: {small.mirror.azurite_requests():.2f} Azurite requests, "
        f"{small.protocol.azurite_requests():.2f} when the double reads the tags), and the "
        f"client {client_share:.0%} as much; where a shared resource (Azurite's thread, the "
        "2 cores) is the limit, the rate falls in that ratio, which the floor shows without "
        "the protocol's code."
    )
    return lines


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    started = time.perf_counter()
    load = _load()
    with (
        Azurite() as azurite,
        OutOfProcessDouble(azurite.port, PROXY_DELAY_S) as reading,
        OutOfProcessDouble(azurite.port, PROXY_DELAY_S, mirror=True) as mirroring,
    ):
        direct = BlobServiceClient.from_connection_string(azurite.connection_string)
        proxied = BlobServiceClient.from_connection_string(reading.connection_string)
        mirrored = BlobServiceClient.from_connection_string(mirroring.connection_string)
        with _scratch_store() as store:
            server = store.engine.dialect.server_version_info
            bench = Bench(reading, mirroring, store, StatementCounter(store.engine), azurite.pid)
            # One pooled connection per writer, opened before anything is measured.
            connections = [store.engine.connect() for _ in range(WRITERS)]
            for connection in connections:
                connection.close()
            pairs, sequential = _measure(bench, proxied, mirrored, direct)
    end_load = _load()
    operation_rows = [
        f"| {op.label} | {_ms(statistics.median(op.latencies_s))} | "
        f"{op.per(sum(op.requests.values())):.2f} ({_kinds(op.requests, op.per)}) | "
        f"{op.per(op.statements):.1f} |"
        for op in sequential
    ]
    return "\n".join(
        [
            "## Protocol cost under load",
            "",
            f"`python -m benchmarks protocol` ({time.perf_counter() - started:.0f} s) on "
            f"{machine.describe()}, PostgreSQL {'.'.join(map(str, server or ()))}; 1-minute "
            f"load average {load:.1f} at the start, {end_load:.1f} at the end (the machine is "
            "shared: latencies and rates move with it).",
            "",
            f"{WRITERS} writer threads (and, for the profile, 1) upload at once, through a "
            f"double in front of one Azurite that adds {PROXY_DELAY_S * 1000:.0f} ms per request "
            "and evaluates `x-ms-if-tags` on Set Blob Tags as Azure does "
            "(`tag_guarding_service`: Azurite ignores the condition, Azure answers 412). The "
            "double runs in a process of its own (`testkit/double_process.py`), so the "
            "benchmark's process holds only the writers, and it times its own work. The "
            "baseline is a bare create-only upload (`upload_create_only`: If-None-Match `*`, "
            "tagged pending) of the same bytes; the candidate is the whole protocol "
            "(`UploadProtocol.put`: reserve row with its content record, the same upload, one "
            "guarded seal, publish) on a PostgreSQL database of its own. Latency is per upload, "
            "from the writer's call to its return; requests are counted by the double and "
            "divided by the uploads (warm-up and the once-per-endpoint condition probe are not "
            "counted). Load averages are the 1-minute figure at the start and end of the runs "
            "a row compares.",
            "",
            "Two doubles serve the runs, alike but for how they evaluate `x-ms-if-tags`: one "
            "reads the blob's tags from Azurite for each condition (a Get Blob Tags Azure never "
            "sends: it evaluates the condition inside the service), the other evaluates it on a "
            "mirror of the tags it saw written through it (`testkit/tag_mirror.py`; its verdicts "
            "are held to the reading double's by `tests/testkit/test_tag_mirror.py`, and after "
            "each run it is checked against Azurite's tags before the container goes). The "
            "verdicts read the mirror run: its Azurite serves the two requests a put sends, as "
            "Azure would; the read-through run's figures stand beside them. The bare upload and "
            "the two-request floor (the bare upload, then an unconditional Set Blob Tags of the "
            "seal's tags: what the machine and the emulator charge for two sequential requests, "
            "without the database, the hashing or the condition) go through the mirroring "
            "double; they send no condition, so the mirror's only work on them is its "
            "bookkeeping (the double's CPU column).",
            "",
            *_targets(pairs, sequential),
            "",
            "Put against the two-request floor, same run: the put's p50 less the floor's is what "
            "the protocol's own code (SQL, hashing, the condition) adds to two sequential blob "
            "requests; the rate is the put's uploads/s over the floor's.",
            "",
            "| size | writers | floor p50 | put p50 (mirror) | put - floor | put/s of floor's "
            "| put p50 (double reads tags) | put - floor | put/s of floor's | load (start / end) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            *_floor_rows(pairs),
            "",
            "| size | writers | run | uploads | uploads/s | MiB/s | p50 | p99 | client CPU ms "
            "per upload (cores busy) | Azurite CPU ms per upload (cores busy) | machine's cores busy / "
            "of which other processes | blob requests per upload | load (start / end) |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
            *_run_rows(pairs),
            "",
            "Where a put's time goes (medians, ms). A step runs from the previous step's end "
            f"(reserve includes hashing the bytes); every blob request pays the "
            f"{PROXY_DELAY_S * 1000:.0f} ms delay. The double measures, per request, Azurite's "
            "answer time and its own work; the client's share is the step less the delay and "
            "the double's time (the client's SDK and Python work, its waits for the GIL, and "
            "loopback). The seal's tag read is the double's Get Blob Tags to evaluate the "
            "condition: Azure evaluates it inside the service, so that read is the emulator's "
            "cost, not the protocol's. CPU is the process's user + system time per put.",
            "",
            "| size | writers | run | p50 | reserve | upload | seal | publish | upload: Azurite / "
            "double / client | seal: double's tag read / Azurite write / double other / client "
            "| SQL statements + pre-pings per put | client CPU ms per put (cores busy) | double CPU ms per "
            "put | Azurite CPU ms per put (cores busy) | load (start / end) |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | ---: "
            "| --- | --- |",
            *_profile_rows(pairs),
            "",
            "The harness, changed for issue 35: the double (and its modeled latency) runs in a "
            "child process, so the writers' process no longer shares its GIL with the double's "
            "request handling and its own tag reads; the double times those (a tag read, "
            "Azurite's answer, the rest of its work) and reports them over its control pipe. "
            f"The bare, floor and both protocol runs take turns {ROUNDS} times, in flipped order, "
            "so a change of "
            "the shared machine's load falls on both. The store is the one "
            "`DocumentStore.from_url(url, pool_size=8)` gives an application (pre-ping on "
            "checkout, one pooled connection per writer, opened before the runs). CPU is "
            "counted per process: the client (this process), the double, Azurite (its Node.js "
            "process), and the machine as a whole (/proc/stat), so what other processes took "
            f"is the rest. Hashing is SHA-256 in C (hashlib; the GIL released, the bytes not "
            f"copied): {_ms1(_hash_s(4 * MIB))} ms for 4 MiB on this machine now, computed "
            "before the reservation, whose INSERT records it.",
            "",
            "Where the remaining milliseconds go, read from this run's profile:",
            "",
            *_where_it_goes(pairs),
            "",
            f"One writer, {REPLACES} operations each at 4 KiB, through the same double: blob "
            "requests and SQL statements (database round trips) per operation. The baselines "
            "run in the same process: the read-back rows take the emulator workaround (tags read "
            "before and after each tag write), which is what every endpoint got before issue 24; "
            "the resumed put (`reserve`, then `complete`) sends the statements every put sent "
            "before its content went into the reservation's INSERT (reserve, re-read the row, "
            "read the content record, write it, read it back, publish).",
            "",
            "| operation | p50 | blob requests | SQL statements |",
            "| --- | ---: | --- | ---: |",
            *operation_rows,
        ]
    )
