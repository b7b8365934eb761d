"""The tag-enforcing double (`tag_guarding_service`) in a process of its own, timed.

A benchmark whose double shares the client's process shares its GIL too: the double's request
handling, its own tag reads and the modeled latency's threads then count in the client's
latencies. `python -m testkit.double_process --upstream-port P --delay-s D` serves the same
handler (same condition evaluation, same per-blob lock, same delay) on a port it prints as its
first line, then answers one command per stdin line with one JSON line: `counts`, `timings`,
`reset`, `audit`, `release CONTAINER`, `quit`. `OutOfProcessDouble` starts and drives it.
With `--mirror` the condition is evaluated on the tags the double saw written
(testkit/tag_mirror.py), so Azurite serves a put's two requests only, as Azure would.

Each request is timed inside the double: `handler_s` from its headers read to its answer sent,
less the modeled delay; `tag_read_s`, the Get Blob Tags the double sends to Azurite to evaluate
`x-ms-if-tags` (Azure evaluates it inside the service, with no extra round trip), and
`tag_reads`, how many it sent (0 where the mirror answered); `upstream_s`,
from the blob's lock taken to the forwarded request's answer headers (the tag read included).
So a client's time splits into the delay, Azurite, the double's own work, and the client.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from types import TracebackType
from typing import IO, Any

from azure.storage.blob import BlobServiceClient

from blob_safetynet.embedded.azurite import dev_connection_string
from testkit.fault_proxy import request_kind
from testkit.service_doubles import DoubleServer, _TagGuardHandler
from testkit.tag_mirror import TagMirror

Timings = dict[str, dict[str, list[float]]]
"""kind -> measure (`handler_s`, `upstream_s`, `tag_read_s`) -> one value per request."""


class _TimedServer(DoubleServer):
    def __init__(self, upstream_port: int, delay_s: float, mirror: bool = False) -> None:
        admin = BlobServiceClient.from_connection_string(dev_connection_string(upstream_port))
        super().__init__(
            upstream_port,
            _TimedTagGuardHandler,
            admin=admin,
            delay_s=delay_s,
            tag_mirror=TagMirror() if mirror else None,
        )
        self.timings: Timings = defaultdict(lambda: defaultdict(list))
        self._timings_lock = threading.Lock()

    def add_timing(self, kind: str, measures: dict[str, float]) -> None:
        with self._timings_lock:
            for measure, seconds in measures.items():
                self.timings[kind][measure].append(seconds)

    def take_timings(self) -> Timings:
        with self._timings_lock:
            taken = {kind: dict(measures) for kind, measures in self.timings.items()}
            self.timings.clear()
        return taken


class _TimedTagGuardHandler(_TagGuardHandler):
    """`_TagGuardHandler` with its parts timed; what it answers is unchanged."""

    server: _TimedServer
    _measures: dict[str, float]

    def _forward(self) -> None:
        self._measures = {"tag_read_s": 0.0, "tag_reads": 0.0, "upstream_s": 0.0}
        started = time.perf_counter()
        super()._forward()
        self._measures["handler_s"] = time.perf_counter() - started - self.server.delay_s
        self.server.add_timing(request_kind(self.command, self.path), self._measures)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        started = time.perf_counter()
        try:
            return super()._send_upstream(headers, body)
        finally:
            self._measures["upstream_s"] += time.perf_counter() - started

    def _blob_tags(self, container: str, blob: str) -> dict[str, str]:
        started = time.perf_counter()
        try:
            return super()._blob_tags(container, blob)
        finally:
            self._measures["tag_read_s"] += time.perf_counter() - started
            self._measures["tag_reads"] += 1


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _answer(server: _TimedServer, command: str) -> object:
    if command == "counts":
        return dict(server.counts())
    if command == "timings":
        return {"timings": server.take_timings(), "cpu_s": _cpu_s()}
    if command == "audit" or command.startswith("release "):
        checked, stale = server.audit_mirror(command.partition(" ")[2] or None)
        return {"checked": checked, "stale": stale}
    if command == "reset":
        server.reset()
        server.take_timings()
        return {"cpu_s": _cpu_s()}
    return {"error": f"unknown command {command!r}"}


def serve(
    upstream_port: int, delay_s: float, commands: IO[str], answers: IO[str], mirror: bool = False
) -> None:
    """Serve until `quit` (or the end of `commands`); the port is the first line answered."""
    server = _TimedServer(upstream_port, delay_s, mirror)
    thread = threading.Thread(target=server.serve_forever, name="tag-double", daemon=True)
    thread.start()
    answers.write(f"{server.server_address[1]}\n")
    answers.flush()
    try:
        for line in commands:
            command = line.strip()
            if command == "quit":
                break
            answers.write(json.dumps(_answer(server, command)) + "\n")
            answers.flush()
    finally:
        server.shutdown()
        server.server_close()


class OutOfProcessDouble:
    """`with OutOfProcessDouble(azurite.port, delay_s) as double:` the tag-enforcing double in a
    child process; `double.connection_string`, `counts()`, `reset()` as the in-process one,
    and `timings()`: what the double measured since the last call (or reset)."""

    def __init__(self, upstream_port: int, delay_s: float = 0.0, *, mirror: bool = False) -> None:
        self.mirror = mirror
        self._argv = [
            sys.executable,
            "-m",
            "testkit.double_process",
            "--upstream-port",
            str(upstream_port),
            "--delay-s",
            repr(delay_s),
            *(["--mirror"] if mirror else []),
        ]
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self.port = 0
        self._cpu_at_reset_s = 0.0
        self.cpu_used_s = 0.0
        """The double's CPU seconds (user + system) from the last reset to the last timings."""

    def __enter__(self) -> OutOfProcessDouble:
        self._process = subprocess.Popen(  # noqa: S603 (this interpreter, fixed arguments)
            self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ
        )
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._process is not None
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write("quit\n")
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    @property
    def connection_string(self) -> str:
        return dev_connection_string(self.port)

    def _ask(self, command: str) -> Any:
        assert self._process is not None
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        with self._lock:
            self._process.stdin.write(command + "\n")
            self._process.stdin.flush()
            return json.loads(self._process.stdout.readline())

    def counts(self) -> Counter[str]:
        return Counter(self._ask("counts"))

    def reset(self) -> None:
        self._cpu_at_reset_s = self._ask("reset")["cpu_s"]

    def audit(self, container: str | None = None) -> tuple[int, list[str]]:
        """With a mirror: (blobs checked against Azurite, those whose tags differed, which the
        double forgot); with `container`, all of its blobs are forgotten too, as the caller
        takes it back to act on it directly. (0, []) without a mirror."""
        answer = self._ask(f"release {container}" if container else "audit")
        return answer["checked"], answer["stale"]

    def timings(self) -> Timings:
        answer = self._ask("timings")
        self.cpu_used_s = answer["cpu_s"] - self._cpu_at_reset_s
        timings: Timings = answer["timings"]
        return timings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testkit.double_process")
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--mirror", action="store_true", help="testkit/tag_mirror.py")
    args = parser.parse_args(argv)
    serve(args.upstream_port, args.delay_s, sys.stdin, sys.stdout, args.mirror)


if __name__ == "__main__":
    main()
