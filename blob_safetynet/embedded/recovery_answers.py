"""The shapes of the recovery double's own answers: a kept copy's bytes (with ranges), its
listing entries, and a listing extended with them (`blob_safetynet.embedded.recovery`)."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any

from blob_safetynet.embedded.proxy import UpstreamAnswer, error_body

if TYPE_CHECKING:
    from blob_safetynet.embedded.recovery_nets import Kept


def http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC), usegmt=True)


def answer(status: int, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> Any:
    return UpstreamAnswer(
        status, str(status), [*(headers or []), ("Content-Length", str(len(body)))], body
    )


def error(status: int, code: str) -> Any:
    body = error_body(code)
    headers = [("x-ms-error-code", code), ("Content-Type", "application/xml")]
    return UpstreamAnswer(status, code, [*headers, ("Content-Length", str(len(body)))], body)


def read_answer(kept: Kept, head: bool, wanted: str | None) -> Any:
    """Get Blob (or its HEAD) of a kept copy, honouring `x-ms-range` as the SDK's download asks."""
    total = len(kept.data)
    headers = [
        ("Content-Type", "application/octet-stream"),
        ("ETag", kept.etag),
        ("Last-Modified", http_date(kept.written)),
        ("x-ms-creation-time", http_date(kept.written)),
        ("x-ms-blob-type", "BlockBlob"),
        ("Accept-Ranges", "bytes"),
        ("x-ms-tag-count", str(len(kept.tags))),
        (("x-ms-version-id" if kept.kind == "version" else "x-ms-snapshot"), kept.ident),
    ]
    md5 = base64.b64encode(kept.md5).decode()
    if head or not wanted or not total:
        body = b"" if head else kept.data
        return UpstreamAnswer(
            200, "OK", [*headers, ("Content-MD5", md5), ("Content-Length", str(total))], body
        )
    start_text, _, end_text = wanted.removeprefix("bytes=").partition("-")
    start = int(start_text)
    end = min(int(end_text) if end_text else total - 1, total - 1)
    body = kept.data[start : end + 1]
    headers += [
        ("Content-Range", f"bytes {start}-{end}/{total}"),
        ("x-ms-blob-content-md5", md5),
        ("Content-Length", str(len(body))),
    ]
    return UpstreamAnswer(206, "Partial Content", headers, body)


def extended(response: Any, parent: str, entries: Iterator[ET.Element]) -> Any:
    """A listing with `entries` appended under its <Blobs> or <Containers>."""
    body = response.read()
    if not 200 <= response.status < 300:
        return UpstreamAnswer(response.status, response.reason, response.getheaders(), body)
    root = ET.fromstring(body)  # noqa: S314 (Azurite's answer on loopback)
    holder = root.find(parent)
    if holder is None:
        holder = ET.SubElement(root, parent)
    holder.extend(entries)
    rewritten = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return UpstreamAnswer(response.status, response.reason, response.getheaders(), rewritten)


def merged_listing(response: Any, kept: Callable[[str | None], Iterator[ET.Element]]) -> Any:
    """A List Blobs page with the kept copies whose names fall in it merged in, in name order,
    as the service lists them ("Blobs are listed in alphabetical order",
    https://learn.microsoft.com/rest/api/storageservices/list-blobs). `kept(next_marker)` gives
    the copies up to the page's NextMarker (Azurite's marker is the page's last name; None on
    the last page), so each copy is listed on exactly one page."""
    body = response.read()
    if not 200 <= response.status < 300:
        return UpstreamAnswer(response.status, response.reason, response.getheaders(), body)
    root = ET.fromstring(body)  # noqa: S314 (Azurite's answer on loopback)
    holder = root.find("Blobs")
    if holder is None:
        holder = ET.SubElement(root, "Blobs")
    upper = root.findtext("NextMarker") or None
    entries = [*holder, *kept(upper)]
    for entry in list(holder):
        holder.remove(entry)
    holder.extend(sorted(entries, key=lambda e: e.findtext("Name") or ""))
    rewritten = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return UpstreamAnswer(response.status, response.reason, response.getheaders(), rewritten)


def list_entry(name: str, kept: Kept, days_left: int, with_tags: bool) -> ET.Element:
    """A kept copy as List Blobs shows it (https://learn.microsoft.com/rest/api/storageservices/list-blobs)."""
    entry = ET.Element("Blob")
    ET.SubElement(entry, "Name").text = name
    if kept.kind == "snapshot":
        ET.SubElement(entry, "Snapshot").text = kept.ident
    if kept.kind == "version":
        ET.SubElement(entry, "VersionId").text = kept.ident
    if kept.deleted:
        ET.SubElement(entry, "Deleted").text = "true"
    properties = ET.SubElement(entry, "Properties")
    values = [
        ("Creation-Time", http_date(kept.written)),
        ("Last-Modified", http_date(kept.written)),
        ("Etag", kept.etag),
        ("Content-Length", str(len(kept.data))),
        ("Content-Type", "application/octet-stream"),
        ("Content-MD5", base64.b64encode(kept.md5).decode()),
        ("BlobType", "BlockBlob"),
    ]
    if kept.deleted:
        values += [
            ("DeletedTime", http_date(kept.kept_at)),
            ("RemainingRetentionDays", str(days_left)),
        ]
    for tag, value in values:
        ET.SubElement(properties, tag).text = value
    if with_tags and kept.tags:
        tag_set = ET.SubElement(ET.SubElement(entry, "Tags"), "TagSet")
        for name_, text in sorted(kept.tags.items()):
            element = ET.SubElement(tag_set, "Tag")
            ET.SubElement(element, "Key").text = name_
            ET.SubElement(element, "Value").text = text
    return entry
