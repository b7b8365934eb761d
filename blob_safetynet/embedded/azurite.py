"""The local Azurite emulator as a managed component: started on a free port, stopped by PID."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from blob_safetynet.settings import appsettings, atomicfile
from blob_safetynet.settings.redaction import PUBLISHED_KEY

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ContainerClient

# Azurite's published development account; it exists only inside the emulator.
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = PUBLISHED_KEY

PROJECT_ROOT = Path(__file__).resolve().parents[2]
AZURITE_BIN_ENV = appsettings.AZURITE_BIN.name


class AzuriteError(RuntimeError):
    """Azurite could not be found, started or reached."""


def dev_blob_endpoint(port: int, scheme: str = "http") -> str:
    """The development account's blob endpoint served on `port` of 127.0.0.1."""
    return f"{scheme}://127.0.0.1:{port}/{DEV_ACCOUNT}"


def dev_connection_string(port: int, scheme: str = "http") -> str:
    """A connection string for the emulator's development account served on `port`."""
    return (
        f"DefaultEndpointsProtocol={scheme};AccountName={DEV_ACCOUNT};"
        f"AccountKey={DEV_KEY};BlobEndpoint={dev_blob_endpoint(port, scheme)};"
    )


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_azurite_bin() -> Path:
    """Locate `azurite-blob` from the project's `npm ci`, or from SAFETYNET_AZURITE_BIN."""
    override = os.environ.get(AZURITE_BIN_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise AzuriteError(f"{AZURITE_BIN_ENV}={override} does not name a file")
        return path
    if shutil.which("node") is None:
        raise AzuriteError("Node.js 20+ is required to run Azurite, and `node` is not on PATH")
    path = PROJECT_ROOT / "node_modules" / ".bin" / "azurite-blob"
    if path.is_file():
        return path
    if (PROJECT_ROOT / "package.json").is_file():
        raise AzuriteError(f"Azurite is not installed: run `npm ci` in {PROJECT_ROOT}")
    # An installed wheel: no checkout, no package.json beside the package.
    raise AzuriteError(
        f"Azurite is not installed: `npm install azurite`, then set {AZURITE_BIN_ENV} to the "
        "path of its azurite-blob"
    )


@dataclass(frozen=True)
class AzuriteTls:
    """HTTPS for the emulator: its certificate and key, and the CA that signed them (trusted
    only by the start-up probe here; clients pass it as `connection_verify`)."""

    cert: Path
    key: Path
    ca: Path
    oauth: bool = True
    """`--oauth basic`: accept bearer tokens (Azurite checks issuer, audience and lifetime,
    not the signature). Azurite allows OAuth only over HTTPS."""


class Azurite:
    """One Azurite blob endpoint on 127.0.0.1, in memory, for the lifetime of a `with` block.

    With `location`, data persists in that folder instead and the port stays the same across
    `stop()` and `start()`, so a test can restart the emulator under a running client. With
    `port`, it listens there (`safetynet local` uses Azurite's own default, 10000).
    """

    def __init__(
        self,
        start_timeout_s: float = 30.0,
        *,
        tls: AzuriteTls | None = None,
        location: Path | None = None,
        port: int = 0,
    ) -> None:
        self._start_timeout_s = start_timeout_s
        self._fixed_port = port
        self.tls = tls
        self._location = location
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self.port = 0

    @property
    def pid(self) -> int | None:
        """The emulator's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def exited(self) -> bool:
        """Whether the emulator was started and has since exited on its own."""
        return self._process is not None and self._process.poll() is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def blob_endpoint(self) -> str:
        return dev_blob_endpoint(self.port, self.scheme)

    @property
    def connection_string(self) -> str:
        return dev_connection_string(self.port, self.scheme)

    def start(self) -> Azurite:
        binary = find_azurite_bin()
        if self._fixed_port:
            self.port = self._fixed_port
        elif not (self.port and self._location):
            self.port = _free_loopback_port()
        storage = (
            ["--location", str(self._location)] if self._location else ["--inMemoryPersistence"]
        )
        self._workdir = tempfile.TemporaryDirectory(prefix="safetynet-azurite-")
        log = Path(self._workdir.name) / "azurite.log"
        command = [
            str(binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            *storage,
            # The pinned SDK sends a newer x-ms-version than the pinned Azurite knows (12.31.1
            # sends 2026-10-06, Azurite 3.37.0 serves up to 2026-06-06) and Azurite refuses it
            # with 400 InvalidHeaderValue unless told to skip the check.
            "--skipApiVersionCheck",
            "--disableTelemetry",
        ]
        if self.tls is not None:
            command += ["--cert", str(self.tls.cert), "--key", str(self.tls.key)]
            if self.tls.oauth:
                command += ["--oauth", "basic"]
        with atomicfile.create(log) as log_file:
            # cwd: Azurite drops its debug and extent files in the working directory.
            self._process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                command,
                cwd=self._workdir.name,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait_until_ready(log)
        return self

    def _wait_until_ready(self, log: Path) -> None:
        assert self._process is not None
        context = ssl.create_default_context(cafile=str(self.tls.ca)) if self.tls else None
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                output = log.read_text(errors="replace")[-2000:]
                self.stop()
                raise AzuriteError(f"Azurite exited during start-up:\n{output}")
            try:
                urllib.request.urlopen(  # noqa: S310 - our own loopback endpoint
                    f"{self.blob_endpoint}?comp=list", timeout=1, context=context
                )
            except urllib.error.HTTPError:
                return  # any HTTP answer (403 without a signature) means it is serving
            except OSError:
                time.sleep(0.1)
            else:
                return
        self.stop()
        raise AzuriteError(
            f"Azurite did not answer on port {self.port} in {self._start_timeout_s}s"
        )

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __enter__(self) -> Azurite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def create_unique_container(service: BlobServiceClient, prefix: str) -> ContainerClient:
    """A new container named `prefix` and 16 random hex digits.

    The client retries a create whose answer was lost (a timeout on a loaded machine); the
    retry then meets the container its first attempt made and gets 409. With a random name no one
    else can have made it, so 409 means created.
    """
    from azure.core.exceptions import ResourceExistsError

    name = f"{prefix}{uuid.uuid4().hex[:16]}"
    try:
        return service.create_container(name)
    except ResourceExistsError:
        return service.get_container_client(name)
