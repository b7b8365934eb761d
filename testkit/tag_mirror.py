"""A tag-guarding double's mirror of blob tags, so it can evaluate `x-ms-if-tags` without asking
Azurite for them: opt-in, for benchmarks, where the double's own Get Blob Tags would be a request
Azure never makes (it evaluates the condition inside the service).

The mirror learns a blob's tags only from requests that passed through the double and that it
models exactly (https://learn.microsoft.com/rest/api/storageservices/set-blob-tags; Put Blob's
`x-ms-tags`, https://learn.microsoft.com/rest/api/storageservices/put-blob):

- a Put Blob answered 2xx that carried `x-ms-tags` (and no copy source): the blob's tags are
  those, whatever it held before;
- a Set Blob Tags on the base blob (no `snapshot`, no `versionid`) answered 2xx: the body's
  tag set, replacing the old one;
- a Set Blob Tags the double itself refused (412): nothing changed.

Reads (GET, HEAD) change nothing. Any other request naming the blob (a delete, a copy, a
Put Blob without `x-ms-tags`, Put Block List, a snapshot's or version's tags, a lease, a
failure answered by Azurite) makes the mirror forget it; a write above blob level (a container
request, a batch) forgets every blob it could reach. A forgotten or never-seen blob is read
from Azurite, as the default double does.

A write that bypasses the double cannot be seen by it. The mirror's trust is therefore a
contract: the blobs it holds are written only through the double. `audit` checks it after the
fact (each mirrored blob's tags against Azurite's), names and forgets the blobs that differ,
and a caller about to act on a container directly calls it first (`release`).
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs, unquote, urlsplit

from blob_safetynet.embedded.proxy import BlobKey, blob_of, tags_in_header

READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _container_of(path: str) -> str:
    parts = unquote(urlsplit(path).path).split("/", 3)
    return parts[2] if len(parts) >= 3 else ""


def tags_in_body(body: bytes) -> dict[str, str]:
    """The tag set of a Set Blob Tags body (<Tags><TagSet><Tag><Key/><Value/>)."""
    root = ET.fromstring(body)  # noqa: S314 (a client's request on loopback)
    return {tag.findtext("Key", ""): tag.findtext("Value", "") for tag in root.iter("Tag")}


class TagMirror:
    """Blob tags as the requests passing through a double set them (module docstring)."""

    def __init__(self) -> None:
        self._tags: dict[BlobKey, dict[str, str]] = {}
        self._lock = threading.Lock()

    def known(self, key: BlobKey) -> dict[str, str] | None:
        with self._lock:
            tags = self._tags.get(key)
            return None if tags is None else dict(tags)

    def __len__(self) -> int:
        with self._lock:
            return len(self._tags)

    def observe(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, status: int
    ) -> None:
        """Learn from, or forget on, a request the service answered with `status`."""
        if method in READS:
            return
        key = blob_of(path)
        if key is None:
            self._forget_under(_container_of(path), "comp=batch" in path)
            return
        learned = _learned(method, path, headers, body, status)
        with self._lock:
            if learned is None:
                self._tags.pop(key, None)
            else:
                self._tags[key] = learned

    def _forget_under(self, container: str, everything: bool) -> None:
        with self._lock:
            for key in [k for k in self._tags if everything or not container or k[0] == container]:
                del self._tags[key]

    def audit(
        self, read: Callable[[BlobKey], dict[str, str] | None], container: str | None = None
    ) -> tuple[int, list[str]]:
        """(blobs checked, names of those whose tags differ from `read`'s, a missing blob
        included); the differing ones are forgotten, and with `container` every one of its
        blobs is (the caller takes it back)."""
        with self._lock:
            held = [(k, v) for k, v in self._tags.items() if container in (None, k[0])]
        stale = [key for key, tags in held if read(key) != tags]
        with self._lock:
            for key in stale:
                self._tags.pop(key, None)
            if container is not None:
                for key, _ in held:
                    self._tags.pop(key, None)
        return len(held), [f"{c}/{b}" for c, b in stale]


def _learned(
    method: str, path: str, headers: Mapping[str, str], body: bytes, status: int
) -> dict[str, str] | None:
    """The blob's tags after this request, where the mirror models it exactly; else None."""
    if method != "PUT" or not 200 <= status < 300:
        return None
    query = parse_qs(urlsplit(path).query)
    lowered = {k.lower(): v for k, v in headers.items()}
    if "snapshot" in query or "versionid" in query:
        return None
    comp = query.get("comp")
    if comp == ["tags"]:
        return tags_in_body(body)
    if comp is None and "x-ms-tags" in lowered and "x-ms-copy-source" not in lowered:
        return tags_in_header(lowered["x-ms-tags"])
    return None
