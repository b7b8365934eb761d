"""The protocol's cost under load: N concurrent writers through reserve -> upload -> seal ->
publish on PostgreSQL, against bare create-only uploads of the same sizes, in one run.

Every blob request goes through a double in front of Azurite that adds 10 ms per request (a
modeled cloud round trip), counts them by kind, and evaluates `x-ms-if-tags` on Set Blob Tags
as Azure does (testkit/service_doubles.py), so the round trips the protocol pays where the
condition is honoured are named, not guessed. The database is the local PostgreSQL server,
reached directly (no modeled latency): its statements are counted and timed per step instead.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import sqlalchemy as sa
from azure.storage.blob import BlobServiceClient, ContainerClient
from sqlalchemy.engine import Engine

from benchmarks import machine
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.store.documents import DocumentStore
from testkit.fault_proxy import LatencyProxy
from testkit.scratch_db import admin_url_from_environment, scratch_database
from testkit.service_doubles import tag_guarding_service

WRITERS = 8
KIB, MIB = 1024, 1024 * 1024
SIZES = ((4 * KIB, 25), (4 * MIB, 6))
"""(bytes per upload, uploads per writer) for each size."""
PROXY_DELAY_S = 0.010
TARGET_RATIO = 1.1
"""Goal: protocol p50 <= 1.1 x (bare 4 MiB upload p50 + one round trip)."""
SMALL_EXTRA_S = 0.015
"""Goal: protocol p50 at 4 KiB <= bare p50 + 15 ms."""
THROUGHPUT_SHARE = 0.45
"""Goal: at 4 KiB under 8 writers, protocol uploads/s >= 45 % of bare."""
PUT_REQUESTS, REPLACE_REQUESTS = 2, 3
REPLACES = 20
POSTGRES_ADMIN_URL = admin_url_from_environment()


@dataclass
class Run:
    label: str
    size: int
    latencies_s: list[float] = field(default_factory=list)
    steps_s: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)

    @property
    def uploads(self) -> int:
        return len(self.latencies_s)

    def p(self, q: int) -> float:
        return statistics.quantiles(self.latencies_s, n=100, method="inclusive")[q - 1]

    def per_upload_count(self, count: float) -> float:
        return count / self.uploads


def _label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


@contextmanager
def _scratch_store() -> Iterator[DocumentStore]:
    """A PostgreSQL database made for this run and dropped afterwards."""
    with scratch_database(POSTGRES_ADMIN_URL, prefix="safetynet_bench") as url:
        store = DocumentStore(sa.create_engine(url, pool_size=WRITERS, max_overflow=0))
        store.init_schema()
        try:
            yield store
        finally:
            store.engine.dispose()


def _run_writers(run: Run, upload_one: Callable[[int, int], None], per_writer: int) -> None:
    def writer(w: int) -> list[float]:
        times = []
        for i in range(per_writer):
            started = time.perf_counter()
            upload_one(w, i)
            times.append(time.perf_counter() - started)
        return times

    started = time.perf_counter()
    with ThreadPoolExecutor(WRITERS) as pool:
        for times in pool.map(writer, range(WRITERS)):
            run.latencies_s += times
    run.seconds = time.perf_counter() - started


def _bare(container: ContainerClient, size: int, per_writer: int) -> Run:
    run = Run("bare create-only upload", size)
    data = os.urandom(size)

    def upload(w: int, i: int) -> None:
        blobs.upload_create_only(container.get_blob_client(f"bare-{w}-{i}.bin"), data)

    _run_writers(run, upload, per_writer)
    return run


class StatementCounter:
    """Counts the SQL statements an engine sends (each one a database round trip)."""

    def __init__(self, engine: Engine) -> None:
        self.statements = 0
        sa.event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *_: object) -> None:
        self.statements += 1


def _protocol(
    store: DocumentStore,
    container: ContainerClient,
    size: int,
    per_writer: int,
    guards: blobs.TagGuards,
) -> Run:
    run = Run("protocol put", size)
    data = os.urandom(size)

    def upload(w: int, i: int) -> None:
        last = time.perf_counter()
        steps: list[tuple[str, float]] = []

        def checkpoint(step: str) -> None:
            nonlocal last
            now = time.perf_counter()
            steps.append((step, now - last))
            last = now

        UploadProtocol(store, container, checkpoint=checkpoint, guards=guards).put(
            f"doc-{size}-{w}-{i}", data, ".bin"
        )
        for step, seconds in steps:
            run.steps_s.setdefault(step, []).append(seconds)

    _run_writers(run, upload, per_writer)
    return run


@dataclass
class Sequential:
    """One writer's operations one after the other: requests and statements per operation."""

    label: str
    latencies_s: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    statements: int = 0

    def per(self, count: float) -> float:
        return count / len(self.latencies_s)


def _sequential(
    label: str,
    operation: Callable[[int], object],
    proxy: LatencyProxy,
    counter: StatementCounter,
) -> Sequential:
    result = Sequential(label)
    proxy.reset()
    before = counter.statements
    for i in range(REPLACES):
        started = time.perf_counter()
        operation(i)
        result.latencies_s.append(time.perf_counter() - started)
    result.requests = proxy.counts()
    result.statements = counter.statements - before
    return result


def _operations(
    proxy: LatencyProxy, through: ContainerClient, store: DocumentStore, guards: blobs.TagGuards
) -> list[Sequential]:
    """A put, the same steps as a resumed put (reserve, then complete: the statements a put
    sent before issue 24), and a replace of a put document, each REPLACES times at 4 KiB."""
    protocol = UploadProtocol(store, through, guards=guards)
    counter = StatementCounter(store.engine)
    data = os.urandom(4 * KIB)
    documents = []

    def put(i: int) -> None:
        documents.append(protocol.put(f"seq-{i}", data, ".bin"))

    def resumed(i: int) -> None:
        protocol.complete(protocol.reserve(f"resumed-{i}", ".bin").id, data)

    def replace(i: int) -> None:
        protocol.replace(documents[i].id, data, ".bin")

    read_back = UploadProtocol(store, through, guards=_ReadBack())
    old_documents = []

    def put_read_back(i: int) -> None:
        old_documents.append(read_back.put(f"old-{i}", data, ".bin"))

    def replace_read_back(i: int) -> None:
        read_back.replace(old_documents[i].id, data, ".bin")

    return [
        _sequential("put", put, proxy, counter),
        _sequential(
            "put, seal read back (the seal before issue 24)", put_read_back, proxy, counter
        ),
        _sequential("reserve + complete (a resumed put)", resumed, proxy, counter),
        _sequential("replace", replace, proxy, counter),
        _sequential("replace, read back (before issue 24)", replace_read_back, proxy, counter),
    ]


class _ReadBack(blobs.TagGuards):
    """Treats every endpoint as one that ignores x-ms-if-tags: the emulator workaround, which
    is the seal and retire every endpoint got before issue 24."""

    def enforced(self, container: ContainerClient) -> bool:
        return False


def _measure(
    proxy: LatencyProxy, proxied: BlobServiceClient, direct: BlobServiceClient, store: DocumentStore
) -> tuple[list[tuple[Run, Run]], list[Sequential]]:
    pairs = []
    guards = blobs.TagGuards()
    for size, per_writer in SIZES:
        runs: dict[str, Run] = {}
        # Warm-up (connections, first statements), then bare and protocol alternate order by size.
        for label in ("bare", "protocol") if size < MIB else ("protocol", "bare"):
            container = direct.create_container(f"bench{uuid.uuid4().hex[:20]}")
            through = proxied.get_container_client(container.container_name)
            blobs.upload_create_only(through.get_blob_client("warm-up"), b"w")
            guards.enforced(through)
            proxy.reset()
            if label == "bare":
                runs[label] = _bare(through, size, per_writer)
            else:
                runs[label] = _protocol(store, through, size, per_writer, guards)
            runs[label].requests = proxy.counts()
            container.delete_container()
        pairs.append((runs["bare"], runs["protocol"]))
    container = direct.create_container(f"bench{uuid.uuid4().hex[:20]}")
    sequential = _operations(
        proxy, proxied.get_container_client(container.container_name), store, guards
    )
    container.delete_container()
    return pairs, sequential


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def _kinds(requests: Counter[str], per: Callable[[float], float]) -> str:
    return ", ".join(f"`{k}` {per(n):.2f}" for k, n in sorted(requests.items()))


def _targets(pairs: list[tuple[Run, Run]], sequential: list[Sequential]) -> list[str]:
    (bare_small, proto_small), (bare_large, proto_large) = pairs
    replace_run = next(op for op in sequential if op.label == "replace")
    put_requests = sum(proto_small.requests.values()) / proto_small.uploads
    large_requests = sum(proto_large.requests.values()) / proto_large.uploads
    replace_requests = replace_run.per(sum(replace_run.requests.values()))
    small_budget = bare_small.p(50) + SMALL_EXTRA_S
    large_budget = TARGET_RATIO * (bare_large.p(50) + PROXY_DELAY_S)
    share = (proto_small.uploads / proto_small.seconds) / (bare_small.uploads / bare_small.seconds)
    return [
        "| target | measured | verdict |",
        "| --- | --- | --- |",
        f"| put = {PUT_REQUESTS} blob requests | {put_requests:.2f} at 4 KiB, "
        f"{large_requests:.2f} at 4 MiB | "
        f"{_verdict(put_requests == PUT_REQUESTS == large_requests)} |",
        f"| 4 KiB p50 <= bare p50 + {SMALL_EXTRA_S * 1000:.0f} ms = {_ms(small_budget)} | "
        f"{_ms(proto_small.p(50))} (bare {_ms(bare_small.p(50))}) | "
        f"{_verdict(proto_small.p(50) <= small_budget)} |",
        f"| 4 MiB p50 <= {TARGET_RATIO} x (bare p50 + {PROXY_DELAY_S * 1000:.0f} ms) = "
        f"{_ms(large_budget)} | {_ms(proto_large.p(50))} (bare {_ms(bare_large.p(50))}) | "
        f"{_verdict(proto_large.p(50) <= large_budget)} |",
        f"| replace = {REPLACE_REQUESTS} blob requests | {replace_requests:.2f} | "
        f"{_verdict(replace_requests == REPLACE_REQUESTS)} |",
        f"| {WRITERS} writers at 4 KiB: protocol uploads/s >= {THROUGHPUT_SHARE:.0%} of bare | "
        f"{share:.0%} | {_verdict(share >= THROUGHPUT_SHARE)} |",
    ]


def run() -> str:
    """The Markdown section for docs/benchmarks.md."""
    started = time.perf_counter()
    load = os.getloadavg()[0]
    with Azurite() as azurite, tag_guarding_service(azurite.port, delay_s=PROXY_DELAY_S) as proxy:
        direct = BlobServiceClient.from_connection_string(azurite.connection_string)
        proxied = BlobServiceClient.from_connection_string(proxy.connection_string)
        with _scratch_store() as store:
            server = store.engine.dialect.server_version_info
            pairs, sequential = _measure(proxy, proxied, direct, store)
    end_load = os.getloadavg()[0]
    rows = []
    for bare, proto in pairs:
        for r in (bare, proto):
            rows.append(
                f"| {_label(r.size)} | {r.label} | {r.uploads} | {r.uploads / r.seconds:.1f} "
                f"| {r.uploads * r.size / MIB / r.seconds:.1f} | {_ms(r.p(50))} | {_ms(r.p(99))} "
                f"| {_kinds(r.requests, r.per_upload_count)} |"
            )
    step_rows = [
        f"| {_label(proto.size)} | "
        + " | ".join(
            _ms(statistics.median(proto.steps_s.get(step, [0.0])))
            for step in ("reserve", "upload", "seal", "publish")
        )
        + " |"
        for _, proto in pairs
    ]
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
            f"{WRITERS} writer threads upload at once, through a double in front of one Azurite "
            f"that adds {PROXY_DELAY_S * 1000:.0f} ms per request and evaluates `x-ms-if-tags` on "
            "Set Blob Tags as Azure does (`tag_guarding_service`: Azurite ignores the condition, "
            "Azure answers 412). The baseline is a bare create-only upload "
            "(`upload_create_only`: If-None-Match `*`, tagged pending) of the same bytes; the "
            "candidate is the whole protocol (`UploadProtocol.put`: reserve row with its content "
            "record, the same upload, one guarded seal, publish) on a PostgreSQL database of its "
            "own. Latency is per upload, from the writer's call to its return; requests are "
            "counted by the double and divided by the uploads (warm-up and the once-per-endpoint "
            "condition probe are not counted). The double evaluates the condition by reading the "
            "blob's tags straight from Azurite inside the seal's request: that read is in the "
            "seal's time, and the double, the writers and the hashing share one Python process "
            "(and its GIL) on the shared cores.",
            "",
            *_targets(pairs, sequential),
            "",
            "| size | run | uploads | uploads/s | MiB/s | p50 | p99 | blob requests per upload |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
            *rows,
            "",
            "Median time of each protocol step (from the previous step's end):",
            "",
            "| size | reserve (DB insert) | upload | seal | publish (DB update) |",
            "| --- | ---: | ---: | ---: | ---: |",
            *step_rows,
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
