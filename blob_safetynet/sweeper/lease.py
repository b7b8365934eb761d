"""One active sweeper on databases without SKIP LOCKED: a renewed lease on a marker blob (seed 004).

The lease is enforced, not assumed: the sweep checks it before every chunk and stops when a
renewal failed (another sweeper may hold it now). The lease blob's metadata says who holds it
and since when, so a lease held past a limit (a hung sweeper, or an infinite lease someone took
by hand) is reported as stuck instead of being read as "another sweeper is busy" forever.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import TracebackType

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import BlobLeaseClient, ContainerClient

from blob_safetynet.settings import untrusted

LEASE_BLOB = ".safetynet/sweeper.lease"
LEASE_SECONDS = 60
"""Leases last 15-60 s (or forever); a crashed sweeper's lease then expires on its own."""
MAX_HOLD = timedelta(hours=1)
"""A sweeper holding the lease longer than this is reported as stuck."""
HOLDER, ACQUIRED, HEARTBEAT = "holder", "acquired_utc", "heartbeat_utc"

log = logging.getLogger("safetynet.sweeper")


class SweepLeaseHeldError(RuntimeError):
    """Another sweeper holds the lease; this one does nothing rather than race it."""


class SweepLeaseStuckError(RuntimeError):
    """The lease has been held past the limit (or forever): sweeps are not happening."""


class SweepLeaseLostError(RuntimeError):
    """A renewal failed: another sweeper may hold the lease now, so this one stops."""


def _now() -> datetime:
    return datetime.now(UTC)


def _acquired(metadata: dict[str, str]) -> tuple[datetime | None, str]:
    """When the holder says it took the lease, or None (not set yet) and why a value set cannot
    be read (malformed, or without a UTC offset: anyone who may write the metadata wrote it)."""
    value = metadata.get(ACQUIRED)
    if not value:
        return None, ""
    try:
        return untrusted.utc_time(value, f"its {ACQUIRED} metadata"), ""
    except untrusted.UntrustedInputError as error:
        return None, f" ({error})"


class SweepLease:
    """Acquired, renewed in the background every third of its duration, checked per chunk."""

    def __init__(
        self,
        container: ContainerClient,
        seconds: int = LEASE_SECONDS,
        max_hold: timedelta = MAX_HOLD,
        clock: Callable[[], datetime] = _now,
        renew_every: float | None = None,
    ) -> None:
        self._blob = container.get_blob_client(LEASE_BLOB)
        self._seconds = seconds
        self._max_hold = max_hold
        self._clock = clock
        self._renew_every = renew_every if renew_every is not None else seconds / 3
        self._holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._acquired = clock()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._lease: BlobLeaseClient | None = None
        self._renewer: threading.Thread | None = None
        self._lost: str | None = None

    def acquire(self) -> None:
        try:
            self._blob.upload_blob(b"", match_condition=MatchConditions.IfMissing)
        except HttpResponseError as error:
            if error.status_code not in (409, 412):
                raise
        try:
            self._lease = self._blob.acquire_lease(lease_duration=self._seconds)
        except HttpResponseError as error:
            if error.status_code == 409:
                raise self._judge_holder() from None
            raise
        self._heartbeat()
        self._renewer = threading.Thread(target=self._renew, name="sweep-lease", daemon=True)
        self._renewer.start()

    def _judge_holder(self) -> Exception:
        properties = self._blob.get_blob_properties()
        holder = properties.metadata.get(HOLDER, "an unknown holder")
        if properties.lease.duration == "infinite":
            return SweepLeaseStuckError(
                f"{LEASE_BLOB} is held by an infinite lease ({holder}); sweepers take "
                f"{self._seconds} s leases, so no sweep will run until it is broken "
                "(az storage blob lease break)"
            )
        since, unreadable = _acquired(properties.metadata)
        if since is not None and self._clock() - since > self._max_hold:
            return SweepLeaseStuckError(
                f"{LEASE_BLOB} has been held by {holder} since {since.isoformat()}, longer "
                f"than {self._max_hold}; that sweeper is hung or looping"
            )
        return SweepLeaseHeldError(
            f"another sweeper ({holder}) holds the lease on {LEASE_BLOB}; not sweeping{unreadable}"
        )

    def _heartbeat(self) -> None:
        assert self._lease is not None
        self._blob.set_blob_metadata(
            {
                HOLDER: self._holder,
                ACQUIRED: self._acquired.isoformat(),
                HEARTBEAT: self._clock().isoformat(),
            },
            lease=self._lease,
        )

    def _renew_once(self) -> None:
        assert self._lease is not None
        with self._lock:
            if self._lost is not None:
                raise SweepLeaseLostError(self._lost)
            try:
                self._lease.renew()
                self._heartbeat()
            except AzureError as error:
                code = getattr(error, "error_code", None) or type(error).__name__
                self._lost = f"lease renewal on {LEASE_BLOB} failed ({code}); sweep stopped"
                raise SweepLeaseLostError(self._lost) from None

    def _renew(self) -> None:
        while not self._stop.wait(self._renew_every):
            try:
                self._renew_once()
            except SweepLeaseLostError:
                return

    def ensure_held(self) -> None:
        """Renew now; raises SweepLeaseLostError when the lease is no longer ours."""
        self._renew_once()

    def release(self) -> str | None:
        """Stop renewing and release; a failure is returned as a warning, never raised."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self._lease is None or self._lost is not None:
            return None
        try:
            self._lease.release()
        except AzureError as error:
            warning = (
                f"releasing the lease on {LEASE_BLOB} failed ({type(error).__name__}); the "
                f"sweep's report stands, and a lease of ours expires within {self._seconds} s"
            )
            log.warning(warning)
            return warning
        return None

    def __enter__(self) -> SweepLease:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
