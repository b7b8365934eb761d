"""One active sweeper on databases without SKIP LOCKED: a renewed lease on a marker blob (seed 004)."""

from __future__ import annotations

import threading
from types import TracebackType

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobLeaseClient, ContainerClient

LEASE_BLOB = ".safetynet/sweeper.lease"
LEASE_SECONDS = 60
"""Leases last 15-60 s (or forever); a crashed sweeper's lease then expires on its own."""


class SweepLeaseHeldError(RuntimeError):
    """Another sweeper holds the lease; this one does nothing rather than race it."""


class SweepLease:
    """Held for a `with` block and renewed in the background every third of its duration."""

    def __init__(self, container: ContainerClient, seconds: int = LEASE_SECONDS) -> None:
        self._blob = container.get_blob_client(LEASE_BLOB)
        self._seconds = seconds
        self._stop = threading.Event()
        self._lease: BlobLeaseClient | None = None
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> SweepLease:
        try:
            self._blob.upload_blob(b"", match_condition=MatchConditions.IfMissing)
        except HttpResponseError as error:
            if error.status_code not in (409, 412):
                raise
        try:
            self._lease = self._blob.acquire_lease(lease_duration=self._seconds)
        except HttpResponseError as error:
            if error.status_code == 409:
                raise SweepLeaseHeldError(
                    f"another sweeper holds the lease on {LEASE_BLOB}; not sweeping"
                ) from None
            raise
        self._renewer = threading.Thread(target=self._renew, name="sweep-lease", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        assert self._lease is not None
        while not self._stop.wait(self._seconds / 3):
            self._lease.renew()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self._lease is not None:
            self._lease.release()
