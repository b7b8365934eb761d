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
    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        expected = self.headers.get("x-ms-blob-if-match")
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        if not (
            self.command == "PUT" and "comp=tags" in self.path and expected and len(parts) == 4
        ):
            return super()._send_upstream(headers, body)
        with self.server.blob_lock(parts[2], parts[3]):
            blob = self.server.admin.get_blob_client(parts[2], parts[3])
            try:
                current = blob.get_blob_properties().etag
            except ResourceNotFoundError:
                current = None
            if current is not None and _bare(current) != _bare(expected):
                return _refusal(412, "ConditionNotMet", _NOT_MET)
        return super()._send_upstream(headers, body)


def etag_guarding_service(upstream_port: int, admin: BlobServiceClient) -> ServiceDouble:
    """A blob endpoint in front of Azurite whose Set Blob Tags honours x-ms-blob-if-match."""
    return ServiceDouble(upstream_port, _EtagGuardHandler, admin=admin)
