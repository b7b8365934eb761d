"""Blob clients whose connection pool is as large as the thread pool that shares them.

The SDK's default transport keeps at most 10 connections per host (requests' HTTPAdapter); the
11th concurrent request opens a connection that is thrown away after use, and urllib3 warns
"Connection pool is full, discarding connection" each time. A client shared by N threads gets a
pool of N here instead.
"""

from __future__ import annotations

import requests
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import BlobClient, ContainerClient


def pooled_transport(size: int, *, shared: bool = False) -> RequestsTransport:
    """A transport holding up to `size` connections per host. Owned by the one client it serves,
    or `shared` by several (then closing one of them leaves the connections to the others)."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=size)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return RequestsTransport(session=session, session_owner=not shared)


def pooled_container(container: ContainerClient, size: int) -> ContainerClient:
    """The same container, with the same credential, through a pool of `size` connections."""
    return ContainerClient.from_container_url(
        container.url, credential=container.credential, transport=pooled_transport(size)
    )


def pooled_blob(blob: BlobClient, size: int) -> BlobClient:
    """The same blob, with the same credential, through a pool of `size` connections."""
    return BlobClient.from_blob_url(
        blob.url, credential=blob.credential, transport=pooled_transport(size)
    )
