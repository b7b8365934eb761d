"""Azurite with the ETag condition on Set Blob Tags enforced, as Azure documents it.

Set Blob Tags takes `x-ms-blob-if-match` and answers 412 ConditionNotMet when the blob's ETag
differs (https://learn.microsoft.com/rest/api/storageservices/set-blob-tags). Azurite 3.37.0
accepts any value; `safetynet adopt` relies on the condition, so its tests run through this.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient

from testkit.service_doubles import _NOT_MET, ServiceDouble, _refusal, _TagGuardHandler


def _bare(etag: str) -> str:
    return etag.strip().strip('"')


class _EtagGuardHandler(_TagGuardHandler):
    """The ETag is compared and the tags written under the blob's lock, and every other write to
    the blob through this double takes the same lock, so no write lands between the comparison
    and the tag write."""

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        if self.command not in {"PUT", "DELETE"} or len(parts) != 4 or not parts[3]:
            return super()._send_upstream(headers, body)
        expected = self.headers.get("x-ms-blob-if-match")
        with self.server.blob_lock(parts[2], parts[3]):
            if self.command == "PUT" and "comp=tags" in self.path and expected:
                blob = self.server.admin.get_blob_client(parts[2], parts[3])
                try:
                    current = blob.get_blob_properties().etag
                except ResourceNotFoundError:
                    current = None
                if current is not None and _bare(current) != _bare(expected):
                    return _refusal(412, "ConditionNotMet", _NOT_MET)
                self._before_tag_write()
            return super()._send_upstream(headers, body)

    def _before_tag_write(self) -> None:
        """Called between the ETag comparison and the tag write; tests race a writer here."""


def etag_guarding_service(
    upstream_port: int,
    admin: BlobServiceClient,
    handler: type[_EtagGuardHandler] = _EtagGuardHandler,
) -> ServiceDouble:
    """A blob endpoint in front of Azurite whose Set Blob Tags honours x-ms-blob-if-match."""
    return ServiceDouble(upstream_port, handler, admin=admin)
